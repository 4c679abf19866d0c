"""PPO's closed-form (hand-differentiated) learner step against autograd of its loss().

    python bench/closed_form.py [--rounds 5]

For bench/learner.py's settings, builds two PPO policies per framework, one with
``use_fused_sgd`` (the closed form) and one without (autograd of ``loss()``), and times
``learn_on_batch`` on the same batch, alternating, for ``--rounds`` rounds. Prints one JSON
line: each setting's median samples x epochs / s for both, and the median (min, max) of
the per-round ratios closed form / autograd.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from learner import SETTINGS, batch_for, make_policy  # noqa: E402


def policy_class(framework: str) -> type:
    if framework == "torch":
        from rlstack.trainers.ppo.ppo_torch_policy import PPOTorchPolicy

        return PPOTorchPolicy
    from rlstack.trainers.ppo.ppo_tf_policy import PPOTFPolicy

    return PPOTFPolicy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    out = {}
    for framework in ("torch", "tf"):
        cls = policy_class(framework)
        for name, (overrides, n, action_space) in SETTINGS.items():
            built = {}
            for closed_form in (True, False):
                cls.use_fused_sgd = closed_form  # read when the policy builds its learner
                policy, config = make_policy(framework, overrides, action_space)
                batch = batch_for(policy, n)
                policy.learn_on_batch(batch)  # warm-up (and TF tracing)
                built[closed_form] = (policy, batch, n * config["num_sgd_iter"])
            cls.use_fused_sgd = True
            rates: dict[bool, list[float]] = {True: [], False: []}
            for _ in range(args.rounds):
                for closed_form, (policy, batch, samples) in built.items():
                    start = time.perf_counter()
                    policy.learn_on_batch(batch)
                    rates[closed_form].append(samples / (time.perf_counter() - start))
            ratios = [a / b for a, b in zip(rates[True], rates[False])]
            out[f"{framework}/{name}"] = {
                "closed_form": round(statistics.median(rates[True])),
                "autograd": round(statistics.median(rates[False])),
                "ratio": round(statistics.median(ratios), 3),
                "ratio_min_max": [round(min(ratios), 3), round(max(ratios), 3)]}
    print(json.dumps({"benchmark": "closed_form", "unit": "samples x epochs / s", "summary": out}))


if __name__ == "__main__":
    main()
