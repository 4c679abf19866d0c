"""Starting Ray for a trainer built before ``ray.init()``."""

from __future__ import annotations

import importlib
import math
import os
import sys
import threading
from typing import Any

import ray


def ensure_ray(config: dict[str, Any], preload: str | None = None) -> None:
    """Starts a local Ray unless Ray is running or ``RAY_ADDRESS`` names a cluster.

    A bare ``ray.init()`` attaches to whatever cluster the default temp dir records,
    which on a shared machine can be a dead one; so without an explicit address we
    start our own with ``address="local"`` and enough CPUs for the requested workers.

    ``ray.init`` mostly waits on the daemons it starts (~3.5 s on this project's 2-core
    machine, ~0.4 s of it in this process), so the module of ``preload`` (the driver
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
        ray.init(address=address)
        return
    needed = (config["num_workers"] + config["evaluation_num_workers"]) * config["num_cpus_per_worker"]
    ray.init(
        address="local",
        num_cpus=max(os.cpu_count() or 1, math.ceil(needed)),
        include_dashboard=False,
        log_to_driver=True,
    )


def _import_quietly(module_name: str) -> None:
    try:
        importlib.import_module(module_name)
    except Exception:  # noqa: BLE001 - the driver's own import of it raises, where it belongs
        pass
