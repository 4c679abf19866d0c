"""The torch kernels behind two choices of PPO's closed form (models/torch/closed_form.py), timed
against the plain call they replace, on the shapes of PPO's default learner (minibatch 128,
twin 256x256 tanh networks over CartPole's 4 observation features).

    python bench/kernels.py [--repeats 5] [--threads 1,2]

* ``tanh``: ``y.tanh_()`` against ``y.mul_(2).sigmoid_().mul_(2).sub_(1)`` on a
  ``[2, 128, 256]`` float32 layer output (the closed form's activation on CPU);
* ``first-layer weight gradient``: ``g^T x`` into ``[2, 256, 4]`` (``bmm``) against
  ``(x^T g)^T`` copied into it (``_weight_grad`` for inputs narrower than 16 columns).

Prints one JSON line: per thread count and case, the median (min-max) of ``--repeats``
timings of 2,000 calls each, in microseconds per call, and the ratio plain / chosen.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import summarise  # noqa: E402


def per_call_us(fn: Callable[[], object], calls: int = 2000) -> float:
    for _ in range(100):
        fn()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e6


def cases(torch) -> dict[str, tuple[Callable[[], object], Callable[[], object]]]:
    generator = torch.Generator().manual_seed(0)
    pre_activation = torch.randn(2, 128, 256, generator=generator)
    out = torch.empty_like(pre_activation)
    obs = torch.randn(128, 4, generator=generator).unsqueeze(0).expand(2, 128, 4)
    grad = torch.randn(2, 128, 256, generator=generator)
    weight_grad = torch.empty(2, 256, 4)
    return {
        "tanh": (lambda: out.copy_(pre_activation).tanh_(),
                 lambda: out.copy_(pre_activation).mul_(2.0).sigmoid_().mul_(2.0).sub_(1.0)),
        "first-layer weight gradient": (
            lambda: torch.bmm(grad.transpose(1, 2), obs, out=weight_grad),
            lambda: weight_grad.copy_(torch.bmm(obs.transpose(1, 2), grad).transpose(1, 2))),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", default="1,2", help="comma-separated intra-op thread counts")
    args = parser.parse_args()
    import torch

    torch.set_flush_denormal(True)  # as rlstack's learners run
    results: dict[str, dict[str, object]] = {}
    for threads in (int(t) for t in args.threads.split(",")):
        torch.set_num_threads(threads)
        for name, (plain, chosen) in cases(torch).items():
            timings = {"plain": [], "chosen": []}
            for _ in range(args.repeats):
                timings["plain"].append(per_call_us(plain))
                timings["chosen"].append(per_call_us(chosen))
            ratios = [p / c for p, c in zip(timings["plain"], timings["chosen"])]
            results[f"{threads} thread(s) / {name}"] = {
                "plain_us": summarise(timings["plain"]), "chosen_us": summarise(timings["chosen"]),
                "plain_over_chosen": round(statistics.median(ratios), 2)}
    print(json.dumps({"torch": torch.__version__, "results": results}))


if __name__ == "__main__":
    main()
