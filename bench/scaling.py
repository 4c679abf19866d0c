"""Scaling: total sampling throughput (env steps/s) with num_workers 1, 2 (and more on a
machine with more cores), PPO's default model, 8 envs per worker.

    python bench/scaling.py [--workers 1 2] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import summarise  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()

    from rlstack.trainers.ppo import PPOTrainer

    from rlstack.trainers.common.ray_start import init_local_ray

    init_local_ray(num_cpus=max(2, max(args.workers)), include_dashboard=False, log_to_driver=False)
    out = {}
    for n in args.workers:
        trainer = PPOTrainer({"num_workers": n, "num_envs_per_worker": 8, "rollout_fragment_length": 64}, "CartPole-v1")
        trainer.workers.sample()  # warm-up
        rates = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            steps = sum(b.count for _ in range(args.rounds) for b in trainer.workers.sample())
            rates.append(steps / (time.perf_counter() - start))
        out[f"num_workers={n}"] = summarise(rates)
        trainer.stop()
    print(json.dumps({"benchmark": "scaling", "unit": "env steps/s (sampling only)", "cores": os.cpu_count(),
                      "summary": out}))


if __name__ == "__main__":
    main()
