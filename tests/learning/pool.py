"""The pool that runs the learning cases (tests/learning) as `rlstack train` subprocesses.

The pool starts as soon as the session knows which learning cases it selected, long before
the first learning test. A one-slot case (synchronous: its result per env step does not
depend on its speed) runs at the lowest CPU priority (``nice 19``), two at a time from the
start: while the unit and integration tests run they take only the CPU those tests leave
idle, so the tests run as fast as alone and no core idles while they wait on a
subprocess or a Ray start. Once every other test of the session has ended (the learning
tests, which only wait for their runs, are ordered last: tests/conftest.py and
tests/learning/session.py) the asynchronous cases with several processes (Ape-X,
IMPALA: see ``Trainer.learns_asynchronously``) run one at a time at normal priority, as
their tuned examples were tuned on the two cores, and the one-slot cases left soak up
what those leave idle (an asynchronous run keeps ~1.5 of 2 cores busy). Every bar is
counted in env steps, so the priority of a synchronous run changes how long it takes,
not what it learns.

The one-slot runs share one Ray (``SharedRay``, started for the first of them at
``nice 19`` and shut down after the last), the multi-slot runs another (at normal
priority): each run joins its kind's with ``rlstack train --ray-address``, so the session
pays for two Ray starts instead of one per run (the daemons of a fresh Ray cost ~7 CPU s
before the first trial, and Ray gives a niced start a fixed 30 s that a busy machine can
exceed). Each run trains the case's experiment from a copy of its file, named after the
case (``cartpole-ppo-torch``): runs on one Ray need distinct experiment names.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import select
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import yaml

from rlstack.experiments import load_experiments, needed_cpus
from rlstack.trainers.registry import get_trainer_class

SLOTS = 2  # CI's cores
RUN_TIMEOUT_S = 1800  # per run, sharing the machine; the longest alone took ~250 s
RAY_START_TIMEOUT_S = 300  # for the shared Ray (three tries), on a machine busy with the other tests
ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Run:
    """One `rlstack train` of one case, its place in the pool and how it ended."""

    case_id: str
    path: Path
    name: str
    framework: str
    slots: int
    storage: Path | None = None
    done: threading.Event = field(default_factory=threading.Event)
    returncode: int | None = None
    log: str = ""
    seconds: float = 0.0
    # User + system CPU seconds of each process of the run's tree, as last sampled (every
    # 0.5 s) while it ran: the driver alone on a shared Ray (whose own CPU SharedRay
    # counts), else also its Ray's processes and the trial's actors.
    cpu_by_pid: dict[int, float] = field(default_factory=dict)

    @property
    def cpu_seconds(self) -> float:
        """CPU seconds the run's processes used (up to the last 0.5 s of each)."""
        return sum(self.cpu_by_pid.values())
    started_at: float | None = None  # seconds after the pool started


def slots_of(path: Path, name: str) -> int:
    """How many of the pool's slots a case takes: both when its trial asks Ray for
    several CPUs and its trainer learns asynchronously (what it learns per env step
    depends on its speed), one otherwise. A synchronous run with rollout workers (PPO,
    A3C with one worker) keeps ~1.25 cores busy on average (workers sample while the
    driver waits, then the driver learns while they wait), so it shares the machine
    like the one-CPU cases: slower, with the same result."""
    spec = load_experiments(str(path))[name]
    config = spec.get("config") or {}
    trainer = get_trainer_class(spec["run"])
    if needed_cpus(trainer, config) <= 1 or not trainer.learns_asynchronously(config):
        return 1
    return SLOTS


class SharedRay:
    """A Ray the pool's runs of one kind join (tests/learning/ray_host.py), at their
    priority: its workers, the runs' trials and rollout workers, run at Ray's +15 on it
    (capped at 19).

    Args:
        num_cpus: Its logical CPUs: enough for the trials that run on it at once.
        log: Where its output goes.
        niced: Whether it runs at ``nice 19`` (the one-slot runs') or at normal priority.
    """

    def __init__(self, num_cpus: int, log: Path, niced: bool) -> None:
        self._log = open(log, "w")  # noqa: SIM115 - closed in close()
        env = {key: value for key, value in os.environ.items() if key != "RAY_worker_niceness"}
        if niced:
            env["OMP_NUM_THREADS"] = "1"  # as each one-slot run's own processes (LearningRuns._env)
        # Its drivers join it on loopback without Ray's token (as the tests' own Rays: tests/conftest.py).
        env["RAY_AUTH_MODE"] = "disabled"
        nice = ["nice", "-n", "19"] if niced and shutil.which("nice") else []
        self.proc = subprocess.Popen(
            [*nice, sys.executable, "-m", "tests.learning.ray_host", str(num_cpus)], cwd=ROOT, env=env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True)
        self.cpu_by_pid: dict[int, float] = {}
        self.closed = False
        ready, _, _ = select.select([self.proc.stdout], [], [], RAY_START_TIMEOUT_S)
        self.address = self.proc.stdout.readline().strip() if ready else ""
        if not self.address:
            self.close()
            raise RuntimeError(f"the shared Ray gave no address (exit {self.proc.returncode}, limit "
                               f"{RAY_START_TIMEOUT_S} s); see {log}")

    @property
    def cpu_seconds(self) -> float:
        """CPU seconds of its processes: its daemons and every trial's actors."""
        return sum(self.cpu_by_pid.values())

    def sample_cpu(self) -> None:
        _sample_tree(self.proc.pid, self.cpu_by_pid)

    def close(self) -> None:
        """Shuts it down (the host stops Ray once its input closes); kills it after 60 s."""
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


