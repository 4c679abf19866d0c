"""Learning tests: every tuned example in tune_configs/ reaches its stop reward within its
step budget, run exactly as a user runs it: `rlstack train -f FILE` (on Ray Tune).

Thresholds come from the YAML files (classic RLlib's bars); seeds are fixed; no retries.

The runs are separate processes, and most of them keep one core busy (a trainer with no
rollout workers samples and learns in one process), so they are started two at a time
(:class:`LearningRuns`) on CI's two cores; an example with rollout workers runs alone, as it
was tuned. Each run's bar is counted in env steps, not seconds, so sharing the machine
changes how long a run takes, not what it has to reach.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import rlstack.analysis
from rlstack.experiments import load_experiments, needed_cpus
from rlstack.trainers.registry import get_trainer_class
from tests.tuned_examples import learning_cases

# Every example that fits this machine, in each framework it names (tests/tuned_examples.py).
CASES = learning_cases()
CASE_IDS = [f"{p.stem}-{f}" for p, _, f in CASES]

FRAMEWORK_MODULES = {"torch": "torch", "tf": "tensorflow"}
SLOTS = 2  # CI's cores
RUN_TIMEOUT_S = 1800  # per run, sharing the machine; the longest alone took ~250 s


@dataclass
class Run:
    """One `rlstack train` of one case, its place in the pool and how it ended."""

    path: Path
    name: str
    framework: str
    storage: Path
    slots: int
    done: threading.Event = field(default_factory=threading.Event)
    returncode: int | None = None
    log: str = ""
    seconds: float = 0.0


class LearningRuns:
    """Runs the selected learning cases as subprocesses, at most ``SLOTS`` cores' worth at
    once, in a background thread; each test waits for its own case.

    A case that asks Ray for one CPU (no rollout workers) takes one slot; a case with rollout
    workers, the Ape-X replay shards or A3C's asynchronous workers takes them all, since its
    sampling-to-learning balance is what its tuned example was tuned under.
    """

    def __init__(self, runs: list[Run]) -> None:
        # Multi-slot cases first, then the others, so single runs pair up until the end.
        self.runs = sorted(runs, key=lambda run: -run.slots)
        self._running: list[tuple[Run, subprocess.Popen, float]] = []
        self._stopping = False
        self._thread = threading.Thread(target=self._schedule, name="learning-runs", daemon=True)
        self._thread.start()

    def _schedule(self) -> None:
        running = self._running
        pending = list(self.runs)
        while (pending or running) and not self._stopping:
            busy = sum(run.slots for run, _, _ in running)
            if pending and busy + pending[0].slots <= SLOTS:
                run = pending.pop(0)
                running.append((run, self._start(run), time.monotonic()))
                continue
            time.sleep(0.5)
            for entry in list(running):
                run, proc, started = entry
                if proc.poll() is None and time.monotonic() - started < RUN_TIMEOUT_S:
                    continue
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                    run.log = f"killed after {RUN_TIMEOUT_S} s\n"
                self._finish(run, proc, time.monotonic() - started)
                running.remove(entry)

    def _start(self, run: Run) -> subprocess.Popen:
        run.storage.mkdir(parents=True, exist_ok=True)
        log = open(run.storage / "run.log", "w")  # noqa: SIM115 - closed in _finish
        proc = subprocess.Popen(
            [sys.executable, "-m", "rlstack", "train", "-f", str(run.path), "--framework", run.framework,
             "--storage-path", str(run.storage)],
            stdout=log, stderr=subprocess.STDOUT, text=True, env=self._env(run),
        )
        proc.log_file = log  # type: ignore[attr-defined]
        return proc

    @staticmethod
    def _env(run: Run) -> dict[str, str]:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        if run.slots < SLOTS:
            # A run sharing the machine gets one core's worth of threads: two runs whose
            # thread pools each span both cores spin against each other.
            env["OMP_NUM_THREADS"] = "1"
        return env

    def _finish(self, run: Run, proc: subprocess.Popen, seconds: float) -> None:
        proc.log_file.close()  # type: ignore[attr-defined]
        run.returncode = proc.returncode
        run.seconds = seconds
        run.log += (run.storage / "run.log").read_text(errors="replace")
        run.done.set()

    def wait(self, path: Path, name: str, framework: str) -> Run:
        run = next(r for r in self.runs if (r.path, r.name, r.framework) == (path, name, framework))
        run.done.wait()
        return run

    def stop(self) -> None:
        """Kills what is still running (an interrupted session leaves no training behind)."""
        self._stopping = True
        for _, proc, _ in list(self._running):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self._thread.join(timeout=10)


def _slots(path: Path, name: str) -> int:
    spec = load_experiments(str(path))[name]
    cpus = needed_cpus(get_trainer_class(spec["run"]), spec.get("config") or {})
    return 1 if cpus <= 1 else SLOTS


@pytest.fixture(scope="module")
def learning_runs(request, tmp_path_factory):
    """The pool, holding only the cases this session selected (``-k`` runs fewer)."""
    selected = {item.callspec.id for item in request.session.items
                if item.originalname == "test_reaches_stop_reward" and hasattr(item, "callspec")}
    root = tmp_path_factory.mktemp("learning")
    runs = [Run(path, name, framework, root / case_id, _slots(path, name))
            for (path, name, framework), case_id in zip(CASES, CASE_IDS)
            if case_id in selected and importlib.util.find_spec(FRAMEWORK_MODULES[framework])]
    pool = LearningRuns(runs)
    yield pool
    pool.stop()
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None:  # how long each run took, sharing the machine
        with capture.global_and_fixture_disabled():
            reporter.write_line("")
            for run in pool.runs:
                if run.done.is_set():
                    reporter.write_line(f"learning run {run.storage.name}: {run.seconds:.0f} s "
                                        f"({run.slots} slot{'s' if run.slots > 1 else ''}), exit {run.returncode}")


@pytest.mark.parametrize(("path", "name", "framework"), CASES, ids=CASE_IDS)
def test_reaches_stop_reward(path, name, framework, learning_runs):
    pytest.importorskip(FRAMEWORK_MODULES[framework])
    spec = load_experiments(str(path))[name]
    reward_bar = spec["stop"]["episode_reward_mean"]
    step_budget = spec["stop"]["timesteps_total"]
    run = learning_runs.wait(path, name, framework)
    assert run.returncode == 0, f"exit {run.returncode} after {run.seconds:.0f} s\n" + run.log[-5000:]
    results = rlstack.analysis.load(run.storage / name)
    last = results.iloc[-1]
    assert last["episode_reward_mean"] >= reward_bar, (
        f"{name} ({framework}) reached only {last['episode_reward_mean']:.1f} in {last['timesteps_total']} steps"
    )
    assert last["timesteps_total"] <= step_budget
