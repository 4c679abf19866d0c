"""SAC on HalfCheetah-v5 (MuJoCo) with RL-Zoo's hyper-parameters for a fixed number of env
steps: throughput of rlstack (torch, optionally tf) against Stable-Baselines3 in the same
invocation. Needs the ``mujoco`` extra (``pip install -e '.[mujoco]'``); a benchmark, not a
test.

    python bench/halfcheetah_sac.py --runs 3                          # 100,000 env steps each
    python bench/halfcheetah_sac.py --runs 3 --frameworks torch,tf
    python bench/halfcheetah_sac.py --runs 1 --steps 600 --learning-starts 300   # smoke test

Runs are interleaved round by round (rlstack-torch, [rlstack-tf], sb3), each in a fresh
child process, so start-up counts. Each run trains for ``--steps`` env steps (or stops
after ``--max-wall`` seconds of training; its ``env_steps`` then say how far it got). Per
run: ``start_to_ready_s`` (process start to the trainer or model built), ``wall_s``
(process start to the end of training), ``env_steps_per_s`` (env steps over the training
time, the random warm-up before ``learning_starts`` included), ``gradient_steps`` and
``gradient_steps_per_s`` (from the first gradient step to the end of training),
``final_reward`` (mean return of the last 10 finished episodes; None when none finished)
and the process tree's peak RSS. One JSON line: medians, min-max, and the rlstack/SB3
ratios round by round.

RL-Zoo (rl-baselines3-zoo hyperparams/sac.yml, HalfCheetah): learning_starts 10,000 and
SB3's defaults otherwise: lr 3e-4 (actor, critics and entropy coefficient), 256x256 relu,
batch 256, buffer 1e6, tau 0.005, gamma 0.99, one gradient step per env step, automatic
entropy (target -action_dim, initial alpha 1.0). Both libraries run on the CPU.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import run_child, seconds_since_process_start, summarise  # noqa: E402
from pendulum_offpolicy import SAC_RL_ZOO  # noqa: E402

ENV = "HalfCheetah-v5"
WINDOW = 10

# Pendulum's SAC settings with RL-Zoo's HalfCheetah changes: SB3's default lr 3e-4 and
# 10,000 uniformly random steps before learning starts.
HALFCHEETAH_SAC_RL_ZOO = {
    **SAC_RL_ZOO,
    "optimization": {"actor_learning_rate": 3e-4, "critic_learning_rate": 3e-4, "entropy_learning_rate": 3e-4},
    "learning_starts": 10_000,
}


class Clock:
    """Wall times of one run: trainer ready, first gradient step seen, end of training."""

    def __init__(self, ready: float) -> None:
        self.ready = ready
        self.train_start = time.time()
        # (time, gradient steps) when gradient steps were first seen: SB3's callback sees
        # each step, rlstack's loop each train() result, so the rate counts the steps taken
        # after this point over the time after it, which is the same rule for both.
        self.first_update: tuple[float, int] | None = None

    def update(self, updates: int) -> None:
        if self.first_update is None and updates > 0:
            self.first_update = (time.time(), updates)

    def record(self, steps: int, updates: int, final: float | None) -> dict:
        end = time.time()
        wall = seconds_since_process_start()
        training = end - self.train_start
        since, counted = self.first_update or (end, updates)
        updating = end - since
        return {
            "start_to_ready_s": round(self.ready, 2),
            "wall_s": round(wall, 2),
            "env_steps": int(steps),
            "env_steps_per_s": round(steps / training, 1) if training > 0 else None,
            "gradient_steps": int(updates),
            "gradient_steps_per_s": round((updates - counted) / updating, 1) if updates > counted else None,
            "final_reward": round(float(final), 1) if final is not None and math.isfinite(final) else None,
        }


def rlstack_child(args: argparse.Namespace) -> None:
    from rlstack.trainers.common.registry import get_trainer_class

    # One result every `report` sampled steps (rollout_fragment_length 1: one step per
    # round) and no minimum time, so a result lands where learning starts and the run
    # stops at --steps exactly.
    report = math.gcd(1000, args.steps, args.learning_starts)
    config = dict(HALFCHEETAH_SAC_RL_ZOO, framework=args.framework, seed=args.seed, num_workers=0,
                  learning_starts=args.learning_starts, metrics_smoothing_episodes=WINDOW,
                  min_sample_timesteps_per_reporting=report, min_time_s_per_reporting=0)
    trainer = get_trainer_class("SAC")(config, ENV)
    clock = Clock(seconds_since_process_start())
    while True:
        result = trainer.train()
        steps = result["timesteps_total"]
        updates = result["num_env_steps_trained"] // config["train_batch_size"]
        clock.update(updates)
        if steps >= args.steps or time.time() - clock.train_start >= args.max_wall:
            break
    final = result["episode_reward_mean"] if result["episodes_total"] else None
    print(json.dumps(clock.record(steps, updates, final)))
    trainer.stop()


def sb3_child(args: argparse.Namespace) -> None:
    import numpy as np
    from stable_baselines3 import SAC
    from stable_baselines3.common.callbacks import BaseCallback

    clocks: list[Clock] = []

    class Watch(BaseCallback):
        def _on_step(self) -> bool:
            clocks[0].update(self.model._n_updates)
            return time.time() - clocks[0].train_start < args.max_wall

    model = SAC("MlpPolicy", ENV, learning_starts=args.learning_starts, seed=args.seed, device="cpu", verbose=0)
    clocks.append(Clock(seconds_since_process_start()))
    model.learn(total_timesteps=args.steps, callback=Watch())
    returns = [e["r"] for e in list(model.ep_info_buffer)[-WINDOW:]]
    final = float(np.mean(returns)) if returns else None
    print(json.dumps(clocks[0].record(model.num_timesteps, model._n_updates, final)))


def require_mujoco() -> None:
    """Exits with the install command when MuJoCo is missing (checked once, in the parent,
    before any child starts)."""
    if importlib.util.find_spec("mujoco") is None:
        sys.exit(f"bench/halfcheetah_sac.py needs MuJoCo for {ENV}, and the 'mujoco' package is not installed "
                 f"in {sys.executable}: run pip install -e '.[mujoco]' from the repository root.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=100_000, help="env steps per run")
    parser.add_argument("--learning-starts", type=int, default=HALFCHEETAH_SAC_RL_ZOO["learning_starts"],
                        help="random steps before the first gradient step (RL-Zoo: 10,000; lower for smoke tests)")
    parser.add_argument("--max-wall", type=float, default=3600.0, help="seconds of training per run, at most")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--frameworks", default="torch", help="rlstack frameworks, comma-separated (torch, tf)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--system", default="rlstack", help=argparse.SUPPRESS)
    parser.add_argument("--framework", default="torch", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        {"rlstack": rlstack_child, "sb3": sb3_child}[args.system](args)
        return
    require_mujoco()
    cases = [(f"rlstack-{fw}/SAC", "rlstack", fw) for fw in (f.strip() for f in args.frameworks.split(",")) if fw]
    cases.append(("sb3/SAC", "sb3", "torch"))
    records: dict[str, list[dict]] = {label: [] for label, *_ in cases}
    for run in range(args.runs):
        for label, system, framework in cases:
            record = run_child([os.path.abspath(__file__), "--child", "--system", system, "--framework", framework,
                                "--seed", str(args.seed + run), "--steps", str(args.steps),
                                "--learning-starts", str(args.learning_starts), "--max-wall", str(args.max_wall)],
                               timeout=args.max_wall + 300)
            print(f"round {run + 1}/{args.runs} {label}: {record}", file=sys.stderr, flush=True)
            records[label].append(record)
    keys = ("start_to_ready_s", "wall_s", "env_steps", "env_steps_per_s", "gradient_steps", "gradient_steps_per_s",
            "final_reward", "peak_rss_mib")
    summary = {label: {key: summarise(values) if values else None
                       for key in keys
                       for values in [[r[key] for r in runs if r.get(key) is not None]]}
               for label, runs in records.items()}
    ratios = {}
    for label, system, _ in cases:
        if system == "sb3":
            continue
        pairs = list(zip(records[label], records["sb3/SAC"]))
        ratios[f"{label} / sb3/SAC"] = {
            key: summarise([a[key] / b[key] for a, b in pairs if a.get(key) and b.get(key)])
            for key in ("wall_s", "env_steps_per_s", "gradient_steps_per_s", "peak_rss_mib")
            if any(a.get(key) and b.get(key) for a, b in pairs)
        }
    print(json.dumps({"benchmark": "halfcheetah_sac", "env": ENV, "steps": args.steps,
                      "learning_starts": args.learning_starts, "window": WINDOW, "summary": summary,
                      "ratios": ratios, "runs": records}))


if __name__ == "__main__":
    main()
