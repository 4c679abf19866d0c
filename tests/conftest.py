"""Shared fixtures: one local Ray for the whole session, started only when a test needs it."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Ray's token authentication prints a warning and writes to ~/.ray on every start; the
# tests start a private local instance only.
os.environ.setdefault("RAY_AUTH_MODE", "disabled")


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


def pytest_collection_modifyitems(config, items):
    """The learning tests (tests/learning) run last: their pool trains beside the other
    tests from the start of the session (tests/learning/conftest.py), and once the session
    reaches them the machine is theirs."""
    learning = [item for item in items if "learning" in item.path.parts[-2:-1]]
    if learning:
        items[:] = [item for item in items if item not in learning] + learning


_seconds_by_file: dict[str, float] = {}


def pytest_runtest_logreport(report):
    """Adds each phase's duration to its test file's total (printed at the end)."""
    path = report.nodeid.split("::", 1)[0]
    _seconds_by_file[path] = _seconds_by_file.get(path, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter):
    """Wall seconds per test file, largest first: where the suite's time budget goes
    (DEVELOPERS.md). The learning files' figures are the waits for their pool's runs."""
    if not _seconds_by_file:
        return
    total = sum(_seconds_by_file.values())
    terminalreporter.section("seconds per test file")
    for path, seconds in sorted(_seconds_by_file.items(), key=lambda item: -item[1])[:40]:
        terminalreporter.write_line(f"{seconds:8.1f} s  {100 * seconds / total:5.1f}%  {path}")
    terminalreporter.write_line(f"{total:8.1f} s  in {len(_seconds_by_file)} files")
