"""The session's CPU census (tests/helpers/cpu_census.py): how processes are grouped, and that the
report accounts for the CPU a child process used."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers.cpu_census import CpuCensus, kind_of


def test_processes_are_grouped_by_what_they_are():
    assert kind_of([], "python", own_pid=7, pid=7) == "pytest (this process)"
    assert kind_of(["ray::RolloutWorker.sample()"], "ray::RolloutWor", 7, 8) == "ray worker: RolloutWorker"
    assert kind_of(["ray::IDLE"], "ray::IDLE", 7, 8) == "ray worker: IDLE"
    assert kind_of(["ray::DashboardAgent"], "ray::Dashboard", 7, 8) == "ray daemon: DashboardAgent"
    raylet = ["/venv/lib/python3.11/site-packages/ray/core/src/ray/raylet/raylet", "--node_ip_address=127.0.0.1"]
    assert kind_of(raylet, "raylet", 7, 8) == "ray daemon: raylet"
    # A worker still starting names the raylet among its arguments: it is a worker.
    starting = ["/venv/bin/python", "/venv/ray/_private/workers/default_worker.py", "--raylet-name=/tmp/raylet"]
    assert kind_of(starting, "python", 7, 8) == "ray worker: (starting)"
    assert kind_of(["/venv/bin/python", "-m", "rlstack", "train", "-f", "x.yaml"], "python", 7, 8) == \
        "rlstack train drivers"
    assert kind_of(["/venv/bin/python", "/venv/ray/dashboard/dashboard.py", "--host=127.0.0.1"], "python", 7, 8) == \
        "ray daemon: dashboard"
    assert kind_of(["/venv/bin/python", "bench/soak.py"], "python", 7, 8) == "python soak.py"
    assert kind_of(["/venv/bin/python", "-m", "ipykernel_launcher"], "python", 7, 8) == "notebook kernels"
    assert kind_of(["/venv/bin/python", "-u", "-m", "pytest"], "python", 7, 8) == "python -m pytest"


def test_the_report_counts_a_childs_cpu_and_the_machines_total():
    census = CpuCensus()
    census.start()
    child = subprocess.Popen([sys.executable, "-c", "import time\nend = time.process_time() + 3\n"
                              "while time.process_time() < end: pass\ntime.sleep(2.5)"])
    child.wait(timeout=60)
    census.stop()
    lines = census.report(cores=2)
    assert lines[0].startswith("the machine's busy CPU over the session: ")
    machine = float(lines[0].split(": ")[1].split(" CPU s")[0])
    assert machine >= 2.5  # the child's busy loop, at least
    child_line = next(line for line in lines if "python -c" in line)
    assert float(child_line.split(" CPU s")[0]) >= 2.0  # sampled while it slept after its 3 s of CPU
