"""Waiting for Ray actors to end, shared by the tests that stop trainers.

``ray.kill`` is asynchronous: a call sent right after it may still be served by the
actor's process, so a test that checks "stop() ended the actors" polls, bounded.
"""

from __future__ import annotations

import time
from typing import Any

import ray


def still_alive_after(handles: list[Any], method: str, timeout_s: float = 30.0) -> list[Any]:
    """Calls ``method`` on every handle until each raises ``RayActorError`` or
    ``timeout_s`` passes; returns the handles that still answer."""
    deadline = time.time() + timeout_s
    alive = list(handles)
    while alive and time.time() < deadline:
        still = []
        for handle in alive:
            try:
                ray.get(getattr(handle, method).remote(), timeout=5)
                still.append(handle)
            except ray.exceptions.RayActorError:
                pass
            except ray.exceptions.GetTimeoutError:
                still.append(handle)
        alive = still
        if alive:
            time.sleep(0.2)
    return alive
