"""DQN and ApeX on CartPole-v1: wall seconds from process start to a mean return of 150
and of 450, env steps used, env steps/s and peak RSS — rlstack and its peers side by side.

    python bench/dqn_cartpole.py --runs 3                # the comparison of BENCHMARKS.md
    python bench/dqn_cartpole.py --runs 3 --with-rllib   # also RLlib 2.60's DQN defaults

Runs, interleaved round by round (A B A B ...): rlstack DQN (torch and tf) and
Stable-Baselines3 DQN with RL-Zoo's CartPole-v1 hyper-parameters; rlstack DQN with its
tuned example (tune_configs/cartpole-dqn.yaml) and ApeX with its tuned example
(tune_configs/cartpole-apex.yaml). Every run stops at a mean return of 450 (over the last
100 episodes), at ``--max-steps`` env steps or after ``--max-wall`` seconds. Each run is a
fresh child process, so start-up counts. One JSON line with medians, min-max and the
ratios to SB3 round by round.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import run_child, seconds_since_process_start, start_local_ray, summarise, tuned_example  # noqa: E402

THRESHOLDS = (150.0, 450.0)

# RL-Zoo's CartPole-v1 DQN hyper-parameters (what SB3 is measured with): lr 2.3e-3, batch
# 64, buffer 100k, learning starts 1k, target update every 10 env steps, 128 gradient
# steps after every 256 env steps, epsilon 1 -> 0.04 over 8k steps, 256x256 ReLU, plain
# (no double, no dueling, no prioritized replay, 1-step) DQN, SB3's grad-norm clip 10.
RL_ZOO = {
    "num_workers": 0,
    "lr": 2.3e-3,
    "train_batch_size": 64,
    "buffer_size": 100_000,
    "learning_starts": 1000,
    "target_network_update_freq": 10,
    "rollout_fragment_length": 256,
    "training_intensity": 32,  # 128 steps x 64 rows per 256 sampled steps
    "gamma": 0.99,
    "grad_clip": 10,
    "prioritized_replay": False,
    "dueling": False,
    "double_q": False,
    "hiddens": [],
    "n_step": 1,
    "exploration_config": {"initial_epsilon": 1.0, "final_epsilon": 0.04, "epsilon_timesteps": 8000},
    "model": {"fcnet_hiddens": [256, 256], "fcnet_activation": "relu"},
    "min_sample_timesteps_per_reporting": 256,
}


def _tuned(name: str) -> tuple[str, dict]:
    spec = tuned_example(name)
    return spec["run"], dict(spec["config"])


class Milestones:
    """First wall time (from process start) and env steps at which each threshold was met."""

    def __init__(self) -> None:
        self.hit: dict[float, tuple[float, int]] = {}

    def update(self, reward: float, steps: int) -> None:
        for threshold in THRESHOLDS:
            if threshold not in self.hit and reward >= threshold:
                self.hit[threshold] = (round(seconds_since_process_start(), 2), int(steps))

    def record(self) -> dict:
        out = {}
        for threshold in THRESHOLDS:
            wall, steps = self.hit.get(threshold, (None, None))
            out[f"wall_to_{int(threshold)}_s"] = wall
            out[f"steps_to_{int(threshold)}"] = steps
        return out


def rlstack_child(args: argparse.Namespace) -> None:
    from rlstack.trainers.registry import get_trainer_class

    if args.preset == "rl-zoo":
        algorithm, config = "DQN", dict(RL_ZOO)
    else:
        algorithm, config = _tuned("cartpole-dqn.yaml" if args.preset == "tuned" else "cartpole-apex.yaml")
    config.update(framework=args.framework, seed=args.seed)
    if config["num_workers"] > 0:
        import ray

        start_local_ray(num_cpus=max(2, config["num_workers"] + 1), include_dashboard=False,
                 log_to_driver=False)
    trainer = get_trainer_class(algorithm)(config, "CartPole-v1")
    ready = seconds_since_process_start()
    train_start = time.time()
    milestones = Milestones()
    while True:
        result = trainer.train()
        steps = result["timesteps_total"]
        milestones.update(result["episode_reward_mean"], steps)
        if (result["episode_reward_mean"] >= THRESHOLDS[-1] or steps >= args.max_steps
                or time.time() - train_start >= args.max_wall):
            break
    print(json.dumps({
        "start_to_ready_s": round(ready, 2), "env_steps": steps,
        "env_steps_per_s": round(steps / (time.time() - train_start), 1),
        "final_reward": round(result["episode_reward_mean"], 1), **milestones.record(),
    }))
    trainer.stop()


def sb3_child(args: argparse.Namespace) -> None:
    import numpy as np
    from stable_baselines3 import DQN
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    milestones = Milestones()
    start: list[float] = []

    class Watch(BaseCallback):
        def _on_step(self) -> bool:
            buffer = self.model.ep_info_buffer
            if buffer and self.n_calls % 16 == 0:
                milestones.update(float(np.mean([e["r"] for e in buffer])), self.model.num_timesteps)
            over_time = time.time() - start[0] >= args.max_wall
            return THRESHOLDS[-1] not in milestones.hit and not over_time

    env = make_vec_env("CartPole-v1", n_envs=1, seed=args.seed)
    model = DQN("MlpPolicy", env, learning_rate=2.3e-3, batch_size=64, buffer_size=100_000, learning_starts=1000,
                gamma=0.99, target_update_interval=10, train_freq=256, gradient_steps=128,
                exploration_fraction=8000 / args.max_steps, exploration_final_eps=0.04,
                policy_kwargs={"net_arch": [256, 256]}, seed=args.seed, device="cpu", verbose=0)
    ready = seconds_since_process_start()
    start.append(time.time())
    model.learn(total_timesteps=args.max_steps, callback=Watch())
    buffer = model.ep_info_buffer
    steps = int(model.num_timesteps)
    print(json.dumps({
        "start_to_ready_s": round(ready, 2), "env_steps": steps,
        "env_steps_per_s": round(steps / (time.time() - start[0]), 1),
        "final_reward": round(float(np.mean([e["r"] for e in buffer])), 1) if buffer else None,
        **milestones.record(),
    }))


def rllib_child(args: argparse.Namespace) -> None:
    from ray.rllib.algorithms.dqn import DQNConfig

    start_local_ray(num_cpus=2, include_dashboard=False, log_to_driver=False)
    algo = DQNConfig().environment("CartPole-v1").framework("torch").debugging(seed=args.seed).build_algo()
    ready = seconds_since_process_start()
    train_start = time.time()
    milestones = Milestones()
    ret, steps = float("nan"), 0
    while True:
        result = algo.train()
        runners = result.get("env_runners", {})
        ret = runners.get("episode_return_mean", float("nan"))
        steps = result.get("num_env_steps_sampled_lifetime") or runners.get("num_env_steps_sampled_lifetime", 0)
        milestones.update(ret, steps)
        if ret >= THRESHOLDS[-1] or steps >= args.max_steps or time.time() - train_start >= args.max_wall:
            break
    print(json.dumps({
        "start_to_ready_s": round(ready, 2), "env_steps": int(steps),
        "env_steps_per_s": round(steps / (time.time() - train_start), 1), "final_reward": round(float(ret), 1),
        **milestones.record(),
    }))
    algo.stop()


# (label, system, framework, preset, peer label).
COMPARISONS = [
    ("rlstack-torch/rl-zoo", "rlstack", "torch", "rl-zoo", "sb3/rl-zoo"),
    ("rlstack-tf/rl-zoo", "rlstack", "tf", "rl-zoo", "sb3/rl-zoo"),
    ("sb3/rl-zoo", "sb3", "torch", "rl-zoo", None),
    ("rlstack-torch/dqn-tuned", "rlstack", "torch", "tuned", None),
    ("rlstack-tf/dqn-tuned", "rlstack", "tf", "tuned", None),
    ("rlstack-torch/apex-tuned", "rlstack", "torch", "apex", None),
    ("rlstack-tf/apex-tuned", "rlstack", "tf", "apex", None),
]
RLLIB = ("rllib/dqn-defaults", "rllib", "torch", "defaults", None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--max-steps", type=int, default=100_000)
    parser.add_argument("--max-wall", type=float, default=300.0, help="seconds of training per run, at most")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--with-rllib", action="store_true", help="also run RLlib 2.60's DQN defaults")
    parser.add_argument("--only", help="comma-separated labels to run (default: all)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--system", default="rlstack", help=argparse.SUPPRESS)
    parser.add_argument("--framework", default="torch", help=argparse.SUPPRESS)
    parser.add_argument("--preset", default="rl-zoo", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        {"rlstack": rlstack_child, "sb3": sb3_child, "rllib": rllib_child}[args.system](args)
        return
    comparisons = COMPARISONS + ([RLLIB] if args.with_rllib else [])
    if args.only:
        wanted = set(args.only.split(","))
        comparisons = [c for c in comparisons if c[0] in wanted]
    records: dict[str, list[dict]] = {c[0]: [] for c in comparisons}
    for run in range(args.runs):
        for label, system, framework, preset, _ in comparisons:
            record = run_child([os.path.abspath(__file__), "--child", "--system", system, "--framework", framework,
                                "--preset", preset, "--seed", str(args.seed + run), "--max-steps",
                                str(args.max_steps), "--max-wall", str(args.max_wall)], timeout=args.max_wall + 300)
            print(f"round {run + 1}/{args.runs} {label}: {record}", file=sys.stderr, flush=True)
            records[label].append(record)
    keys = ("start_to_ready_s", "env_steps", "env_steps_per_s", "peak_rss_mib", "final_reward",
            "wall_to_150_s", "steps_to_150", "wall_to_450_s", "steps_to_450")
    summary = {}
    for label, runs in records.items():
        summary[label] = {}
        for key in keys:
            values = [r[key] for r in runs if r.get(key) is not None]
            summary[label][key] = summarise(values) | {"reached": len(values)} if values else {"reached": 0}
    ratios = {}
    for label, *_, peer in comparisons:
        if peer and peer in records:
            pairs = list(zip(records[label], records[peer]))
            ratios[f"{label} / {peer}"] = {
                "env_steps_per_s": summarise([a["env_steps_per_s"] / b["env_steps_per_s"] for a, b in pairs]),
                "peak_rss_mib": summarise([a["peak_rss_mib"] / b["peak_rss_mib"] for a, b in pairs]),
            }
    print(json.dumps({"benchmark": "dqn_cartpole_compare", "max_steps": args.max_steps, "summary": summary,
                      "ratios": ratios, "runs": records}))


if __name__ == "__main__":
    main()
