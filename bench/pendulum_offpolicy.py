"""SAC, TD3 and DDPG on Pendulum-v1 with RL-Zoo's hyper-parameters: wall seconds from
process start to a mean return of -200 over the last 10 episodes, and gradient steps per
second — rlstack (torch and tf), Stable-Baselines3 and RLlib 2.60's SAC side by side.

    python bench/pendulum_offpolicy.py --runs 3                       # BENCHMARKS.md's table
    python bench/pendulum_offpolicy.py --runs 3 --only sac --with-rllib
    python bench/pendulum_offpolicy.py --runs 1 --only sac --frameworks torch --no-sb3   # rlstack alone

Runs are interleaved round by round (rlstack-torch, rlstack-tf, sb3, [rllib], then the next
algorithm), each in a fresh child process, so start-up counts. A run stops at the target,
at ``--max-steps`` env steps or after ``--max-wall`` seconds of training. Gradient steps
per second are counted from the first gradient step to the end of the run (the warm-up
steps before ``learning_starts`` sample only). One JSON line: medians, min-max, and the
rlstack/SB3 ratios round by round.

RL-Zoo (rl-baselines3-zoo hyperparams/*.yml, Pendulum): SAC lr 1e-3 and SB3's defaults
(256x256, batch 256, buffer 1e6, learning_starts 100, tau 0.005, gamma 0.99, one gradient
step per env step, automatic entropy); TD3 and DDPG gamma 0.98, buffer 200k,
learning_starts 10k, Gaussian action noise 0.1, lr 1e-3, 400x300, one gradient step per env
step, SB3's batch 256 and tau 0.005 (TD3: policy delay 2, target noise 0.2 clipped at 0.5).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import run_child, seconds_since_process_start, start_local_ray, summarise  # noqa: E402

TARGET = -200.0
WINDOW = 10

SAC_RL_ZOO = {
    "optimization": {"actor_learning_rate": 1e-3, "critic_learning_rate": 1e-3, "entropy_learning_rate": 1e-3},
    "Q_model": {"fcnet_hiddens": [256, 256], "fcnet_activation": "relu"},
    "policy_model": {"fcnet_hiddens": [256, 256], "fcnet_activation": "relu"},
    "gamma": 0.99,
    "tau": 0.005,
    "train_batch_size": 256,
    "buffer_size": 1_000_000,
    "learning_starts": 100,
    "prioritized_replay": False,
    "target_network_update_freq": 0,
    "rollout_fragment_length": 1,
    "target_entropy": "auto",
    "initial_alpha": 1.0,
}

_DETERMINISTIC_RL_ZOO = {
    "gamma": 0.98,
    "buffer_size": 200_000,
    "learning_starts": 10_000,
    "actor_lr": 1e-3,
    "critic_lr": 1e-3,
    "actor_hiddens": [400, 300],
    "critic_hiddens": [400, 300],
    "train_batch_size": 256,
    "tau": 0.005,
    "l2_reg": 0.0,
    "prioritized_replay": False,
    "target_network_update_freq": 0,
    "rollout_fragment_length": 1,
    # SB3 acts uniformly at random until learning starts, then adds N(0, 0.1) noise.
    "exploration_config": {"type": "GaussianNoise", "random_timesteps": 10_000, "stddev": 0.1,
                           "initial_scale": 1.0, "final_scale": 1.0},
}
TD3_RL_ZOO = {**_DETERMINISTIC_RL_ZOO, "twin_q": True, "policy_delay": 2, "smooth_target_policy": True,
              "target_noise": 0.2, "target_noise_clip": 0.5}
DDPG_RL_ZOO = {**_DETERMINISTIC_RL_ZOO, "twin_q": False, "policy_delay": 1, "smooth_target_policy": False}
RL_ZOO = {"SAC": SAC_RL_ZOO, "TD3": TD3_RL_ZOO, "DDPG": DDPG_RL_ZOO}


class Watch:
    """First wall time (from process start) and env steps at which the target was met, and
    the time of the first gradient step."""

    def __init__(self) -> None:
        self.reached: tuple[float, int] | None = None
        self.first_update: float | None = None

    def update(self, mean_return: float, steps: int, updates: int) -> None:
        if self.first_update is None and updates > 0:
            self.first_update = time.time()
        if self.reached is None and mean_return >= TARGET:
            self.reached = (round(seconds_since_process_start(), 2), int(steps))

    def record(self, steps: int, updates: int, final: float, ready: float) -> dict:
        elapsed = time.time() - self.first_update if self.first_update else None
        return {
            "start_to_ready_s": round(ready, 2),
            "wall_to_target_s": self.reached[0] if self.reached else None,
            "steps_to_target": self.reached[1] if self.reached else None,
            "env_steps": int(steps),
            "gradient_steps": int(updates),
            "gradient_steps_per_s": round(updates / elapsed, 1) if elapsed else None,
            "final_reward": round(float(final), 1),
        }


def rlstack_child(args: argparse.Namespace) -> None:
    from rlstack.trainers.registry import get_trainer_class

    config = dict(RL_ZOO[args.algorithm], framework=args.framework, seed=args.seed, num_workers=0,
                  metrics_smoothing_episodes=WINDOW, min_sample_timesteps_per_reporting=200)
    trainer = get_trainer_class(args.algorithm)(config, "Pendulum-v1")
    ready = seconds_since_process_start()
    train_start = time.time()
    watch = Watch()
    while True:
        result = trainer.train()
        steps = result["timesteps_total"]
        updates = result["num_env_steps_trained"] // config["train_batch_size"]
        mean_return = result["episode_reward_mean"]
        watch.update(mean_return if result["episodes_total"] >= WINDOW else float("-inf"), steps, updates)
        if watch.reached or steps >= args.max_steps or time.time() - train_start >= args.max_wall:
            break
    print(json.dumps(watch.record(steps, updates, mean_return, ready)))
    trainer.stop()


def sb3_child(args: argparse.Namespace) -> None:
    import numpy as np
    from stable_baselines3 import DDPG, SAC, TD3
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.noise import NormalActionNoise

    watch = Watch()
    start: list[float] = []

    class Stop(BaseCallback):
        def _on_step(self) -> bool:
            buffer = self.model.ep_info_buffer
            mean = float(np.mean([e["r"] for e in list(buffer)[-WINDOW:]])) if len(buffer) >= WINDOW else float("-inf")
            watch.update(mean, self.model.num_timesteps, self.model._n_updates)
            return watch.reached is None and time.time() - start[0] < args.max_wall

    common = {"seed": args.seed, "device": "cpu", "verbose": 0}
    if args.algorithm == "SAC":
        model = SAC("MlpPolicy", "Pendulum-v1", learning_rate=1e-3, **common)
    else:
        noise = NormalActionNoise(np.zeros(1), 0.1 * np.ones(1))
        kwargs = {"gamma": 0.98, "buffer_size": 200_000, "learning_starts": 10_000, "action_noise": noise,
                  "train_freq": 1, "gradient_steps": 1, "learning_rate": 1e-3,
                  "policy_kwargs": {"net_arch": [400, 300]}, **common}
        model = (TD3 if args.algorithm == "TD3" else DDPG)("MlpPolicy", "Pendulum-v1", **kwargs)
    ready = seconds_since_process_start()
    start.append(time.time())
    model.learn(total_timesteps=args.max_steps, callback=Stop())
    buffer = model.ep_info_buffer
    final = float(np.mean([e["r"] for e in list(buffer)[-WINDOW:]])) if buffer else float("nan")
    print(json.dumps(watch.record(model.num_timesteps, model._n_updates, final, ready)))


def rllib_child(args: argparse.Namespace) -> None:
    """RLlib 2.60's SAC (new API stack) with the same hyper-parameters; returns are
    recorded by a callback so the window is the last 10 episodes, as for the others."""
    from ray.rllib.algorithms.sac import SACConfig
    from ray.rllib.callbacks.callbacks import RLlibCallback

    returns_dir = tempfile.mkdtemp(prefix="rllib-returns-")

    class RecordReturns(RLlibCallback):
        def on_episode_end(self, *, episode, **kwargs) -> None:  # noqa: ANN001
            with open(os.path.join(returns_dir, f"{os.getpid()}.txt"), "a") as f:
                f.write(f"{time.time()!r} {float(episode.get_return())!r}\n")

    def last_window_mean() -> float:
        ended = []
        for path in glob.glob(os.path.join(returns_dir, "*.txt")):
            with open(path) as f:
                ended += [tuple(map(float, line.split())) for line in f if line.strip()]
        ended.sort()
        return sum(r for _, r in ended[-WINDOW:]) / WINDOW if len(ended) >= WINDOW else float("-inf")

    start_local_ray(num_cpus=2, include_dashboard=False, log_to_driver=False)
    config = (
        SACConfig()
        .environment("Pendulum-v1")
        .framework("torch")
        .env_runners(num_env_runners=0, rollout_fragment_length=1)
        .training(actor_lr=1e-3, critic_lr=1e-3, alpha_lr=1e-3, gamma=0.99, tau=0.005,
                  train_batch_size_per_learner=256, num_steps_sampled_before_learning_starts=100,
                  replay_buffer_config={"type": "EpisodeReplayBuffer", "capacity": 1_000_000})
        .rl_module(model_config={"fcnet_hiddens": [256, 256], "fcnet_activation": "relu"})
        .reporting(min_sample_timesteps_per_iteration=200)
        .callbacks(RecordReturns)
        .debugging(seed=args.seed)
    )
    algo = config.build_algo()
    ready = seconds_since_process_start()
    train_start = time.time()
    watch = Watch()
    steps = updates = 0
    while True:
        result = algo.train()
        runners = result.get("env_runners", {})
        steps = result.get("num_env_steps_sampled_lifetime") or runners.get("num_env_steps_sampled_lifetime", 0)
        learners = result.get("learners", {}).get("__all_modules__", {})
        updates = int(learners.get("num_module_steps_trained_lifetime", 0) // 256)
        mean = last_window_mean()
        watch.update(mean, steps, updates)
        if watch.reached or steps >= args.max_steps or time.time() - train_start >= args.max_wall:
            break
    print(json.dumps(watch.record(steps, updates, mean, ready)))
    algo.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--max-steps", type=int, default=30_000)
    parser.add_argument("--max-wall", type=float, default=900.0, help="seconds of training per run, at most")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", default="sac,td3,ddpg", help="comma-separated algorithms (sac, td3, ddpg)")
    parser.add_argument("--frameworks", default="torch,tf")
    parser.add_argument("--with-rllib", action="store_true", help="also run RLlib 2.60's SAC")
    parser.add_argument("--no-sb3", dest="with_sb3", action="store_false",
                        help="run rlstack alone: no SB3 runs, so no ratios (bench/check.py's SAC figure)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--system", default="rlstack", help=argparse.SUPPRESS)
    parser.add_argument("--framework", default="torch", help=argparse.SUPPRESS)
    parser.add_argument("--algorithm", default="SAC", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        {"rlstack": rlstack_child, "sb3": sb3_child, "rllib": rllib_child}[args.system](args)
        return
    cases = []  # (label, system, framework, algorithm)
    for algorithm in [a.strip().upper() for a in args.only.split(",") if a.strip()]:
        cases += [(f"rlstack-{fw}/{algorithm}", "rlstack", fw, algorithm) for fw in args.frameworks.split(",")]
        if args.with_sb3:
            cases.append((f"sb3/{algorithm}", "sb3", "torch", algorithm))
        if args.with_rllib and algorithm == "SAC":
            cases.append(("rllib/SAC", "rllib", "torch", algorithm))
    records: dict[str, list[dict]] = {label: [] for label, *_ in cases}
    for run in range(args.runs):
        for label, system, framework, algorithm in cases:
            record = run_child([os.path.abspath(__file__), "--child", "--system", system, "--framework", framework,
                                "--algorithm", algorithm, "--seed", str(args.seed + run), "--max-steps",
                                str(args.max_steps), "--max-wall", str(args.max_wall)], timeout=args.max_wall + 300)
            print(f"round {run + 1}/{args.runs} {label}: {record}", file=sys.stderr, flush=True)
            records[label].append(record)
    keys = ("start_to_ready_s", "wall_to_target_s", "steps_to_target", "gradient_steps_per_s", "env_steps",
            "peak_rss_mib", "final_reward")
    summary = {label: {key: (summarise(values) | {"reached": len(values)}) if values else {"reached": 0}
                       for key in keys
                       for values in [[r[key] for r in runs if r.get(key) is not None]]}
               for label, runs in records.items()}
    ratios = {}
    for label, system, _, algorithm in cases:
        peer = f"sb3/{algorithm}"
        if system == "sb3" or peer not in records:
            continue
        pairs = list(zip(records[label], records[peer]))
        ratios[f"{label} / {peer}"] = {
            key: summarise([a[key] / b[key] for a, b in pairs if a.get(key) and b.get(key)])
            for key in ("wall_to_target_s", "gradient_steps_per_s")
            if any(a.get(key) and b.get(key) for a, b in pairs)
        }
    print(json.dumps({"benchmark": "pendulum_offpolicy", "target": TARGET, "window": WINDOW,
                      "max_steps": args.max_steps, "summary": summary, "ratios": ratios, "runs": records}))


if __name__ == "__main__":
    main()
