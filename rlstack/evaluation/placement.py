"""Where a standalone trainer's remote workers go: the Ray resources of one worker,
waiting (with a limit, ``placement_timeout_s``) for their placement group, and the
rlstack error a worker raised while it started."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from typing import Any

import ray

import rlstack.errors
from rlstack.errors import PlacementTimeoutError

logger = logging.getLogger(__name__)


def worker_resources(config: dict) -> dict[str, float]:
    """The Ray resources of one remote worker: ``{"CPU": .., "GPU": .., **custom}``
    (no GPU under ``_fake_gpus``, whose policies stay on the CPU)."""
    return {"CPU": config["num_cpus_per_worker"],
            "GPU": 0 if config.get("_fake_gpus") else config["num_gpus_per_worker"],
            **(config.get("custom_resources_per_worker") or {})}


# How long a standalone trainer waits for its workers' placement group before it says why.
PLACEMENT_WARN_S = 30.0


def wait_until_placed(group: Any, config: dict, num_workers: int, name: str) -> None:
    """Waits for a standalone trainer's placement group, saying every
    ``PLACEMENT_WARN_S`` what is missing (an autoscaling cluster may need minutes to add
    nodes), for at most ``placement_timeout_s`` (None: for ever).

    Raises:
        PlacementTimeoutError: When the time is up, saying what was asked for, what the
            cluster has free, and how to fix it.
    """
    timeout = config.get("placement_timeout_s")
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            break
        if group.wait(timeout_seconds=PLACEMENT_WARN_S if remaining is None else min(PLACEMENT_WARN_S, remaining)):
            return
        if remaining is None or remaining > PLACEMENT_WARN_S:
            logger.warning("Waiting for resources for %d %s workers: %s", num_workers, name,
                           _missing_resources(config, num_workers))
    raise PlacementTimeoutError(
        f"Gave up after placement_timeout_s={timeout} waiting for resources for {num_workers} {name} workers: "
        f"{_missing_resources(config, num_workers)} Another trainer in this process may still hold them: "
        "call its stop() first. Or set placement_timeout_s=None to wait for ever."
    )


def _missing_resources(config: dict, num_workers: int) -> str:
    return (f"{worker_resources(config)} each, strategy {config['placement_strategy']}; the cluster has "
            f"{ray.cluster_resources()} in all and {ray.available_resources()} free. Lower num_workers / "
            "num_cpus_per_worker / num_gpus_per_worker (num_workers=0 samples in this process), or add nodes.")


def remove_quietly(remove: Callable[[Any], None], group: Any) -> None:
    try:
        if ray.is_initialized():
            remove(group)
    except Exception:  # noqa: BLE001 - Ray may be shutting down
        pass


def worker_start_error(exc: Exception) -> Exception | None:
    """The rlstack error a remote worker raised while it started, rebuilt in the driver
    from the text Ray kept (None if it was not an rlstack error)."""
    # Ray keeps only the text of an exception raised in an actor's __init__; a rollout
    # worker that cannot start (a Box action space for DQN, an env creator's EnvError)
    # should raise the same rlstack error as with num_workers=0, not ActorDiedError.
    text = str(exc)
    matches = list(re.finditer(r"^rlstack\.errors\.(\w+): ", text, re.M))
    error_class = getattr(rlstack.errors, matches[-1].group(1), None) if matches else None
    if not (isinstance(error_class, type) and issubclass(error_class, rlstack.errors.RLStackError)):
        return None
    error = error_class(text[matches[-1].end():].strip() + " (raised while a remote rollout worker started)")
    error.worker_traceback = text  # the worker's traceback, as text
    return error
