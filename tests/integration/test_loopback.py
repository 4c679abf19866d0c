"""A Ray that rlstack starts itself listens on the loopback interface only: a standalone
trainer with a remote worker, run in a subprocess the way a user runs one (no ``ray.init``
beforehand), and every listening TCP socket of every process of
its Ray (the driver, GCS, raylet with its object manager, dashboard and runtime-env
agents, monitor, workers) is on 127.0.0.1 / ::1; likewise for ``rlstack serve``, but for
the one port per Serve replica that Ray binds to all interfaces. When a cluster is named (``RAY_ADDRESS``)
rlstack connects to it as it is, binding nothing."""

from __future__ import annotations

import ipaddress
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections import Counter

import psutil
import pytest

import rlstack.trainers.common.ray_start as ray_start

# What Ray 2.60 cannot bind to loopback: (process name prefix, wildcard IP) -> why. Every
# daemon of a single-node Ray whose node IP is 127.0.0.1 binds 127.0.0.1 (the C++ gRPC
# servers as ::ffff:127.0.0.1 on an IPv6 socket: it accepts local connections only).
ALLOWED_ELSEWHERE = {
    # Serve's inter-deployment gRPC server: ray/serve/_private/replica.py binds "[::]:0",
    # with no setting; one such port per replica. Only `rlstack serve` has replicas.
    ("ray::ServeReplica", "::"): "Serve replica's internal gRPC server, hard-coded [::]:0",
}

TRAINER = textwrap.dedent("""
    import sys
    from rlstack.trainers.pg import PGTrainer

    trainer = PGTrainer({"framework": "torch", "num_workers": 1, "train_batch_size": 100,
                         "rollout_fragment_length": 50, "min_time_s_per_reporting": 0,
                         "model": {"fcnet_hiddens": [16]}}, "CartPole-v1")
    trainer.train()
    print("TRAINED", trainer.save(sys.argv[1]), flush=True)
    sys.stdin.readline()  # the test lists the sockets meanwhile
    trainer.stop()
""")


def _is_loopback(ip: str) -> bool:
    address = ipaddress.ip_address(ip.split("%")[0])
    mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1 on an IPv6 socket
    return address.is_loopback or (mapped is not None and mapped.is_loopback)


def _listening(pid: int) -> tuple[set[str], set[tuple[str, int, str, int]]]:
    """Names of the process ``pid`` and its descendants (its Ray), and their listening TCP
    sockets as (name, pid, IP, port), gathered over a few seconds: some ports (metrics
    exporters, the dashboard agent's HTTP) open a little after the rest."""
    names, sockets = set(), set()
    for _ in range(4):
        root = psutil.Process(pid)
        for process in [root, *root.children(recursive=True)]:
            try:
                names.add(process.name())
                sockets |= {(process.name(), process.pid, conn.laddr.ip, conn.laddr.port)
                            for conn in process.net_connections(kind="tcp") if conn.status == psutil.CONN_LISTEN}
            except psutil.Error:  # a worker that exited between listing and reading it
                continue
        time.sleep(1.0)
    return names, sockets


def _exposed(sockets: set[tuple[str, int, str, int]]) -> list[tuple[str, int, str, int]]:
    allowed = Counter()
    exposed = []
    for name, pid, ip, port in sorted(sockets):
        if _is_loopback(ip):
            continue
        key = next((key for key in ALLOWED_ELSEWHERE if name.startswith(key[0]) and ip == key[1]), None)
        if key is not None and allowed[(key, pid)] == 0:
            allowed[(key, pid)] += 1  # one such port per process, not any number
            continue
        exposed.append((name, pid, ip, port))
    return exposed


def _stop(proc: subprocess.Popen, sig: int | None = None) -> int:
    if sig is None:
        proc.stdin.close()
    else:
        proc.send_signal(sig)
    try:
        return proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(names, sockets, checkpoint) of a standalone trainer with one remote worker, run
    in its own process the way a user runs one, listed while it runs."""
    env = {key: value for key, value in os.environ.items() if key != "RAY_ADDRESS"}
    checkpoint_dir = str(tmp_path_factory.mktemp("loopback") / "checkpoint")
    driver = subprocess.Popen([sys.executable, "-c", TRAINER, checkpoint_dir], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        line = driver.stdout.readline().split()
        assert line[:1] == ["TRAINED"], f"the trainer exited with {driver.poll()}"
        names, sockets = _listening(driver.pid)
    finally:
        _stop(driver)
    return names, sockets, line[1]


def test_a_trainers_own_ray_listens_on_loopback_only(trained):
    names, sockets, _ = trained
    # The listing saw the Ray it checks: its daemons and the remote worker, each listening.
    assert {"gcs_server", "raylet", "ray::RolloutWorker"} <= names, names
    listeners = {name for name, _, _, _ in sockets}
    assert {"gcs_server", "raylet", "ray::RolloutWorker", "ray::DashboardAgent"} <= listeners, sockets
    assert not [s for s in sockets if not _is_loopback(s[2])], \
        f"Ray ports reachable from other machines: {_exposed(sockets)}"


def test_rlstack_serves_own_ray_listens_on_loopback_but_for_serves_replica_port(trained):
    env = {key: value for key, value in os.environ.items() if key != "RAY_ADDRESS"}
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "rlstack", "serve", trained[2], "--port", str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        line = server.stdout.readline()
        assert line.startswith("Serving "), (line, server.poll())
        names, sockets = _listening(server.pid)
    finally:
        assert _stop(server, signal.SIGINT) == 0
    assert any(name.startswith("ray::ServeReplica") for name in names), names
    assert ("ray::ProxyActor", "127.0.0.1", port) in {(name, ip, p) for name, _, ip, p in sockets}
    assert not _exposed(sockets), f"Ray ports reachable from other machines: {_exposed(sockets)}"


def test_a_named_cluster_is_joined_as_it_is(monkeypatch):
    calls = []
    monkeypatch.setattr(ray_start.ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray_start.ray, "init", lambda **kwargs: calls.append(kwargs))
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.5:6379")
    ray_start.ensure_ray({"num_workers": 1, "evaluation_num_workers": 0, "num_cpus_per_worker": 1})
    assert calls == [{"address": "10.0.0.5:6379"}]  # no _node_ip_address: other nodes reach it

    monkeypatch.delenv("RAY_ADDRESS")
    calls.clear()
    ray_start.ensure_ray({"num_workers": 1, "evaluation_num_workers": 0, "num_cpus_per_worker": 1})
    assert calls[0]["address"] == "local" and calls[0]["_node_ip_address"] == "127.0.0.1"


@pytest.mark.parametrize("ip, loopback", [("127.0.0.1", True), ("::1", True), ("::ffff:127.0.0.1", True),
                                          ("0.0.0.0", False), ("::", False), ("192.0.2.2", False)])
def test_what_counts_as_loopback(ip, loopback):
    assert _is_loopback(ip) is loopback
