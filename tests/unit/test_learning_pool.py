"""The learning pool's schedule (tests/learning/pool.py): which case starts next, at what
priority. A wrong schedule shows only as a slow or oversubscribed CI run, so it is pinned here."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from types import SimpleNamespace

import yaml

from tests.learning.pool import SLOTS, LearningRuns, Run
from tests.learning.session import POOL_TEST, LearningSession, is_pool_test


def _pool(capacity: int) -> LearningRuns:
    # The scheduling rule alone: no background thread, no subprocess.
    pool = LearningRuns.__new__(LearningRuns)
    pool.capacity = capacity
    return pool


def _run(name: str, slots: int) -> Run:
    return Run(name, Path(f"{name}.yaml"), name, "torch", slots, done=threading.Event())


def test_one_slot_cases_run_two_at_a_time_from_the_start():
    singles = [_run(f"single-{i}", 1) for i in range(3)]
    heavy = _run("heavy", SLOTS)
    pool = _pool(capacity=1)  # the unit and integration tests still run
    pending = [heavy, *singles]
    assert pool._next(pending, []) is singles[0]
    assert pool._next(pending, [singles[0]]) is singles[0]  # the first pending single
    assert pool._next(pending, singles[:2]) is None  # two singles at once at most
    assert pool._next([heavy], []) is None  # a multi-slot case waits for the learning tests


def test_multi_slot_cases_run_one_at_a_time_beside_the_singles():
    singles = [_run(f"single-{i}", 1) for i in range(3)]
    heavies = [_run(f"heavy-{i}", SLOTS) for i in range(2)]
    pool = _pool(capacity=SLOTS)
    # The multi-slot case starts at once, even with two singles running (they are niced).
    assert pool._next([*singles[2:], *heavies], singles[:2]) is heavies[0]
    # With one running, the next waits; singles still fill their two places.
    assert pool._next([*singles[2:], heavies[1]], [heavies[0], singles[0]]) is singles[2]
    assert pool._next([heavies[1]], [heavies[0], *singles[:2]]) is None


class _FakePopen:
    started: list = []

    def __init__(self, args, **kwargs):
        self.started.append((args, kwargs["env"]))
        kwargs["stdout"].close()


def _start_runs(monkeypatch, tmp_path, shared_rays) -> list:
    # Starts a one-slot and a multi-slot PPO case; returns each one's (command, environment).
    started = _FakePopen.started = []
    monkeypatch.setattr("tests.learning.pool.subprocess.Popen", _FakePopen)
    pool = _pool(capacity=SLOTS)
    pool.root, pool._t0, pool.shared_rays = tmp_path, 0.0, shared_rays
    pool.runs = [_run("single", 1), _run("heavy", SLOTS)]
    for run in pool.runs:
        run.path = tmp_path / f"{run.name}.yaml"
        run.path.write_text(f"{run.name}:\n    run: PPO\n    env: CartPole-v1\n    config: {{num_workers: 2}}\n")
        pool._start(run)
    return started


def _shared(address: str) -> SimpleNamespace:
    return SimpleNamespace(address=address, proc=SimpleNamespace(poll=lambda: None))


def test_each_kind_of_run_joins_its_own_shared_ray_and_only_one_slot_runs_are_niced(monkeypatch, tmp_path):
    (single_args, single_env), (heavy_args, heavy_env) = _start_runs(
        monkeypatch, tmp_path, {1: _shared("127.0.0.1:1111"), SLOTS: _shared("127.0.0.1:2222")})
    assert single_args[:3] == ["nice", "-n", "19"] and single_env["OMP_NUM_THREADS"] == "1"
    assert heavy_args[0] != "nice" and heavy_env.get("OMP_NUM_THREADS") == os.environ.get("OMP_NUM_THREADS")
    assert single_args[-2:] == ["--ray-address", "127.0.0.1:1111"]
    assert heavy_args[-2:] == ["--ray-address", "127.0.0.1:2222"]
    assert single_env["RAY_AUTH_MODE"] == heavy_env["RAY_AUTH_MODE"] == "disabled"
    # Each trains its example's experiment under the case's name (runs on one Ray need distinct names).
    experiments = yaml.safe_load(Path(single_args[single_args.index("-f") + 1]).read_text())
    assert list(experiments) == ["single"] and experiments["single"]["run"] == "PPO"


def test_without_shared_rays_each_run_starts_its_own(monkeypatch, tmp_path):
    monkeypatch.setenv("RLSTACK_POOL_SHARED_RAY", "0")
    for args, _ in _start_runs(monkeypatch, tmp_path, {}):
        assert "--ray-address" not in args


def test_shared_rays_are_sized_for_the_trials_they_hold_at_once(monkeypatch, tmp_path):
    made = []

    def fake_shared_ray(num_cpus, log, niced):
        made.append((num_cpus, niced))
        return _shared(f"127.0.0.1:{len(made)}")

    monkeypatch.setattr("tests.learning.pool.SharedRay", fake_shared_ray)
    _start_runs(monkeypatch, tmp_path, {})
    # PPO with 2 workers asks for 3 CPUs: two one-slot trials at once, one multi-slot trial.
    assert made == [(6, True), (3, False)]


def _session(tmp_path) -> LearningSession:
    # The plugin of the process that owns the pool, without pytest's config behind it.
    session = LearningSession.__new__(LearningSession)
    session.is_worker, session.root, session.failed = False, tmp_path, 0
    return session


def test_the_asynchronous_cases_wait_for_every_other_test_wherever_it_ran(tmp_path):
    calls = []
    session = _session(tmp_path)
    session.pool = SimpleNamespace(use_all_slots=lambda: calls.append("all"))
    session.others_left = {"tests/unit/test_a.py::test_x", "tests/integration/test_b.py::test_y"}
    report = lambda nodeid, when: SimpleNamespace(nodeid=nodeid, when=when)  # noqa: E731
    session.pytest_runtest_logreport(report("tests/unit/test_a.py::test_x", "call"))
    session.pytest_runtest_logreport(report("tests/unit/test_a.py::test_x", "teardown"))
    session.pytest_runtest_logreport(report(f"{POOL_TEST}cartpole-ppo-torch]", "teardown"))  # a pool test
    assert calls == []
    session.pytest_runtest_logreport(report("tests/integration/test_b.py::test_y", "teardown"))
    assert calls == ["all"]


def test_a_learning_test_reads_the_outcome_its_run_left(tmp_path):
    pool = _pool(capacity=SLOTS)
    pool.root = tmp_path
    run = _run("cartpole-ppo-torch", 1)
    run.returncode, run.seconds, run.log, run.storage = 0, 12.5, "x" * 30000, tmp_path / "cartpole-ppo-torch"
    pool._record(run)
    assert run.done.is_set()
    outcome = _session(tmp_path).wait("cartpole-ppo-torch")
    assert (outcome.returncode, outcome.seconds, outcome.storage) == (0, 12.5, run.storage)
    assert outcome.log == "x" * 20000  # the log's end
    assert is_pool_test(f"{POOL_TEST}cartpole-ppo-torch]") and not is_pool_test("tests/unit/test_a.py::test_x")