def _sample_tree(pid: int, cpu_by_pid: dict[int, float]) -> None:
    # User + system CPU seconds of every process of the tree under pid, as of now.
    try:
        root = psutil.Process(pid)
        for process in [root, *root.children(recursive=True)]:
            with contextlib.suppress(psutil.Error):
                times = process.cpu_times()
                cpu_by_pid[process.pid] = times.user + times.system
    except psutil.Error:
        pass  # it ended just now


class LearningRuns:
    """Runs the given cases as subprocesses in a background thread (see the module's
    docstring for the order and priorities); each learning test waits for its own case.

    Args:
        runs: The cases.
        root: A folder for the runs' results and outcome files (:meth:`_record`).
        capacity: ``SLOTS`` lets the multi-slot cases start; less holds them back until
            :meth:`use_all_slots` (while other tests run).
    """

    def __init__(self, runs: list[Run], root: Path, capacity: int = SLOTS) -> None:
        self.runs = runs
        self.capacity = capacity
        self.root = root
        # The Ray each kind of run (by its slots) joins; None once one failed to start.
        self.shared_rays: dict[int, SharedRay | None] = {}
        self._running: list[tuple[Run, subprocess.Popen, float]] = []
        self._stopping = False
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._schedule, name="learning-runs", daemon=True)
        self._thread.start()

    def use_all_slots(self) -> None:
        """Every other test of the session has ended: both cores are the pool's."""
        self.capacity = SLOTS

    def _next(self, pending: list[Run], running: list[Run]) -> Run | None:
        # The multi-slot cases run one at a time, at normal priority, once the session
        # has reached the learning tests; the one-slot cases, niced, two at a time
        # throughout (with a multi-slot case running they get what it leaves idle).
        if self.capacity == SLOTS and not any(run.slots == SLOTS for run in running):
            heavy = [run for run in pending if run.slots == SLOTS]
            if heavy:
                return heavy[0]
        if sum(run.slots == 1 for run in running) < SLOTS:
            singles = [run for run in pending if run.slots == 1]
            if singles:
                return singles[0]
        return None

    def _schedule(self) -> None:
        running = self._running
        pending = list(self.runs)
        while (pending or running) and not self._stopping:
            run = self._next(pending, [run for run, _, _ in running]) if pending else None
            if run is not None:
                pending.remove(run)
                try:
                    running.append((run, self._start(run), time.monotonic()))
                except Exception as exc:  # noqa: BLE001 - its test reports it; the other runs go on
                    run.log, run.returncode = f"the pool could not start it: {exc!r}\n", -1
                    self._record(run)
                continue
            time.sleep(0.5)
            for slots, shared_ray in self.shared_rays.items():
                if shared_ray is not None and not shared_ray.closed:
                    shared_ray.sample_cpu()
                    if not any(run.slots == slots for run in [*pending, *(run for run, _, _ in running)]):
                        shared_ray.close()  # its runs are done: its CPU is the others'
            for entry in list(running):
                run, proc, started = entry
                if self._reap(run, proc) is None and time.monotonic() - started < RUN_TIMEOUT_S:
                    continue
                if proc.returncode is None:
                    proc.kill()
                    proc.wait()
                    run.log = f"killed after {RUN_TIMEOUT_S} s\n"
                self._finish(run, proc, time.monotonic() - started)
                running.remove(entry)

    @staticmethod
    def _reap(run: Run, proc: subprocess.Popen) -> int | None:
        """The run's exit code once it has ended (None before); while it runs, samples
        the CPU time of every process of its tree."""
        if proc.poll() is None:
            _sample_tree(proc.pid, run.cpu_by_pid)
        return proc.poll()

    def _start(self, run: Run) -> subprocess.Popen:
        run.storage = self.root / run.case_id
        run.storage.mkdir(parents=True, exist_ok=True)
        run.started_at = time.monotonic() - self._t0
        log = open(run.storage / "run.log", "w")  # noqa: SIM115 - closed in _finish
        nice = ["nice", "-n", "19"] if run.slots < SLOTS and shutil.which("nice") else []
        # The case's experiment alone, named after the case: runs that share a Ray must
        # not share an experiment name (Tune stages an experiment's files under the Ray
        # session by name and start second, and two runs of one name started in the same
        # second, the torch and TF runs of an example, would copy each other's trials).
        path = run.storage / f"{run.case_id}.yaml"
        path.write_text(yaml.safe_dump({run.case_id: dict(load_experiments(str(run.path))[run.name])},
                                       sort_keys=False))
        shared_ray = self._shared_ray(run.slots, log)
        ray_address = ["--ray-address", shared_ray.address] if shared_ray is not None else []
        env = self._env(run)
        if ray_address:
            env["RAY_AUTH_MODE"] = "disabled"  # as the shared Ray's (SharedRay)
        proc = subprocess.Popen(
            [*nice, sys.executable, "-m", "rlstack", "train", "-f", str(path), "--framework", run.framework,
             "--storage-path", str(run.storage), *ray_address],
            stdout=log, stderr=subprocess.STDOUT, text=True, env=env,
        )
        proc.log_file = log  # type: ignore[attr-defined]
        return proc

    def _shared_ray(self, slots: int, log) -> SharedRay | None:  # noqa: ANN001 - the run's open log
        """The Ray of the runs that take ``slots``, started for the first of them; None
        (the run starts its own) if it could not start or has ended, which the run's log says."""
        if os.environ.get("RLSTACK_POOL_SHARED_RAY", "1") == "0":
            return None  # each run starts its own (for comparisons: DEVELOPERS.md)
        if slots not in self.shared_rays:
            specs = [load_experiments(str(run.path))[run.name] for run in self.runs if run.slots == slots]
            # Two one-slot trials at once; the multi-slot ones one at a time.
            at_once = SLOTS if slots == 1 else 1
            num_cpus = at_once * max(math.ceil(needed_cpus(get_trainer_class(spec["run"]), spec.get("config") or {}))
                                     for spec in specs)
            try:
                self.shared_rays[slots] = SharedRay(max(SLOTS, num_cpus), self.root / f"shared-ray-{slots}.log",
                                                    niced=slots < SLOTS)
            except (OSError, RuntimeError) as exc:
                self.shared_rays[slots] = None
                log.write(f"the pool's shared Ray did not start ({exc}); this run starts its own\n")
                log.flush()
        shared_ray = self.shared_rays[slots]
        if shared_ray is not None and shared_ray.proc.poll() is not None:
            log.write(f"the pool's shared Ray has ended (exit {shared_ray.proc.returncode}); this run starts its own\n")
            log.flush()
            return None
        return shared_ray

    @staticmethod
    def _env(run: Run) -> dict[str, str]:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        # Ray's own worker priority (nice +15 on the run's), not the tests' 0 (tests/conftest.py).
        env.pop("RAY_worker_niceness", None)
        if run.slots < SLOTS:
            # A run sharing the machine gets one core's worth of threads: two thread pools
            # that each span both cores spin against each other.
            env["OMP_NUM_THREADS"] = "1"
        return env

    def _finish(self, run: Run, proc: subprocess.Popen, seconds: float) -> None:
        proc.log_file.close()  # type: ignore[attr-defined]
        run.returncode = proc.returncode
        run.seconds = seconds
        run.log += (run.storage / "run.log").read_text(errors="replace")
        self._record(run)

    def _record(self, run: Run) -> None:
        # How it ended, for the learning test that waits on it (in this process or an
        # xdist worker: tests/learning/session.py); written whole, then renamed.
        outcome = self.root / f"{run.case_id}.outcome.json"
        partial = outcome.with_suffix(".partial")
        partial.write_text(json.dumps({"returncode": run.returncode, "seconds": run.seconds,
                                       "log": run.log[-20000:], "storage": str(run.storage)}))
        partial.rename(outcome)
        run.done.set()

    def stop(self) -> None:
        """Kills what is still running (an interrupted session leaves no training behind)."""
        self._stopping = True
        for _, proc, _ in list(self._running):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self._thread.join(timeout=10)
        for shared_ray in self.shared_rays.values():
            if shared_ray is not None:
                shared_ray.close()

    def remove_files(self) -> None:
        """Deletes the runs' results (their logs were read into :attr:`Run.log`)."""
        shutil.rmtree(self.root, ignore_errors=True)
