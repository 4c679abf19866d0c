"""Learning tests: every tuned example in tune_configs/ reaches its stop reward within its
step budget, run exactly as a user runs it: `rlstack train -f FILE` (on Ray Tune).

Thresholds come from the YAML files (classic RLlib's bars); seeds are fixed; no retries.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

import rlstack.analysis
from rlstack.experiments import load_experiments
from tests.tuned_examples import learning_cases

# Every example that fits this machine, in each framework it names (tests/tuned_examples.py).
CASES = learning_cases()


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
