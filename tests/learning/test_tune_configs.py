"""Learning tests: every tuned example in tune_configs/ reaches its stop reward within its
step budget, run exactly as a user runs it: `rlstack train -f FILE` (on Ray Tune).

Thresholds come from the YAML files (classic RLlib's bars); seeds are fixed; no retries.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import rlstack.analysis
from rlstack.experiments import load_experiments

CONFIG_DIR = Path(__file__).resolve().parents[2] / "tune_configs"


def _frameworks(spec: dict) -> list[str]:
    # A file that fixes its framework runs in that one; otherwise in both.
    fixed = (spec.get("config") or {}).get("framework")
    return [fixed] if fixed else ["torch", "tf"]


def _fits_this_machine(spec: dict) -> bool:
    # Examples sized for a GPU machine (pong-impala.yaml) are smoke-tested elsewhere
    # (tests/integration/test_atari.py), not trained to their bar on CI's 2 cores.
    return not (spec.get("config") or {}).get("num_gpus")


CASES = [
    (path, name, framework)
    for path in sorted(CONFIG_DIR.glob("*.yaml"))
    for name, spec in load_experiments(str(path)).items()
    if _fits_this_machine(spec)
    for framework in _frameworks(spec)
]


@pytest.mark.parametrize(("path", "name", "framework"), CASES, ids=[f"{p.stem}-{f}" for p, _, f in CASES])
def test_reaches_stop_reward(path, name, framework, tmp_path):
    pytest.importorskip("torch" if framework == "torch" else "tensorflow")
    spec = load_experiments(str(path))[name]
    reward_bar = spec["stop"]["episode_reward_mean"]
    step_budget = spec["stop"]["timesteps_total"]
    proc = subprocess.run(
        [sys.executable, "-m", "rlstack", "train", "-f", str(path), "--framework", framework,
         "--storage-path", str(tmp_path)],
        capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    results = rlstack.analysis.load(tmp_path / name)
    last = results.iloc[-1]
    assert last["episode_reward_mean"] >= reward_bar, (
        f"{name} ({framework}) reached only {last['episode_reward_mean']:.1f} in {last['timesteps_total']} steps"
    )
    assert last["timesteps_total"] <= step_budget
