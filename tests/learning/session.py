"""Who runs the learning pool (tests/learning/pool.py) and how the learning tests learn how
their runs ended, with or without pytest-xdist.

``make test`` runs in one process; a developer may run a subset on xdist workers
(``-n 2 --dist loadfile --no-loadscope-reorder``, DEVELOPERS.md). The pool must run once
per session, so it runs in the process that sees every test: the xdist controller (which collects nothing:
it learns the selected tests from the workers), or the only process without xdist. It
writes how each run ended to a file in a folder the workers are told about; a learning
test, in whatever process it runs, waits for its case's file.

The pool's multi-slot (asynchronous) cases start once every other test of the session has
ended, wherever it ran: they are tuned on the two cores.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.learning.pool import LearningRuns, Run, slots_of
from tests.tuned_examples import learning_cases

PLUGIN_NAME = "rlstack-learning"
ROOT_KEY = "rlstack_learning_root"  # in an xdist worker's workerinput
FRAMEWORK_MODULES = {"torch": "torch", "tf": "tensorflow"}
POOL_TEST = "tests/learning/test_tune_configs.py::test_reaches_stop_reward["
WAIT_LIMIT_S = 4 * 3600  # a learning test gives up on a pool that never ran its case


def case_id(path, name: str, framework: str) -> str:  # noqa: ANN001 - a Path
    """The pytest id of a learning case (``cartpole-ppo-torch``): the experiment's name,
    which is its file's stem unless the file holds several (``cartpole-appo.yaml``)."""
    return f"{name}-{framework}"


def is_pool_test(nodeid: str) -> bool:
    """Whether the test waits for a run of the pool (its case is the id in brackets)."""
    return nodeid.startswith(POOL_TEST)


@dataclass
class Outcome:
    """How one run of the pool ended, as the learning test reads it."""

    case_id: str
    returncode: int
    seconds: float
    log: str
    storage: Path


class LearningSession:
    """The plugin (registered by tests/conftest.py) that starts and feeds the pool in the
    owning process, and gives every process's learning tests their runs' outcomes."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.is_worker = hasattr(config, "workerinput")
        if self.is_worker:
            self.root = Path(config.workerinput[ROOT_KEY])
        else:
            self.root = Path(tempfile.mkdtemp(prefix="rlstack-learning-"))
        self.pool: LearningRuns | None = None
        self.others_left: set[str] = set()  # tests outside the pool not yet torn down
        self.failed = 0

    # -- the owning process ------------------------------------------------------------

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node) -> None:  # noqa: ANN001 - xdist's WorkerController
        node.workerinput[ROOT_KEY] = str(self.root)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids: list[str]) -> None:  # noqa: ANN001
        if self.pool is None:  # every worker collects the same tests
            self._start(ids)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if not self.is_worker:  # without xdist: this process is the only one
            self._start([item.nodeid for item in session.items])

    def _start(self, nodeids: list[str]) -> None:
        if self.config.option.collectonly:
            return
        selected = {nodeid[len(POOL_TEST):-1] for nodeid in nodeids if is_pool_test(nodeid)}
        runs = [Run(case_id(path, name, framework), path, name, framework, slots_of(path, name))
                for path, name, framework in learning_cases()
                if case_id(path, name, framework) in selected
                and importlib.util.find_spec(FRAMEWORK_MODULES[framework])]
        self.others_left = {nodeid for nodeid in nodeids if not is_pool_test(nodeid)}
        if runs:
            self.pool = LearningRuns(runs, self.root, capacity=1 if self.others_left else 2)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # Reports reach the owner from every worker.
        if self.pool is None or report.when != "teardown" or report.nodeid not in self.others_left:
            return
        self.others_left.discard(report.nodeid)
        if not self.others_left:
            self.pool.use_all_slots()

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error) -> None:  # noqa: ANN001
        if error is not None and self.pool is not None:  # a crashed worker reports no more
            self.pool.use_all_slots()

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        # Also when the learning tests never ran (an earlier failure with -x, an interrupt).
        self.failed = session.testsfailed
        if self.pool is not None:
            self.pool.stop()

    def pytest_terminal_summary(self, terminalreporter) -> None:  # noqa: ANN001
        if self.pool is None:
            return
        terminalreporter.section("learning runs")
        for run in self.pool.runs:  # when each run started and how long it took
            if run.done.is_set():
                terminalreporter.write_line(
                    f"learning run {run.case_id}: started at {run.started_at:.0f} s, {run.seconds:.0f} s "
                    f"({run.slots} slot{'s' if run.slots > 1 else ''}), {run.cpu_seconds:.0f} CPU s, "
                    f"exit {run.returncode}")
        for slots, shared_ray in sorted(self.pool.shared_rays.items()):  # the lines above count drivers only
            kind = "one-slot" if slots == 1 else "multi-slot"
            terminalreporter.write_line(
                f"the {kind} runs' shared Ray (their trials, rollout workers and Ray's daemons): "
                + (f"{shared_ray.cpu_seconds:.0f} CPU s" if shared_ray is not None else "did not start"))

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.is_worker:
            return
        if self.pool is None:
            shutil.rmtree(self.root, ignore_errors=True)
        elif not self.failed:  # a failure's run folders stay, for its logs
            self.pool.remove_files()

    # -- any process -------------------------------------------------------------------

    def wait(self, case: str) -> Outcome:
        """Blocks until the pool has written how the case's run ended."""
        path = self.root / f"{case}.outcome.json"
        deadline = time.monotonic() + WAIT_LIMIT_S
        while not path.exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"the learning pool wrote no outcome for {case} in {WAIT_LIMIT_S} s")
            time.sleep(1.0)
        data = json.loads(path.read_text())
        return Outcome(case, data["returncode"], data["seconds"], data["log"], Path(data["storage"]))
