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


class StepRates:
    """Env steps sampled and trained per second between two reports (an asynchronous
    trainer's ``sample_throughput`` / ``learner_throughput``)."""

    def __init__(self) -> None:
        self._mark = (time.time(), 0, 0)

    def report(self, sampled: int, trained: int) -> dict[str, float]:
        """The rates since the last call, given the counts so far."""
        now = time.time()
        last_time, last_sampled, last_trained = self._mark
        elapsed = max(1e-9, now - last_time)
        self._mark = (now, sampled, trained)
        return {"sample_throughput": (sampled - last_sampled) / elapsed,
                "learner_throughput": (trained - last_trained) / elapsed}
