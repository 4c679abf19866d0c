"""Shared fixtures: one local Ray for the whole session, started only when a test needs it;
the markers that split the suite (``make test`` against ``make test-learning``); the
summaries printed at a session's end."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Ray's token authentication prints a warning and writes to ~/.ray on every start; the
# tests start a private local instance only.
os.environ.setdefault("RAY_AUTH_MODE", "disabled")

LEARNING_DIR = Path(__file__).resolve().parent / "learning"
CENSUS = pytest.StashKey()  # the session's tests.helpers.cpu_census.CpuCensus, with --cpu-census


@pytest.fixture(scope="session")
def ray_local():
    """A local Ray with 2 CPUs and no dashboard, shared by every test that asks for it."""
    import ray

    if not ray.is_initialized():
        from rlstack.trainers.common.ray_start import init_local_ray

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


def pytest_addoption(parser):
    parser.addoption("--cpu-census", action="store_true",
                     help="print where the machine's CPU went during the session, by process kind "
                          "(tests/helpers/cpu_census.py)")


def pytest_configure(config):
    for line in ("learning: trains to a bar (tests/learning); make test-learning runs them all",
                 "canary: a learning test that make test runs too",
                 "two_slots: an asynchronous learning run that needs both cores to itself"):
        config.addinivalue_line("markers", line)
    if config.getoption("--cpu-census") and not hasattr(config, "workerinput"):
        from tests.helpers.cpu_census import CpuCensus

        config.stash[CENSUS] = CpuCensus()  # reported in pytest_terminal_summary
        config.stash[CENSUS].start()


def pytest_collection_modifyitems(config, items):
    """Every test under tests/learning is a learning test (``-m "not learning or canary"``
    is make test's selection)."""
    for item in items:
        if LEARNING_DIR in Path(item.path).parents:
            item.add_marker(pytest.mark.learning)


_seconds_by_file: dict[str, float] = {}
_learning_rows: list[tuple[str, object, object, str]] = []


def pytest_runtest_logreport(report):
    """Adds each phase's duration to its test file's total, and keeps each learning run's
    row (the properties its test recorded), for the summaries (also under xdist: reports
    reach the controller with their properties)."""
    path = report.nodeid.split("::", 1)[0]
    _seconds_by_file[path] = _seconds_by_file.get(path, 0.0) + report.duration
    properties = dict(report.user_properties)
    if report.when == "call" and "wall_s" in properties:
        case = report.nodeid.rsplit("[", 1)[-1].rstrip("]")
        _learning_rows.append((case, properties.get("env_steps", "-"), properties["wall_s"],
                               "passed" if report.passed else "FAILED"))


def pytest_terminal_summary(terminalreporter, config):
    """The learning runs' table (case, env steps to the bar, wall seconds, passed); wall
    seconds per test file, largest first; with --cpu-census, where the machine's CPU went."""
    if _learning_rows:
        from tabulate import tabulate

        terminalreporter.section("learning runs")
        rows = sorted(_learning_rows)
        for line in tabulate(rows, headers=["case", "env steps", "wall s", "result"]).splitlines():
            terminalreporter.write_line(line)
    census = config.stash.get(CENSUS, None)
    if census is not None:
        census.stop()
        terminalreporter.section("CPU of the session, by process kind")
        for line in census.report():
            terminalreporter.write_line(line)
    if not _seconds_by_file:
        return
    total = sum(_seconds_by_file.values())
    terminalreporter.section("seconds per test file")
    for path, seconds in sorted(_seconds_by_file.items(), key=lambda item: -item[1])[:40]:
        terminalreporter.write_line(f"{seconds:8.1f} s  {100 * seconds / total:5.1f}%  {path}")
    terminalreporter.write_line(f"{total:8.1f} s  in {len(_seconds_by_file)} files")
