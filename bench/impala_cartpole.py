"""IMPALA (or APPO) on CartPole-v1 as the number of rollout workers grows: wall seconds
from process start to a mean return of 150, sampler and learner throughput, peak RSS —
rlstack (torch and tf) and RLlib 2.60 side by side.

    python bench/impala_cartpole.py --runs 3 --workers 1,2,4
    python bench/impala_cartpole.py --algo APPO --runs 3 --workers 1,2

Each round runs every (system, workers) case once, in a fresh process (start-up counts),
interleaved so that machine noise hits every system alike; round *i* uses seed *i − 1*.
rlstack runs its tuned example (tune_configs/cartpole-impala.yaml: IMPALA's classic
defaults) with ``min_time_s_per_reporting`` 2 instead of 10, so the time to 150 is read
at a finer grain; RLlib runs ``IMPALAConfig`` defaults (new API stack, a local learner).
With ``--algo APPO`` rlstack runs the first experiment of tune_configs/cartpole-appo.yaml
(V-trace on) and RLlib ``APPOConfig`` defaults, each with the given number of workers.
A run stops at a mean return of 150, at ``--max-steps`` env steps or after ``--max-wall``
seconds of training. One JSON line with medians and min-max per case.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import run_child, seconds_since_process_start, start_local_ray, summarise, tuned_example  # noqa: E402



def rlstack_child(args: argparse.Namespace) -> None:
    from rlstack.trainers.registry import get_trainer_class

    spec = tuned_example(f"cartpole-{args.algo.lower()}.yaml")
    config = {**spec["config"], "framework": args.framework, "seed": args.seed, "num_workers": args.workers,
              "min_time_s_per_reporting": 2}
    start_local_ray(num_cpus=max(2, args.workers + 1), include_dashboard=False, log_to_driver=False)
    trainer = get_trainer_class(args.algo)(config, "CartPole-v1")
    ready = seconds_since_process_start()
    train_start = time.time()
    wall_to_target = None
    while True:
        result = trainer.train()
        if result["episode_reward_mean"] >= args.target:
            wall_to_target = round(seconds_since_process_start(), 2)
        if (wall_to_target is not None or result["timesteps_total"] >= args.max_steps
                or time.time() - train_start >= args.max_wall):
            break
    elapsed = time.time() - train_start
    print(json.dumps({
        "wall_to_target_s": wall_to_target, "start_to_ready_s": round(ready, 2),
        "env_steps": result["timesteps_total"], "sample_throughput": round(result["timesteps_total"] / elapsed, 1),
        "learner_throughput": round(result["num_env_steps_trained"] / elapsed, 1),
        "final_reward": round(result["episode_reward_mean"], 1),
    }))
    trainer.stop()


def rllib_child(args: argparse.Namespace) -> None:
    from ray.rllib.algorithms.appo import APPOConfig
    from ray.rllib.algorithms.impala import IMPALAConfig

    start_local_ray(num_cpus=max(2, args.workers + 1), include_dashboard=False, log_to_driver=False)
    algo = ({"IMPALA": IMPALAConfig, "APPO": APPOConfig}[args.algo]().environment("CartPole-v1").env_runners(num_env_runners=args.workers)
            .framework("torch").debugging(seed=args.seed).build_algo())
    ready = seconds_since_process_start()
    train_start = time.time()
    wall_to_target, ret, steps, trained = None, float("nan"), 0, 0
    while True:
        result = algo.train()
        runners = result.get("env_runners", {})
        ret = runners.get("episode_return_mean", float("nan"))
        steps = result.get("num_env_steps_sampled_lifetime") or runners.get("num_env_steps_sampled_lifetime", 0)
        learners = result.get("learners", {}).get("__all_modules__", {})
        trained = learners.get("num_env_steps_trained_lifetime", trained)
        if ret >= args.target:
            wall_to_target = round(seconds_since_process_start(), 2)
        if wall_to_target is not None or steps >= args.max_steps or time.time() - train_start >= args.max_wall:
            break
    elapsed = time.time() - train_start
    print(json.dumps({
        "wall_to_target_s": wall_to_target, "start_to_ready_s": round(ready, 2), "env_steps": int(steps),
        "sample_throughput": round(steps / elapsed, 1), "learner_throughput": round(trained / elapsed, 1),
        "final_reward": round(float(ret), 1),
    }))
    algo.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algo", default="IMPALA", choices=("IMPALA", "APPO"))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", default="1,2,4", help="comma-separated worker counts")
    parser.add_argument("--systems", default="rlstack-torch,rlstack-tf,rllib")
    parser.add_argument("--target", type=float, default=150.0)
    parser.add_argument("--max-steps", type=int, default=500_000)
    parser.add_argument("--max-wall", type=float, default=90.0, help="seconds of training per run, at most")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--system", default="rlstack", help=argparse.SUPPRESS)
    parser.add_argument("--framework", default="torch", help=argparse.SUPPRESS)
    parser.add_argument("--num-workers", dest="num_workers_child", type=int, default=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        args.workers = args.num_workers_child
        (rllib_child if args.system == "rllib" else rlstack_child)(args)
        return
    cases = [(system, int(w)) for w in args.workers.split(",") for system in args.systems.split(",")]
    records: dict[str, list[dict]] = {f"{s}/{w}": [] for s, w in cases}
    for run in range(args.runs):
        for system, workers in cases:
            framework = system.split("-")[1] if system.startswith("rlstack") else "torch"
            record = run_child([os.path.abspath(__file__), "--child", "--algo", args.algo,
                                "--system", system.split("-")[0],
                                "--framework", framework, "--num-workers", str(workers), "--seed", str(args.seed + run),
                                "--target", str(args.target), "--max-steps", str(args.max_steps),
                                "--max-wall", str(args.max_wall)], timeout=args.max_wall + 300)
            print(f"round {run + 1}/{args.runs} {system}/{workers}: {record}", file=sys.stderr, flush=True)
            records[f"{system}/{workers}"].append(record)
    summary = {}
    for label, runs in records.items():
        summary[label] = {"reached": sum(r["wall_to_target_s"] is not None for r in runs)}
        for key in ("wall_to_target_s", "start_to_ready_s", "env_steps", "sample_throughput", "learner_throughput",
                    "peak_rss_mib", "final_reward"):
            values = [r[key] for r in runs if r.get(key) is not None]
            if values:
                summary[label][key] = summarise(values)
    print(json.dumps({"benchmark": f"{args.algo.lower()}_cartpole", "target": args.target, "summary": summary, "runs": records}))


if __name__ == "__main__":
    main()
