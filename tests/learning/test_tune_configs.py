"""Learning tests: every tuned example in tune_configs/ reaches its stop reward within its
step budget, run exactly as a user runs it: `rlstack train -f FILE` (on Ray Tune).

Thresholds come from the YAML files (classic RLlib's bars); seeds are fixed; no retries.

The runs are separate processes started by the pool in tests/learning/pool.py while the
rest of the session runs (conftest.py in this folder); each test waits for its own case.
"""

from __future__ import annotations

import pytest

import rlstack.analysis
from rlstack.experiments import load_experiments
from tests.learning.conftest import FRAMEWORK_MODULES, case_id
from tests.tuned_examples import learning_cases

# Every example that fits this machine, in each framework it names (tests/tuned_examples.py).
CASES = learning_cases()
CASE_IDS = [case_id(*case) for case in CASES]


@pytest.mark.parametrize(("path", "name", "framework"), CASES, ids=CASE_IDS)
def test_reaches_stop_reward(path, name, framework, learning_runs):
    pytest.importorskip(FRAMEWORK_MODULES[framework])
    spec = load_experiments(str(path))[name]
    reward_bar = spec["stop"]["episode_reward_mean"]
    step_budget = spec["stop"]["timesteps_total"]
    run = learning_runs.wait(case_id(path, name, framework))
    assert run.returncode == 0, f"exit {run.returncode} after {run.seconds:.0f} s\n" + run.log[-5000:]
    results = rlstack.analysis.load(run.storage / name)
    last = results.iloc[-1]
    assert last["episode_reward_mean"] >= reward_bar, (
        f"{name} ({framework}) reached only {last['episode_reward_mean']:.1f} in {last['timesteps_total']} steps"
    )
    assert last["timesteps_total"] <= step_budget
