"""The peer systems, each run in its own child process by bench/ppo_cartpole.py.

* RLlib 2.60 (new API stack), ``PPOConfig`` defaults with ``num_env_runners`` runners.
* Stable-Baselines3 with RL-Zoo's CartPole-v1 PPO hyper-parameters.

Each prints one JSON line in the same shape as rlstack's child.
"""

from __future__ import annotations

import json
import time

from harness import seconds_since_process_start


def rllib_child(workers: int, target: float, max_steps: int, seed: int) -> None:
    """RLlib 2.60 PPO with its defaults on CartPole-v1, until episode_return_mean >= target."""
    import ray
    from ray.rllib.algorithms.ppo import PPOConfig

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=workers)
        .framework("torch")
        .debugging(seed=seed)
    )
    algo = config.build_algo()
    ready = seconds_since_process_start()
    train_start = time.time()
    ret, steps, iterations = float("nan"), 0, 0
    while True:
        result = algo.train()
        iterations += 1
        runners = result.get("env_runners", {})
        ret = runners.get("episode_return_mean", float("nan"))
        steps = result.get("num_env_steps_sampled_lifetime") or runners.get("num_env_steps_sampled_lifetime", 0)
        if ret >= target or steps >= max_steps:
            break
    wall = seconds_since_process_start()
    print(json.dumps({
        "reached": bool(ret >= target), "wall_s": round(wall, 2), "start_to_ready_s": round(ready, 2),
        "env_steps": int(steps), "iterations": iterations,
        "env_steps_per_s": round(steps / (time.time() - train_start), 1), "final_reward": round(float(ret), 1),
    }))
    algo.stop()


def sb3_child(target: float, max_steps: int, seed: int) -> None:
    """SB3 PPO with RL-Zoo's CartPole-v1 hyper-parameters, until the mean return of the
    last 100 episodes >= target (SB3's own ep_info_buffer)."""
    import numpy as np
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    def linear(start: float):
        return lambda progress_remaining: progress_remaining * start

    class StopAtReward(BaseCallback):
        def _on_step(self) -> bool:
            buffer = self.model.ep_info_buffer
            return not (len(buffer) > 0 and np.mean([e["r"] for e in buffer]) >= target)

    env = make_vec_env("CartPole-v1", n_envs=8, seed=seed)
    model = PPO("MlpPolicy", env, n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20,
                ent_coef=0.0, learning_rate=linear(1e-3), clip_range=linear(0.2), seed=seed, device="cpu", verbose=0)
    ready = seconds_since_process_start()
    train_start = time.time()
    # RL-Zoo trains CartPole-v1 for 1e5 steps; the schedules run over that horizon.
    model.learn(total_timesteps=min(max_steps, 100_000), callback=StopAtReward())
    wall = seconds_since_process_start()
    buffer = model.ep_info_buffer
    ret = float(np.mean([e["r"] for e in buffer])) if buffer else float("nan")
    steps = int(model.num_timesteps)
    print(json.dumps({
        "reached": bool(ret >= target), "wall_s": round(wall, 2), "start_to_ready_s": round(ready, 2),
        "env_steps": steps, "iterations": steps // 256,
        "env_steps_per_s": round(steps / (time.time() - train_start), 1), "final_reward": round(ret, 1),
    }))
