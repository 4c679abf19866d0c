"""Benchmark plumbing: run a child process, sample its process tree's memory, collect
the JSON line it prints, and summarise repeated runs.

Wall time is measured from the child's own process start (interpreter start, imports,
``ray.init`` and trainer build included), the method BENCHMARKS.md states for every
figure there: the parent reads the clock just before it starts the child and hands that
time down. (The kernel's own record of a process's start, which psutil reads, is offset
by up to a second: Linux reports the boot time in whole seconds. On the benchmark
machine of 2026-11-22 that offset was 0.70 s, added to every figure measured before this
was fixed.) Peak RSS is the largest sum of RSS over the child and all its descendants (Ray's gcs_server, raylet,
agents and workers), sampled every 0.5 s.

rlstack's sources are byte-compiled before the first child starts. The peers come
byte-compiled from pip; rlstack is installed editable, and where PYTHONDONTWRITEBYTECODE
is set (it is on the benchmark machine) every process would otherwise compile its ~11k
lines anew: ~0.1 s in the driver and again in each Ray worker, which users do not pay.
"""

from __future__ import annotations

import compileall
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

import psutil


def tree_rss_mib(root: psutil.Process) -> float:
    """Summed RSS of ``root`` and its descendants, in MiB."""
    total = 0
    try:
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    for proc in procs:
        try:
            total += proc.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return total / 2**20


def byte_compile_rlstack() -> None:
    """Writes ``__pycache__`` for the rlstack package the children will import (a no-op
    when the compiled files are up to date)."""
    spec = importlib.util.find_spec("rlstack")
    if spec is not None and spec.submodule_search_locations:
        for folder in spec.submodule_search_locations:
            compileall.compile_dir(folder, quiet=1)


def run_child(args: list[str], timeout: float = 900, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Runs ``python args...`` and returns the last JSON object it printed, plus
    ``peak_rss_mib`` of its process tree.

    Ray's daemons are started in a new session by the child; they are found through
    the child's descendants while it runs, and sampled like any other process.
    """
    byte_compile_rlstack()
    child_env = {**os.environ, "PYTHONUNBUFFERED": "1", "RAY_AUTH_MODE": "disabled", **(env or {})}
    child_env[LAUNCH_TIME_VAR] = repr(time.time())
    proc = subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=child_env)
    root = psutil.Process(proc.pid)
    peak = 0.0
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, tree_rss_mib(root))
            stop.wait(0.5)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    finally:
        stop.set()
        sampler.join()
    record = None
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
    if record is None:
        raise RuntimeError(f"benchmark child {args} printed no JSON result (exit {proc.returncode}):\n{err[-3000:]}")
    record["peak_rss_mib"] = round(peak, 1)
    record["exit_code"] = proc.returncode
    return record


LAUNCH_TIME_VAR = "RLSTACK_BENCH_LAUNCH_TIME"


def seconds_since_process_start() -> float:
    """Wall seconds since this process was launched by :func:`run_child` (or, run by
    hand, since the OS says it was created)."""
    launched = os.environ.get(LAUNCH_TIME_VAR)
    return time.time() - (float(launched) if launched else psutil.Process().create_time())


def summarise(values: list[float]) -> dict[str, float]:
    """Median, min and max of repeated measurements."""
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3), "max": round(max(values), 3),
            "runs": len(values)}
