"""Learning tests: every tuned example in tune_configs/ reaches its stop reward within its
step budget, run as a user runs it: `rlstack train -f FILE` (on Ray Tune), FILE holding
the example's experiment under the case's name (the one-slot runs join one shared Ray
with ``--ray-address``, the multi-slot runs another: tests/learning/pool.py).

Thresholds come from the YAML files (classic RLlib's bars; a multi-agent example's
``policy_reward_mean`` bar holds for each of its policies); seeds are fixed; no retries.

The runs are separate processes started by the pool in tests/learning/pool.py while the
rest of the session runs (session.py in this folder); each test waits for its own case.
"""

from __future__ import annotations

import pytest

import rlstack.analysis
from rlstack.experiments import PER_POLICY_KEYS, load_experiments
from tests.learning.session import FRAMEWORK_MODULES, case_id
from tests.tuned_examples import learning_cases

# Every example that fits this machine, in each framework it names (tests/tuned_examples.py).
CASES = learning_cases()
CASE_IDS = [case_id(*case) for case in CASES]


def reward_bars(stop: dict, last) -> dict[str, float]:  # noqa: ANN001 - a pandas row
    """The result columns a run must reach and their bars: ``episode_reward_mean``, and for
    a per-policy criterion (``policy_reward_mean: 150``, multi-agent) each policy's column
    (``policy_reward_mean/<policy_id>``; at least one must be there)."""
    bars = {key: stop[key] for key in ("episode_reward_mean",) if key in stop}
    for key in PER_POLICY_KEYS:
        if key in stop:
            columns = [column for column in last.index if column.startswith(f"{key}/")]
            assert columns, f"no {key}/<policy_id> column in the results: the run reported no policy's {key}"
            bars.update(dict.fromkeys(columns, stop[key]))
    assert bars, f"stop {stop} names no reward to reach (episode_reward_mean or one of {PER_POLICY_KEYS})"
    return bars


@pytest.mark.parametrize(("path", "name", "framework"), CASES, ids=CASE_IDS)
def test_reaches_stop_reward(path, name, framework, learning_runs):
    pytest.importorskip(FRAMEWORK_MODULES[framework])
    spec = load_experiments(str(path))[name]
    step_budget = spec["stop"]["timesteps_total"]
    case = case_id(path, name, framework)
    run = learning_runs.wait(case)
    assert run.returncode == 0, f"exit {run.returncode} after {run.seconds:.0f} s\n" + run.log[-5000:]
    results = rlstack.analysis.load(run.storage / case)  # the pool names each run's experiment after its case
    last = results.iloc[-1]
    for column, bar in reward_bars(spec["stop"], last).items():
        assert last[column] >= bar, (
            f"{name} ({framework}) reached only {column} = {last[column]:.1f} in {last['timesteps_total']} steps"
        )
    assert last["timesteps_total"] <= step_budget
