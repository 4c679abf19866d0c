"""Starting a local Ray: for a trainer built before ``ray.init()``, and the one helper,
``init_local_ray``, every rlstack entry point (trainer, ``rlstack train/compare/serve``)
uses to start its own Ray bound to the loopback interface."""

from __future__ import annotations

import contextlib
import importlib
import math
import os
import sys
import threading
from collections.abc import Iterator
from typing import Any

import ray


def ensure_ray(config: dict[str, Any], preload: str | None = None) -> None:
    """Starts a local Ray unless Ray is running or ``RAY_ADDRESS`` names a cluster.

    A bare ``ray.init()`` attaches to whatever cluster the default temp dir records,
    which on a shared machine can be a dead one; so without an explicit address we
    start our own with ``address="local"`` and enough CPUs for the requested workers.

    ``ray.init`` mostly waits on the daemons it starts (seconds, little of it in this
    process: BENCHMARKS.md, "Start-up"), so the module of ``preload`` (the driver
    policy's ``"module:Class"`` path, whose import brings in torch or TensorFlow) is
    imported on a second thread meanwhile. (The two imports have no module in common
    but ``timeit``: no import-lock cycle between the threads.)
    """
    if ray.is_initialized():
        return
    if preload is not None and preload.split(":")[0] not in sys.modules:
        threading.Thread(target=_import_quietly, args=(preload.split(":")[0],), name="rlstack-preload",
                         daemon=True).start()
    address = os.environ.get("RAY_ADDRESS")
    if address:
        connect_ray(address)
        return
    needed = (config["num_workers"] + config["evaluation_num_workers"]) * config["num_cpus_per_worker"]
    init_local_ray(num_cpus=max(os.cpu_count() or 1, math.ceil(needed)), include_dashboard=False, log_to_driver=True)


LOOPBACK_IP = "127.0.0.1"


def init_local_ray(**init_kwargs: Any) -> None:
    """Starts a new single-node Ray (``address="local"``) that listens on 127.0.0.1 only.

    By default every daemon of a Ray it starts (GCS, raylet and its object manager, the
    dashboard and runtime-env agents, core workers, metrics exporters) listens on all
    interfaces, so anyone who can reach the machine can run code on it. Ray binds each
    of them to loopback exactly when the node's IP is a loopback address; but ``ray.init``
    (like ``ray start --node-ip-address``) replaces ``_node_ip_address="127.0.0.1"`` by
    the machine's routable IP unless ``ray_constants.ENABLE_RAY_CLUSTER`` is false (the
    default on Windows and macOS, whose Rays are single-node; on Linux Ray 2.60 offers
    only the ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` variable, read when Ray is imported).
    So the flag is false for the length of this call, which is all that reads it: the
    daemons get 127.0.0.1 as their node IP on their command lines.
    ``tests/integration/test_loopback.py`` checks every listening socket.

    Only for a Ray rlstack starts itself: to join a cluster, call
    ``ray.init(address=...)`` (a local Ray on 127.0.0.1 cannot take other nodes).

    Args:
        init_kwargs: Further ``ray.init`` arguments (``num_cpus``, ``include_dashboard``, ...).
    """
    with _single_node_mode():
        ray.init(address="local", _node_ip_address=LOOPBACK_IP, **init_kwargs)


def connect_ray(address: str, **init_kwargs: Any) -> None:
    """``ray.init(address=address)``, also for a Ray that listens on 127.0.0.1 only (one
    that :func:`init_local_ray` started, or ``ray start --node-ip-address=127.0.0.1``).

    With cluster mode on (Linux), Ray replaces a loopback address by the machine's
    routable IP before it connects, where nothing listens; so for a loopback address the
    flag is off for the length of the call, as in :func:`init_local_ray`.
    """
    host = address.rsplit(":", 1)[0] if ":" in address else address
    if host.removeprefix("ray://") not in (LOOPBACK_IP, "localhost"):
        ray.init(address=address, **init_kwargs)
        return
    with _single_node_mode():
        ray.init(address=address, **init_kwargs)


@contextlib.contextmanager
def _single_node_mode() -> Iterator[None]:
    # Ray's ENABLE_RAY_CLUSTER off for the length of the block (see init_local_ray).
    from ray._private import ray_constants

    enable_cluster = getattr(ray_constants, "ENABLE_RAY_CLUSTER", True)
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = enable_cluster


def _import_quietly(module_name: str) -> None:
    try:
        importlib.import_module(module_name)
    except Exception:  # noqa: BLE001 - the driver's own import of it raises, where it belongs
        pass
