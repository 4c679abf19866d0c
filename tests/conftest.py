"""Shared fixtures: one local Ray for the whole session, started only when a test needs it."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Ray's token authentication prints a warning and writes to ~/.ray on every start; the
# tests start a private local instance only.
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
# Ray starts its worker processes (every actor: rollout workers, trainables) at nice 15,
# where they nearly tie with the learning pool's runs at nice 19 (CFS weights 36 and 15):
# the tests' own actors would wait behind the pool's background training. At 0 they run
# as their test does; the pool's runs keep Ray's default (tests/learning/pool.py).
os.environ.setdefault("RAY_worker_niceness", "0")

CENSUS = pytest.StashKey()  # the session's tests.cpu_census.CpuCensus, in the process that sees every test


@pytest.fixture(scope="session")
def ray_local():
    """A local Ray with 2 CPUs and no dashboard, shared by every test that asks for it."""
    import ray

    if not ray.is_initialized():
        from rlstack.trainers.ray_start import init_local_ray

        init_local_ray(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture(autouse=True)
def _results_in_tmp(tmp_path_factory, monkeypatch):
    """Standalone trainers write their logs under a temporary directory, not ~/ray_results."""
    monkeypatch.setenv("RLSTACK_RESULTS_DIR", str(tmp_path_factory.mktemp("ray_results")))


@pytest.fixture(params=["torch", "tf"])
def framework(request):
    """Runs a test once per framework (skipping one that is not installed)."""
    pytest.importorskip("torch" if request.param == "torch" else "tensorflow")
    return request.param


def pytest_configure(config):
    """The learning pool's plugin (tests/learning/session.py), in every process: it runs the
    pool where it belongs and lets the learning tests wait for their runs."""
    from tests.learning.session import PLUGIN_NAME, LearningSession

    config.pluginmanager.register(LearningSession(config), PLUGIN_NAME)
    if not hasattr(config, "workerinput"):  # the process that sees the whole session
        from tests.cpu_census import CpuCensus

        config.stash[CENSUS] = CpuCensus()  # reported in pytest_terminal_summary
        config.stash[CENSUS].start()


def pytest_collection_modifyitems(config, items):
    """The tests that wait for the learning pool (tests/learning/test_tune_configs.py) run
    last: the pool trains beside the other tests from the start of the session, and its
    asynchronous cases start once those have ended. The other learning files (offline
    learning, the policy server) train in the test process for minutes: they run first,
    so that on xdist they overlap the many short files rather than end the session."""
    from tests.learning.session import is_pool_test

    def order(item) -> int:
        if is_pool_test(item.nodeid):
            return 2
        return 0 if "learning" in item.path.parts[-2:-1] else 1

    items.sort(key=order)  # stable: each group keeps its collection order


_seconds_by_file: dict[str, float] = {}


def pytest_runtest_logreport(report):
    """Adds each phase's duration to its test file's total (printed at the end)."""
    path = report.nodeid.split("::", 1)[0]
    _seconds_by_file[path] = _seconds_by_file.get(path, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter, config):
    """Wall seconds per test file, largest first: where the suite's time budget goes
    (DEVELOPERS.md). The learning files' figures are the waits for their pool's runs.
    Then, for a session of a minute or more, where the machine's CPU went (tests/cpu_census.py)."""
    census = config.stash.get(CENSUS, None)
    if census is not None:
        census.stop()
        lines = census.report()
        if lines and sum(_seconds_by_file.values()) >= 60:
            terminalreporter.section("CPU of the session, by process kind")
            for line in lines:
                terminalreporter.write_line(line)
    if not _seconds_by_file:
        return
    total = sum(_seconds_by_file.values())
    terminalreporter.section("seconds per test file")
    for path, seconds in sorted(_seconds_by_file.items(), key=lambda item: -item[1])[:40]:
        terminalreporter.write_line(f"{seconds:8.1f} s  {100 * seconds / total:5.1f}%  {path}")
    terminalreporter.write_line(f"{total:8.1f} s  in {len(_seconds_by_file)} files")
