"""Starts the learning pool (tests/learning/pool.py) as soon as collection ends, so the
one-core learning cases train beside the unit and integration tests."""

from __future__ import annotations

import importlib.util

import pytest

from tests.learning.pool import LearningRuns, Run, slots_of
from tests.tuned_examples import learning_cases

FRAMEWORK_MODULES = {"torch": "torch", "tf": "tensorflow"}
TEST_NAME = "test_reaches_stop_reward"

_pool: LearningRuns | None = None


def case_id(path, name: str, framework: str) -> str:  # noqa: ANN001 - a Path
    """The pytest id of a learning case (``cartpole-ppo-torch``): the experiment's name,
    which is its file's stem unless the file holds several (``cartpole-appo.yaml``)."""
    return f"{name}-{framework}"


def pytest_collection_finish(session: pytest.Session) -> None:
    global _pool
    selected = {item.callspec.id for item in session.items
                if item.originalname == TEST_NAME and hasattr(item, "callspec")}
    runs = [Run(case_id(path, name, framework), path, name, framework, slots_of(path, name))
            for path, name, framework in learning_cases()
            if case_id(path, name, framework) in selected and importlib.util.find_spec(FRAMEWORK_MODULES[framework])]
    if runs and not session.config.option.collectonly:
        others = any(item.originalname != TEST_NAME for item in session.items)
        _pool = LearningRuns(runs, capacity=1 if others else 2)


def pytest_sessionfinish(session: pytest.Session) -> None:
    # Also when the learning tests never ran (an earlier failure with -x, an interrupt).
    if _pool is not None:
        _pool.stop()


@pytest.fixture(scope="module")
def learning_runs(request):
    """The pool; from the first learning test on it has both cores."""
    assert _pool is not None, "the learning pool starts in pytest_collection_finish"
    _pool.use_all_slots()
    yield _pool
    _pool.stop()
    failed = request.session.testsfailed
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None:  # when each run started and how long it took
        with capture.global_and_fixture_disabled():
            reporter.write_line("")
            for run in _pool.runs:
                if run.done.is_set():
                    reporter.write_line(f"learning run {run.case_id}: started at {run.started_at:.0f} s, "
                                        f"{run.seconds:.0f} s ({run.slots} slot{'s' if run.slots > 1 else ''}), "
                                        f"{run.cpu_seconds:.0f} CPU s, "
                                        f"exit {run.returncode}")
    if not failed:
        _pool.remove_files()
