"""PPO on CartPole-v1: wall seconds from process start to a mean return, env steps,
throughput and peak RSS of the whole process tree.

    python bench/ppo_cartpole.py --runs 3 [--framework torch] [--workers 2] [--target 450]

Prints one JSON line: per-run records and medians (min-max). Each run is a fresh child
process (``--child``), so start-up is part of the time.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import run_child, seconds_since_process_start, summarise  # noqa: E402

# RLlib's PPO defaults (classic and 2.x alike): train batch 4000, minibatch 128,
# 30 epochs, lr 5e-5, 256x256 tanh, separate value network.
PRESETS = {
    "rllib-defaults": {},
}


def child(args: argparse.Namespace) -> None:
    import ray

    from rlstack.trainers.ppo import PPOTrainer

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    config = {**PRESETS[args.preset], "num_workers": args.workers, "framework": args.framework, "seed": args.seed}
    trainer = PPOTrainer(config, "CartPole-v1")
    ready = seconds_since_process_start()
    train_start = time.time()
    sample_s = learn_s = 0.0
    result = {}
    while True:
        result = trainer.train()
        sample_s += result["timers"]["sample_time_ms"] / 1000
        learn_s += result["timers"]["learn_time_ms"] / 1000
        if result["episode_reward_mean"] >= args.target or result["timesteps_total"] >= args.max_steps:
            break
    wall = seconds_since_process_start()
    train_s = time.time() - train_start
    steps = result["timesteps_total"]
    print(json.dumps({
        "reached": result["episode_reward_mean"] >= args.target,
        "wall_s": round(wall, 2),
        "start_to_ready_s": round(ready, 2),
        "env_steps": steps,
        "iterations": result["training_iteration"],
        "env_steps_per_s": round(steps / train_s, 1),
        "final_reward": round(result["episode_reward_mean"], 1),
    }))
    trainer.stop()
    ray.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--framework", default="torch", choices=["torch", "tf"])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--target", type=float, default=450.0)
    parser.add_argument("--max-steps", type=int, default=400_000)
    parser.add_argument("--preset", default="rllib-defaults", choices=sorted(PRESETS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    records = []
    for run in range(args.runs):
        child_args = [os.path.abspath(__file__), "--child", "--framework", args.framework, "--workers",
                      str(args.workers), "--target", str(args.target), "--max-steps", str(args.max_steps),
                      "--preset", args.preset, "--seed", str(args.seed + run)]
        record = run_child(child_args)
        print(f"run {run + 1}/{args.runs}: {record}", file=sys.stderr, flush=True)
        records.append(record)
    summary = {key: summarise([r[key] for r in records]) for key in
               ("wall_s", "start_to_ready_s", "env_steps", "env_steps_per_s", "peak_rss_mib")}
    print(json.dumps({
        "benchmark": "ppo_cartpole", "system": "rlstack", "framework": args.framework, "workers": args.workers,
        "preset": args.preset, "target": args.target, "all_reached": all(r["reached"] for r in records),
        "summary": summary, "runs": records,
    }))


if __name__ == "__main__":
    main()
