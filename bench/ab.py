"""Runs one benchmark script against two rlstack source trees, alternating, and compares.

    python bench/ab.py --before /path/to/old/checkout --after . --rounds 3 -- bench/sampling.py --repeats 1

Each round runs the script once with the ``before`` tree first on ``PYTHONPATH`` and once
with the ``after`` tree (the order alternates between rounds, so a machine that drifts
hits both alike). The script must print one JSON line with a ``summary`` of
``{case: {"median": ...}}`` (as bench/sampling.py does). Prints one JSON line: for every
case the medians over rounds of both trees and the after/before ratio of each round.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys


def run(tree: str, script: list[str]) -> dict:
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
    out = subprocess.run([sys.executable, *script], env=env, check=True, capture_output=True, text=True).stdout
    return json.loads([line for line in out.splitlines() if line.startswith("{")][-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="source tree (checkout) of the old build")
    parser.add_argument("--after", required=True, help="source tree of the new build")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("script", nargs=argparse.REMAINDER, help="-- bench/SCRIPT.py [ARGS]")
    args = parser.parse_args()
    script = args.script[1:] if args.script[:1] == ["--"] else args.script
    results: dict[str, dict[str, list[float]]] = {"before": {}, "after": {}}
    for i in range(args.rounds):
        order = ("before", "after") if i % 2 == 0 else ("after", "before")
        for which in order:
            summary = run(getattr(args, which), script)["summary"]
            for case, stats in summary.items():
                results[which].setdefault(case, []).append(stats["median"])
    report = {}
    for case in results["before"]:
        before, after = results["before"][case], results["after"].get(case, [])
        ratios = [a / b for a, b in zip(after, before)]
        report[case] = {"before_median": statistics.median(before), "after_median": statistics.median(after),
                        "after_over_before": [round(r, 4) for r in ratios],
                        "ratio_median": round(statistics.median(ratios), 4)}
    print(json.dumps({"benchmark": "ab", "script": script, "rounds": args.rounds, "cases": report}))


if __name__ == "__main__":
    main()
