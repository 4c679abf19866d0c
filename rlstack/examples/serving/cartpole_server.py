"""A trainer that learns from simulators connecting over HTTP (1.13's
rllib/examples/serving/cartpole_server.py after the renames): no env of its own
(``env: None`` with the spaces), its input a PolicyServerInput per worker on ports
``--port``, ``--port + 1``... Start it, then run ``cartpole_client.py`` processes.

    python -m rlstack.examples.serving.cartpole_server --run PPO --framework torch
"""

from __future__ import annotations

import argparse
import os
import tempfile

import gymnasium as gym
import numpy as np

import ray
from rlstack.env.policy_server_input import PolicyServerInput
from rlstack.trainers.dqn import DQNTrainer
from rlstack.trainers.ppo import PPOTrainer
from rlstack.trainers.common.ray_start import init_local_ray

SERVER_ADDRESS = "127.0.0.1"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=9900, help="the first worker's port")
    parser.add_argument("--num-workers", type=int, default=0, help="workers, each a server on its own port")
    parser.add_argument("--run", default="PPO", choices=["PPO", "DQN"])
    parser.add_argument("--framework", default="torch", choices=["torch", "tf", "tf2"])
    parser.add_argument("--stop-iters", type=int, default=200)
    parser.add_argument("--stop-timesteps", type=int, default=500_000)
    parser.add_argument("--stop-reward", type=float, default=150.0)
    parser.add_argument("--checkpoint-dir", default=os.path.join(tempfile.gettempdir(), "cartpole-server"),
                        help="checkpoints go here; a new run starts from the last one unless --no-restore")
    parser.add_argument("--no-restore", action="store_true")
    return parser.parse_args(argv)


def make_input(port: int):
    def _input(ioctx):
        # The remote workers, or the driver's when there are none, serve; with remote
        # workers the driver's own worker does not sample.
        if ioctx.worker_index > 0 or ioctx.worker.num_workers == 0:
            offset = ioctx.worker_index - 1 if ioctx.worker_index > 0 else 0
            return PolicyServerInput(ioctx, SERVER_ADDRESS, port + offset)
        return None
    return _input


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if os.environ.get("RAY_ADDRESS"):
        ray.init(address=os.environ["RAY_ADDRESS"])
    else:  # our own Ray, its ports on 127.0.0.1 only
        init_local_ray(num_cpus=max(2, args.num_workers + 1), include_dashboard=False)
    config = {
        "env": None,
        "observation_space": gym.spaces.Box(-np.inf, np.inf, (4,), np.float32),
        "action_space": gym.spaces.Discrete(2),
        "input": make_input(args.port),
        "num_workers": args.num_workers,
        "off_policy_estimation_methods": {},
        "framework": args.framework,
        "log_level": "INFO",
    }
    if args.run == "DQN":
        config.update({"learning_starts": 100, "timesteps_per_iteration": 200, "n_step": 3,
                       "rollout_fragment_length": 4, "train_batch_size": 8,
                       "model": {"fcnet_hiddens": [64], "fcnet_activation": "linear"}})
        trainer = DQNTrainer(config=config)
    else:
        config.update({"rollout_fragment_length": 1000, "train_batch_size": 4000})
        trainer = PPOTrainer(config=config)
    marker = os.path.join(args.checkpoint_dir, "last_checkpoint.txt")
    if not args.no_restore and os.path.exists(marker):
        with open(marker) as f:
            trainer.restore(f.read().strip())
    for _ in range(args.stop_iters):
        result = trainer.train()
        print(f"iteration {result['training_iteration']}: reward {result['episode_reward_mean']:.1f}, "
              f"timesteps {result['timesteps_total']}", flush=True)
        path = trainer.save(args.checkpoint_dir)
        with open(marker, "w") as f:
            f.write(path)
        if result["episode_reward_mean"] >= args.stop_reward or result["timesteps_total"] >= args.stop_timesteps:
            break
    trainer.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
