"""Learning curves of the tuned examples for the algorithm pages (docs/img/curves/*.png).

Trains each tuned example of ``rlstack/tune_configs/`` once, in PyTorch, with the file's
own stop criteria (``rlstack train -f FILE``), and plots its reward against env steps with
the bar the learning test asserts as a dashed line. The examples that learn from recorded
experience (BC, MARWIL, CQL) need that experience first and are left to
tests/learning/test_offline_learning.py; Atari's Pong is too long for this.

    python docs/_tools/learning_curves.py [--only cartpole-ppo,pendulum-sac] [--out docs/img/curves]

Each run takes the lock file ``/tmp/rlstack-train.lock``, so that it never trains beside
another training run on a small machine.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SKIP = {"pong-impala": "10M Atari steps", "cartpole-bc": "needs recorded experience",
        "cartpole-marwil": "needs recorded experience", "pendulum-cql": "needs recorded experience"}


def train(path: Path, storage: Path) -> None:
    with open("/tmp/rlstack-train.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        subprocess.run([sys.executable, "-m", "rlstack", "train", "-f", str(path), "--storage-path", str(storage),
                        "--config", json.dumps({"framework": "torch"})], check=True, cwd=ROOT)


def plot(path: Path, storage: Path, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rlstack import analysis
    from rlstack.experiments import load_experiments

    experiments = load_experiments(str(path))
    fig, ax = plt.subplots(figsize=(6.4, 3.6), dpi=100)
    bar = None
    for name, spec in experiments.items():
        stop = {k: v for k, v in (spec.get("stop") or {}).items() if k not in ("timesteps_total", "training_iteration")}
        (metric, bar), = stop.items()
        frame = analysis.load(storage / name)
        columns = [c for c in frame.columns if c.startswith(f"{metric}/")] if metric == "policy_reward_mean" \
            else [metric]
        for column in columns:
            label = f"{name}: {column}" if len(experiments) > 1 or len(columns) > 1 else column
            ax.plot(frame["timesteps_total"], frame[column], label=label)
    ax.axhline(bar, color="grey", linestyle="--", linewidth=1, label=f"bar: {bar}")
    ax.set_xlabel("env steps")
    ax.set_ylabel("mean episode return")
    ax.set_title(f"{path.stem} (torch, one seed)")
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    fig.savefig(out / f"{path.stem}.png")
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated file names (without .yaml)")
    parser.add_argument("--out", default=str(ROOT / "docs" / "img" / "curves"))
    args = parser.parse_args()
    files = sorted((ROOT / "rlstack" / "tune_configs").glob("*.yaml"))
    only = set(args.only.split(",")) if args.only else None
    for path in files:
        if (only and path.stem not in only) or (not only and path.stem in SKIP):
            continue
        with tempfile.TemporaryDirectory() as tmp:
            train(path, Path(tmp))
            plot(path, Path(tmp), Path(args.out))
        print(f"{path.stem}: {Path(args.out) / (path.stem + '.png')}", flush=True)


if __name__ == "__main__":
    main()
