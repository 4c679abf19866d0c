"""PPO on CartPole-v1: wall seconds from process start to a mean return, env steps,
throughput and peak RSS of the whole process tree — rlstack and its peers side by side.

    python bench/ppo_cartpole.py --compare --runs 3     # the comparisons of BENCHMARKS.md
    python bench/ppo_cartpole.py --runs 3 [--framework torch] [--workers 2] [--preset rl-zoo]

``--compare`` runs, interleaved round by round (A B A B A B, so that machine noise hits
every system alike): rlstack (torch and tf) and RLlib 2.60 with RLlib's PPO defaults and
2 rollout workers; rlstack (torch and tf) and Stable-Baselines3 with RL-Zoo's CartPole-v1
hyper-parameters. It prints one JSON line with medians, min-max, and the ratios pair by
pair (rlstack / peer, per round). Each run is a fresh child process, so start-up counts.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import run_child, seconds_since_process_start, start_local_ray, summarise  # noqa: E402

# RLlib's PPO defaults (classic and 2.x alike): train batch 4000, minibatch 128,
# 30 epochs, lr 5e-5, 256x256 tanh, separate value network.
PRESETS = {
    "rllib-defaults": {},
    # RL-Zoo's CartPole-v1 PPO hyper-parameters (what SB3 is measured with): 8 envs x 32
    # steps, 20 epochs of minibatch 256, gamma 0.98, GAE lambda 0.8, lr 1e-3 decaying
    # linearly to 0 over 1e5 steps, 64x64 tanh, grad-norm clip 0.5, value coefficient 0.5.
    # SB3 has no KL penalty and no value-loss clip; its clip range also decays linearly
    # (rlstack keeps it at 0.2: classic RLlib has no clip_param schedule).
    "rl-zoo": {
        "num_envs_per_worker": 8,
        "rollout_fragment_length": 32,
        "train_batch_size": 256,
        "sgd_minibatch_size": 256,
        "num_sgd_iter": 20,
        "gamma": 0.98,
        "lambda": 0.8,
        "lr": 1e-3,
        "lr_schedule": [[0, 1e-3], [100_000, 0.0]],
        "clip_param": 0.2,
        "kl_coeff": 0.0,
        "vf_loss_coeff": 0.5,
        "vf_clip_param": 1e9,
        "grad_clip": 0.5,
        "adam_epsilon": 1e-5,
        "model": {"fcnet_hiddens": [64, 64], "fcnet_activation": "tanh"},
    },
}


def child(args: argparse.Namespace) -> None:
    from rlstack.trainers.ppo import PPOTrainer

    if args.workers > 0:
        import ray

        start_local_ray(num_cpus=2, include_dashboard=False, log_to_driver=False)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--framework", default="torch", choices=["torch", "tf"])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--target", type=float, default=450.0)
    parser.add_argument("--max-steps", type=int, default=400_000)
    parser.add_argument("--preset", default="rllib-defaults", choices=sorted(PRESETS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-wall", type=float, default=float("inf"),
                        help="RLlib only: stop after this many seconds of training")
    parser.add_argument("--only", default="", help="--compare: only the comparisons whose label contains this")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--system", default="rlstack", choices=["rlstack", "rllib", "sb3"], help=argparse.SUPPRESS)
    parser.add_argument("--compare", action="store_true", help="run rlstack and the peers interleaved")
    args = parser.parse_args()
    if args.child:
        if args.system == "rllib":
            from peers import rllib_child

            rllib_child(args.workers, args.target, args.max_steps, args.seed, args.max_wall)
        elif args.system == "sb3":
            from peers import sb3_child

            sb3_child(args.target, args.max_steps, args.seed)
        else:
            child(args)
        return
    if args.compare:
        compare(args)
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


# (label, system, framework, workers, preset, peer label) of every comparison run.
COMPARISONS = [
    ("rlstack-torch/rllib-defaults", "rlstack", "torch", 2, "rllib-defaults", "rllib/rllib-defaults"),
    ("rlstack-tf/rllib-defaults", "rlstack", "tf", 2, "rllib-defaults", "rllib/rllib-defaults"),
    ("rllib/rllib-defaults", "rllib", "torch", 2, "rllib-defaults", None),
    ("rlstack-torch/rl-zoo", "rlstack", "torch", 0, "rl-zoo", "sb3/rl-zoo"),
    ("rlstack-tf/rl-zoo", "rlstack", "tf", 0, "rl-zoo", "sb3/rl-zoo"),
    ("sb3/rl-zoo", "sb3", "torch", 0, "rl-zoo", None),
]


def compare(args: argparse.Namespace) -> None:
    """Runs every entry of COMPARISONS once per round, ``--runs`` rounds."""
    comparisons = [c for c in COMPARISONS if args.only in c[0] or (c[5] and args.only in c[5])]
    records: dict[str, list[dict]] = {label: [] for label, *_ in comparisons}
    for run in range(args.runs):
        for label, system, framework, workers, preset, _ in comparisons:
            child_args = [os.path.abspath(__file__), "--child", "--system", system, "--framework", framework,
                          "--workers", str(workers), "--target", str(args.target), "--max-steps",
                          str(args.max_steps), "--preset", preset, "--seed", str(args.seed + run),
                          "--max-wall", str(args.max_wall)]
            record = run_child(child_args)
            print(f"round {run + 1}/{args.runs} {label}: {record}", file=sys.stderr, flush=True)
            records[label].append(record)
    keys = ("wall_s", "start_to_ready_s", "env_steps", "env_steps_per_s", "peak_rss_mib", "own_metric_wall_s",
            "own_metric_env_steps")
    summary = {label: {key: summarise([r[key] for r in runs]) for key in keys if all(r.get(key) for r in runs)} |
               {"reached": [r["reached"] for r in runs]} for label, runs in records.items()}
    ratios = {}
    for label, *_, peer in comparisons:
        if peer and peer in records:
            ratios[f"{label} / {peer}"] = {
                key: summarise([a[key] / b[key] for a, b in zip(records[label], records[peer])])
                for key in ("wall_s", "start_to_ready_s", "peak_rss_mib", "env_steps_per_s")
            }
            if all(b.get("own_metric_wall_s") for b in records[peer]):
                # Against the time RLlib's own (more lenient) episode_return_mean got there.
                ratios[f"{label} / {peer}"]["wall_s_vs_own_metric"] = summarise(
                    [a["wall_s"] / b["own_metric_wall_s"] for a, b in zip(records[label], records[peer])])
    print(json.dumps({"benchmark": "ppo_cartpole_compare", "target": args.target, "summary": summary,
                      "ratios": ratios, "runs": records}))


if __name__ == "__main__":
    main()
