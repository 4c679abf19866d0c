"""A tiny wall-clock timer with a running mean, for ``result["timers"]``."""

from __future__ import annotations

import time


class TimerStat:
    """Accumulates the durations of a repeated section of code.

    Use as a context manager; ``mean`` is the mean over the last ``window`` uses.
    """

    def __init__(self, window: int = 10) -> None:
        self._window = window
        self._samples: list[float] = []
        self._start = 0.0
        self.total = 0.0
        self.count = 0

    def __enter__(self) -> "TimerStat":
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.push(time.perf_counter() - self._start)

    def push(self, seconds: float) -> None:
        """Records one duration in seconds."""
        self._samples.append(seconds)
        if len(self._samples) > self._window:
            self._samples.pop(0)
        self.total += seconds
        self.count += 1

    @property
    def mean(self) -> float:
        """Mean of the recent durations in seconds (0.0 before the first one)."""
        return sum(self._samples) / len(self._samples) if self._samples else 0.0
