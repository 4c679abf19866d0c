"""Where a test session's CPU went: the machine's busy CPU seconds over the session, how
much of its cores that was, minute by minute, and the CPU of every process that ran,
grouped by kind (this pytest process, Ray's daemons, Ray actors by class, the learning
pool's drivers, other subprocesses).

The suite's time budget (DEVELOPERS.md) is a CPU budget on CI's two cores: these figures
say which part of the suite to make cheaper, and whether the cores idled. Printed at the
end of a session that lasted a minute or more (tests/conftest.py).

A background thread reads /proc/stat and every process's CPU times every few seconds. A
process's CPU is counted from when the census first saw it (a process older than the
session counts from then) to its last sample: one that ends between two samples loses at
most one interval's CPU, and one that starts and ends between them is missed. The
machine's total (from /proc/stat) misses nothing; the difference is printed.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections import defaultdict
from dataclasses import dataclass

import psutil

INTERVAL_S = 2.0
WINDOW_S = 300.0  # the utilization timeline's step

# Ray's daemons by a word of their command line (the order matters: first match wins).
_RAY_DAEMONS = (
    ("dashboard/agent.py", "dashboard agent"),
    ("dashboard.py", "dashboard"),
    ("runtime_env/agent/main.py", "runtime-env agent"),
    ("log_monitor.py", "log monitor"),
    ("monitor.py", "autoscaler monitor"),
)


def _busy_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs since boot, from /proc/stat's ``cpu`` line."""
    with open("/proc/stat") as stat:
        fields = [int(value) for value in stat.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields[:8]) - idle, sum(fields[:8])


def kind_of(cmdline: list[str], name: str, own_pid: int, pid: int) -> str:
    """The census's group for a process, from its command line (Ray's workers set theirs
    to ``ray::ClassName...`` while they host an actor, ``ray::IDLE`` while idle)."""
    if pid == own_pid:
        return "pytest (this process)"
    head = cmdline[0] if cmdline else name
    if head.startswith("ray::"):
        title = re.split(r"[ .:]", head[len("ray::"):], maxsplit=1)[0] or "?"
        if title in ("DashboardAgent", "RuntimeEnvAgent"):
            return f"ray daemon: {title}"
        return f"ray worker: {title}"
    if os.path.basename(head) in ("gcs_server", "raylet"):
        return f"ray daemon: {os.path.basename(head)}"
    joined = " ".join(cmdline)
    if "default_worker.py" in joined:  # before the daemons: its arguments name the raylet
        return "ray worker: (starting)"
    for word, kind in _RAY_DAEMONS:
        if word in joined:
            return f"ray daemon: {kind}"
    if "rlstack train" in joined:
        return "rlstack train drivers"
    if "tests.learning.ray_host" in joined:
        return "learning pool's Ray hosts"
    if "ipykernel" in joined:
        return "notebook kernels"
    if "python" in os.path.basename(head):
        for position, arg in enumerate(cmdline[1:], start=1):
            if arg == "-c":
                return "python -c"
            if arg == "-m":
                return f"python -m {cmdline[position + 1] if position + 1 < len(cmdline) else ''}".rstrip()
            if not arg.startswith("-"):
                return f"python {os.path.basename(arg)}"
        return "python"
    return os.path.basename(head) or name or "?"


def _provisional(kind: str) -> bool:
    """Whether a Ray worker's kind may still change (it hosts no actor yet)."""
    return kind.endswith(("IDLE", "(starting)"))


@dataclass
class _Seen:
    kind: str
    first: float
    last: float


class CpuCensus:
    """Samples the machine from :meth:`start` to :meth:`stop` (see the module's docstring)."""

    def __init__(self) -> None:
        self._own_pid = os.getpid()
        self._seen: dict[tuple[int, float], _Seen] = {}  # by (pid, start time): pids are reused
        self._windows: list[tuple[float, int, int]] = []  # (seconds since start, busy, total jiffies)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="cpu-census", daemon=True)
        self._t0 = 0.0

    def start(self) -> None:
        self._t0 = time.monotonic()
        self._sample()
        self._thread.start()

    def stop(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join(timeout=30)
        self._sample()

    def _loop(self) -> None:
        while not self._stop.wait(INTERVAL_S):
            self._sample()

    def _sample(self) -> None:
        first = not self._windows  # a process older than the census counts from now
        busy, total = _busy_jiffies()
        self._windows.append((time.monotonic() - self._t0, busy, total))
        for process in psutil.process_iter(["cpu_times", "create_time"]):
            times = process.info.get("cpu_times")
            if times is None:
                continue
            cpu = times.user + times.system  # its own, not its children's
            key = (process.pid, process.info.get("create_time") or 0.0)
            seen = self._seen.get(key)
            if seen is not None:
                seen.last = cpu
                if not _provisional(seen.kind):
                    continue
            # A new process, or a Ray worker that was idle or starting when last seen and may
            # host an actor since: its command line says what it is (read only then).
            try:
                kind = kind_of(process.cmdline(), process.name(), self._own_pid, process.pid)
            except psutil.Error:
                continue  # it ended just now
            if seen is None:
                self._seen[key] = _Seen(kind, cpu if first else 0.0, cpu)
            elif not _provisional(kind):
                seen.kind = kind

    def report(self, cores: int | None = None) -> list[str]:
        """The lines the session prints: totals, the minute-by-minute use, CPU by kind."""
        if len(self._windows) < 2:
            return []
        cores = cores or psutil.cpu_count() or 1
        (_, busy0, total0), (end, busy1, total1) = self._windows[0], self._windows[-1]
        jiffy_s = (end or 1.0) * cores / max(total1 - total0, 1)  # seconds per jiffy, all cores
        machine = (busy1 - busy0) * jiffy_s
        lines = [f"the machine's busy CPU over the session: {machine:.0f} CPU s of {end * cores:.0f} "
                 f"({cores} cores x {end:.0f} s): {100 * machine / max(end * cores, 1):.0f}%"]
        timeline, last = [], self._windows[0]
        for window in self._windows[1:]:
            if window[0] - last[0] >= WINDOW_S or window is self._windows[-1]:
                share = (window[1] - last[1]) / max(window[2] - last[2], 1)
                timeline.append(f"{last[0] / 60:.0f}-{window[0] / 60:.0f} min {100 * share:.0f}%")
                last = window
        lines.append("busy share of the cores, by 5 minutes: " + ", ".join(timeline))
        by_kind: dict[str, float] = defaultdict(float)
        count: dict[str, int] = defaultdict(int)
        for seen in self._seen.values():
            used = max(seen.last - seen.first, 0.0)
            if used > 0:
                by_kind[seen.kind] += used
                count[seen.kind] += 1
        counted = sum(by_kind.values())
        for kind, used in sorted(by_kind.items(), key=lambda item: -item[1])[:25]:
            if used >= 1.0:
                lines.append(f"{used:8.0f} CPU s  {100 * used / max(machine, 1):4.1f}%  {kind} ({count[kind]} processes)")
        lines.append(f"{machine - counted:8.0f} CPU s  not seen per process (ended between samples, or kernel)")
        return lines
