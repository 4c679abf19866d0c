"""Training a trainer until a result says something happened (a worker lost, a shard
restarted), for the fault tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def train_until(trainer: Any, condition: Callable[[dict], bool], limit: int = 12) -> dict:
    """The first result of ``trainer.train()`` for which ``condition`` holds, or the last
    of ``limit + 1`` calls (the test's own assertion then says what was missing)."""
    result = trainer.train()
    for _ in range(limit):
        if condition(result):
            return result
        result = trainer.train()
    return result
