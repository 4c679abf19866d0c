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
import importlib
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


def tuned_example(file_name: str) -> dict[str, Any]:
    """The first experiment of ``tune_configs/<file_name>`` (its ``run``, ``env``, ``stop``
    and ``config``), as the benchmarks start from the tuned examples."""
    import yaml

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tune_configs", file_name)
    with open(path) as file:
        return next(iter(yaml.safe_load(file).values()))


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


def start_local_ray(**init_kwargs: Any) -> None:
    """A new local Ray on 127.0.0.1 for a benchmark child: ``init_local_ray`` of the
    rlstack build being measured, or, for an older build without it (``make bench-check``
    measures older commits with today's bench scripts), ``ray.init(address="local")``."""
    # trainers/common/ray_start.py, trainers/ray_start.py before that folder, or neither.
    for module in ("rlstack.trainers.common.ray_start", "rlstack.trainers.ray_start"):
        try:
            init_local_ray = importlib.import_module(module).init_local_ray
        except (ImportError, AttributeError):
            continue
        init_local_ray(**init_kwargs)
        return
    import ray

    ray.init(address="local", _node_ip_address="127.0.0.1", **init_kwargs)


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


def summarise_systems(records: dict[str, dict[str, list[dict[str, Any]]]], systems: list[str], parts: list[str],
                      keys: dict[str, tuple[str, ...]], listed: tuple[str, ...] = ("reached",)) -> dict[str, Any]:
    """Per system and part (``records[system][part]``: one record per round), :func:`summarise`
    of every key in ``keys[part]`` that all rounds have, the learning part's ``listed`` keys
    as lists, and the models' parameter counts."""
    summary: dict[str, Any] = {}
    for system in systems:
        summary[system] = {}
        for part in parts:
            runs = records[system][part]
            entry: dict[str, Any] = {key: summarise([r[key] for r in runs]) for key in keys[part]
                                     if runs and all(r.get(key) is not None for r in runs)}
            if part == "learning":
                entry.update({key: [r[key] for r in runs] for key in listed})
            params = {r.get("params") for r in runs if r.get("params") is not None}
            if params:
                entry["params"] = sorted(params)
            summary[system][part] = entry
    return summary


def ratios_to_peer(records: dict[str, dict[str, list[dict[str, Any]]]], systems: list[str], parts: list[str],
                   ratio_keys: dict[str, tuple[str, ...]], peer: str = "rllib") -> dict[str, dict[str, Any]]:
    """``{"<system> / <peer>": {key: summarise(round-by-round ratios)}}`` for each rlstack
    system, over the keys of ``ratio_keys[part]`` that both sides have in every round."""
    ratios: dict[str, dict[str, Any]] = {}
    for system in (s for s in systems if s.startswith("rlstack")):
        label = f"{system} / {peer}"
        ratios[label] = {}
        for part in parts:
            pairs = list(zip(records[system][part], records[peer][part]))
            for key in ratio_keys[part]:
                if pairs and all(a.get(key) and b.get(key) for a, b in pairs):
                    ratios[label][key] = summarise([a[key] / b[key] for a, b in pairs])
    return ratios
