"""PPO's closed-form (hand-differentiated) torch gradient against autograd of loss(), per
whole training step.

    python bench/closed_form.py [--rounds 5] [--only ppo-torch,ppo-defaults-torch]

For each case (bench/ppo_cartpole.py's RL-Zoo preset, ``ppo-torch``, and RLlib's PPO
defaults, ``ppo-defaults-torch``; ``num_workers`` 0, so an iteration is the whole training
step: sampling, postprocessing, learning), builds two trainers in one process, one with
its policy's ``use_closed_form`` on (models/torch/closed_form.py) and one with it off
(autograd of ``loss()``). After a warm-up iteration each, ``train()`` runs on the two
alternately for ``--rounds`` rounds; each round's figure is env steps sampled per second
of that call. Prints one JSON line: per case, both paths' medians and the median (min,
max) of the per-round ratios closed form / autograd.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ppo_cartpole import PRESETS as PPO_PRESETS  # noqa: E402

CASES = {
    "ppo-torch": ("PPO", "CartPole-v1", {**PPO_PRESETS["rl-zoo"], "num_workers": 0, "framework": "torch"}),
    "ppo-defaults-torch": ("PPO", "CartPole-v1", {"num_workers": 0, "framework": "torch"}),
}


def measure(algorithm: str, env: str, config: dict, rounds: int) -> dict:
    from rlstack.trainers.common.registry import get_trainer_class

    trainer_class = get_trainer_class(algorithm)
    trainers = {}
    for closed_form in (True, False):
        trainer = trainer_class(dict(config, seed=0), env=env)
        trainer.get_policy().use_closed_form = closed_form  # read at each learn_on_batch
        trainer.train()  # warm-up: allocations, Adam state
        trainers[closed_form] = trainer
    rates: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(rounds):
        for closed_form, trainer in trainers.items():
            start = time.perf_counter()
            result = trainer.train()
            rates[closed_form].append(result["timesteps_this_iter"] / (time.perf_counter() - start))
    for trainer in trainers.values():
        trainer.stop()
    ratios = [a / b for a, b in zip(rates[True], rates[False])]
    return {"closed_form": round(statistics.median(rates[True]), 1),
            "autograd": round(statistics.median(rates[False]), 1),
            "ratio": round(statistics.median(ratios), 3),
            "ratio_min_max": [round(min(ratios), 3), round(max(ratios), 3)]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", default=",".join(CASES))
    args = parser.parse_args()
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    out = {}
    for name in [n.strip() for n in args.only.split(",") if n.strip()]:
        out[name] = measure(*CASES[name], args.rounds)
        print(name, out[name], file=sys.stderr, flush=True)
    print(json.dumps({"benchmark": "closed_form", "unit": "env steps sampled / s of a whole train()",
                      "summary": out}))


if __name__ == "__main__":
    main()
