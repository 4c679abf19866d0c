"""Start-up: ``import rlstack`` time, and process start to the first ``train()`` call
with ``num_workers=2`` (Ray started, workers built and ready), rlstack and RLlib 2.60
interleaved. Two scripts each: one that calls ``ray.init(...)`` itself before building
the trainer (the same arguments for both systems), and one that leaves starting Ray to
the library (rlstack's trainer starts a local Ray and imports its framework meanwhile;
RLlib's first actor triggers Ray's own ``ray.init()``).

    python bench/startup.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import run_child, seconds_since_process_start, summarise  # noqa: E402


def child(system: str) -> None:
    if system == "import":
        import time

        start = time.perf_counter()
        import rlstack  # noqa: F401
        from rlstack.trainers.ppo import PPOTrainer  # noqa: F401

        print(json.dumps({"import_rlstack_s": round(time.perf_counter() - start, 3),
                          "wall_s": round(seconds_since_process_start(), 3)}))
        return

    if not system.endswith("-own-ray"):
        from rlstack.trainers.common.ray_start import init_local_ray

        init_local_ray(num_cpus=2, include_dashboard=False, log_to_driver=False)
    if system.startswith("rlstack"):
        from rlstack.trainers.ppo import PPOTrainer

        trainer = PPOTrainer({"num_workers": 2}, "CartPole-v1")
    else:
        from ray.rllib.algorithms.ppo import PPOConfig

        trainer = PPOConfig().environment("CartPole-v1").env_runners(num_env_runners=2).build_algo()
    print(json.dumps({"wall_s": round(seconds_since_process_start(), 3)}))
    trainer.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--child", choices=["import", "rlstack", "rllib", "rlstack-own-ray", "rllib-own-ray"])
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    labels = {"rlstack": "rlstack start to first train()", "rllib": "rllib start to first train()",
              "rlstack-own-ray": "rlstack start to first train(), library starts Ray",
              "rllib-own-ray": "rllib start to first train(), library starts Ray"}
    results: dict[str, list[float]] = {"import rlstack + PPOTrainer": [], **{label: [] for label in labels.values()}}
    for _ in range(args.runs):
        record = run_child([os.path.abspath(__file__), "--child", "import"])
        results["import rlstack + PPOTrainer"].append(record["import_rlstack_s"])
        for child_name, label in labels.items():
            results[label].append(run_child([os.path.abspath(__file__), "--child", child_name])["wall_s"])
    ratios = {}
    for suffix in ("", "-own-ray"):
        ours, theirs = results[labels["rlstack" + suffix]], results[labels["rllib" + suffix]]
        ratios["rlstack_over_rllib" + suffix.replace("-", "_")] = summarise([a / b for a, b in zip(ours, theirs)])
    print(json.dumps({"benchmark": "startup", "unit": "s", "summary": {k: summarise(v) for k, v in results.items()},
                      **ratios}))


if __name__ == "__main__":
    main()
