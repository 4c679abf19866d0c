"""Learning tests: every tuned example in tune_configs/ reaches its stop reward within its
step budget, run as a user runs it: ``rlstack train -f FILE --framework FW`` (on Ray Tune,
with its own local Ray), FILE holding the example's experiment under the case's name.

Thresholds come from the YAML files (classic RLlib's bars; a multi-agent example's
``policy_reward_mean`` bar holds for each of its policies); seeds are fixed; no retries.

``make test-learning`` runs every case: the synchronous ones two at a time (pytest-xdist),
then the asynchronous ones (marked ``two_slots``: what they learn per env step depends on
their speed, and they were tuned with both cores to themselves) one at a time. ``make
test`` runs the cases in ``CANARIES`` only (marked ``canary``), one per family.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

import rlstack.analysis
from rlstack.experiments import PER_POLICY_KEYS, load_experiments, needed_cpus
from rlstack.trainers.common.registry import get_trainer_class
from tests.helpers.tuned_examples import learning_cases

ROOT = Path(__file__).resolve().parents[2]
FRAMEWORK_MODULES = {"torch": "torch", "tf": "tensorflow"}
# The learning runs of `make test`: the cheapest tuned example of each family that trains
# to its bar (on-policy, value-based, actor-critic off-policy: TD3 reaches its bar for less
# than half of pendulum-sac's CPU), in alternating frameworks;
# tests/unit/test_update_equivalence.py makes a run in one framework stand for both.
CANARIES = ("cartpole-ppo-torch", "cartpole-dqn-tf", "pendulum-td3-torch")
RUN_TIMEOUT_S = 1800  # per run; the longest alone takes ~250 s


def case_id(name: str, framework: str) -> str:
    """The pytest id of a learning case (``cartpole-ppo-torch``): the experiment's name,
    which is its file's stem unless the file holds several (``cartpole-appo.yaml``)."""
    return f"{name}-{framework}"


def learns_asynchronously(spec: dict) -> bool:
    """Whether a run's result per env step depends on its speed: its trial asks Ray for
    several CPUs and its trainer learns while its workers sample (Ape-X, IMPALA, APPO)."""
    config = spec.get("config") or {}
    trainer = get_trainer_class(spec["run"])
    return needed_cpus(trainer, config) > 1 and trainer.learns_asynchronously(config)


def _params() -> list:
    params = []
    for path, name, framework in learning_cases():
        case = case_id(name, framework)
        marks = [pytest.mark.learning]
        if case in CANARIES:
            marks.append(pytest.mark.canary)
        if learns_asynchronously(load_experiments(str(path))[name]):
            marks.append(pytest.mark.two_slots)
        params.append(pytest.param(path, name, framework, id=case, marks=marks))
    return params


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


def train(path: Path, name: str, framework: str, storage: Path) -> tuple[subprocess.CompletedProcess, float]:
    """``rlstack train`` of one experiment of ``path`` in ``framework``, its results under
    ``storage/<case id>``; returns the finished process (output in ``stdout``) and its wall seconds."""
    case = case_id(name, framework)
    experiment = storage / f"{case}.yaml"
    experiment.write_text(yaml.safe_dump({case: dict(load_experiments(str(path))[name])}, sort_keys=False))
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # Two runs share the two cores: one thread pool each, not two spinning against each other.
        env["OMP_NUM_THREADS"] = "1"
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "rlstack", "train", "-f", str(experiment), "--framework", framework,
         "--storage-path", str(storage)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=RUN_TIMEOUT_S,
    )
    return proc, time.monotonic() - started


@pytest.mark.parametrize(("path", "name", "framework"), _params())
def test_reaches_stop_reward(path, name, framework, tmp_path, record_property):
    pytest.importorskip(FRAMEWORK_MODULES[framework])
    spec = load_experiments(str(path))[name]
    step_budget = spec["stop"]["timesteps_total"]
    case = case_id(name, framework)
    proc, seconds = train(path, name, framework, tmp_path)
    record_property("wall_s", round(seconds, 1))
    assert proc.returncode == 0, f"exit {proc.returncode} after {seconds:.0f} s\n" + proc.stdout[-5000:]
    results = rlstack.analysis.load(tmp_path / case)
    last = results.iloc[-1]
    record_property("env_steps", int(last["timesteps_total"]))
    for column, bar in reward_bars(spec["stop"], last).items():
        assert last[column] >= bar, (
            f"{name} ({framework}) reached only {column} = {last[column]:.1f} in {last['timesteps_total']} steps"
        )
    assert last["timesteps_total"] <= step_budget
