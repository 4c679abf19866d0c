"""Observation filters (``observation_filter``): ``NoFilter`` and ``MeanStdFilter``.

A ``MeanStdFilter`` keeps a running mean and variance of every observation it sees
(Welford's algorithm) and returns ``(obs - mean) / std``. Each rollout worker has its own
copy; after every training iteration the driver merges what each worker saw since the
last sync (its ``buffer``) into the driver's copy and sends the merged state back to all
workers, so every worker normalises with the same statistics (classic RLlib semantics).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rlstack.errors import ConfigError

FILTERS = ("NoFilter", "MeanStdFilter")


class RunningStat:
    """Running count, mean and sum of squared deviations of arrays of a fixed shape."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = tuple(shape)
        self.count = 0
        self.mean = np.zeros(self.shape, dtype=np.float64)
        self.m2 = np.zeros(self.shape, dtype=np.float64)

    def push_batch(self, values: np.ndarray) -> None:
        """Adds a batch of values of shape ``(n, *shape)``."""
        values = np.asarray(values, dtype=np.float64)
        n = values.shape[0]
        if n == 0:
            return
        batch_mean = values.mean(axis=0)
        batch_m2 = ((values - batch_mean) ** 2).sum(axis=0)
        self._combine(n, batch_mean, batch_m2)

    def merge(self, other: "RunningStat") -> None:
        """Adds everything ``other`` has seen (Chan et al.'s parallel variance formula)."""
        if other.count:
            self._combine(other.count, other.mean, other.m2)

    def _combine(self, n: int, mean: np.ndarray, m2: np.ndarray) -> None:
        total = self.count + n
        delta = mean - self.mean
        self.mean = self.mean + delta * (n / total)
        self.m2 = self.m2 + m2 + delta**2 * (self.count * n / total)
        self.count = total

    @property
    def std(self) -> np.ndarray:
        """Standard deviation, 1.0 while fewer than two values were seen."""
        if self.count < 2:
            return np.ones(self.shape, dtype=np.float64)
        return np.sqrt(self.m2 / (self.count - 1))

    def copy(self) -> "RunningStat":
        """Returns an independent copy."""
        other = RunningStat(self.shape)
        other.count, other.mean, other.m2 = self.count, self.mean.copy(), self.m2.copy()
        return other


class NoFilter:
    """The identity filter."""

    def __call__(self, obs: np.ndarray, update: bool = True) -> np.ndarray:
        return obs

    def get_state(self) -> dict[str, np.ndarray]:
        """Returns the filter state as numpy arrays (empty: nothing to keep)."""
        return {}

    def set_state(self, state: dict[str, np.ndarray]) -> None:
        """Restores a state from :meth:`get_state`."""

    def flush_buffer(self) -> dict[str, np.ndarray]:
        """Returns and clears what was seen since the last sync (nothing here)."""
        return {}

    def apply_buffer(self, buffer: dict[str, np.ndarray]) -> None:
        """Merges a worker's buffer into this filter (nothing here)."""


class MeanStdFilter:
    """Normalises batches of observations to zero mean and unit variance.

    Args:
        shape: Shape of one observation.
        clip: Clip the normalised values to ``[-clip, clip]``.
    """

    def __init__(self, shape: tuple[int, ...], clip: float = 10.0) -> None:
        self.shape = tuple(shape)
        self.clip = clip
        self.running = RunningStat(self.shape)
        self.buffer = RunningStat(self.shape)

    def __call__(self, obs: np.ndarray, update: bool = True) -> np.ndarray:
        """Normalises a batch ``(n, *shape)``; with ``update`` it also counts it."""
        if update:
            self.running.push_batch(obs)
            self.buffer.push_batch(obs)
        normed = (obs - self.running.mean) / (self.running.std + 1e-8)
        return np.clip(normed, -self.clip, self.clip).astype(np.float32)

    def get_state(self) -> dict[str, np.ndarray]:
        """Returns the running statistics as numpy arrays (for checkpoints and syncing)."""
        return {
            "count": np.asarray(self.running.count, dtype=np.int64),
            "mean": self.running.mean.copy(),
            "m2": self.running.m2.copy(),
        }

    def set_state(self, state: dict[str, np.ndarray]) -> None:
        """Replaces the running statistics and clears the sync buffer."""
        self.running = RunningStat(self.shape)
        self.running.count = int(state["count"])
        self.running.mean = np.array(state["mean"], dtype=np.float64)
        self.running.m2 = np.array(state["m2"], dtype=np.float64)
        self.buffer = RunningStat(self.shape)

    def flush_buffer(self) -> dict[str, np.ndarray]:
        """Returns what this copy saw since the last sync, and starts a new buffer."""
        buffer = self.buffer
        self.buffer = RunningStat(self.shape)
        return {"count": np.asarray(buffer.count, dtype=np.int64), "mean": buffer.mean, "m2": buffer.m2}

    def apply_buffer(self, buffer: dict[str, np.ndarray]) -> None:
        """Merges another copy's buffer (from :meth:`flush_buffer`) into these statistics."""
        other = RunningStat(self.shape)
        other.count, other.mean, other.m2 = int(buffer["count"]), buffer["mean"], buffer["m2"]
        self.running.merge(other)


class ClassicFilter:
    """A filter written to classic RLlib's ``Filter`` API (``observation_filter=lambda
    shape: MyFilter(shape)``), synced between workers through its own methods:
    ``copy()`` + ``reset_buffer()`` on each worker, ``apply_changes(other,
    with_buffer=False)`` on the driver, ``as_serializable()`` + ``sync(other)`` back.

    Its statistics travel between processes as the filter object itself; a checkpoint
    keeps them only if the filter also has ``get_state()`` / ``set_state()`` with numpy
    arrays (checkpoints hold arrays, never pickled objects).

    Args:
        inner: The classic filter.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __call__(self, obs: np.ndarray, update: bool = True) -> np.ndarray:
        return np.asarray(self.inner(obs, update=update), dtype=np.float32)

    def get_state(self) -> dict[str, Any]:
        """The filter object (for syncing), or its own arrays where it has get_state()."""
        own = getattr(self.inner, "get_state", None)
        return dict(own()) if own is not None else {"filter": self.inner.as_serializable()}

    def set_state(self, state: dict[str, Any]) -> None:
        """Takes the statistics of :meth:`get_state`."""
        if "filter" in state and not isinstance(state["filter"], np.ndarray):
            self.inner.sync(state["filter"])
        elif state and hasattr(self.inner, "set_state"):
            self.inner.set_state(state)

    def flush_buffer(self) -> dict[str, Any]:
        """This copy (with what it saw since the last sync), after which its buffer restarts."""
        copy = self.inner.copy()
        self.inner.reset_buffer()
        return {"filter": copy}

    def apply_buffer(self, buffer: dict[str, Any]) -> None:
        """Merges a worker's copy from :meth:`flush_buffer` into these statistics."""
        if buffer:
            self.inner.apply_changes(buffer["filter"], with_buffer=False)


def make_filter(name: str | Callable[[tuple[int, ...]], Any], shape: tuple[int, ...]) -> Any:
    """Builds the filter named by ``observation_filter``, or, for a function of the
    observation shape (classic RLlib's custom filter), the :class:`ClassicFilter` of what
    it returns.

    Raises:
        ConfigError: For an unknown filter name.
    """
    if callable(name):
        return ClassicFilter(name(tuple(shape)))
    if name == "NoFilter":
        return NoFilter()
    if name == "MeanStdFilter":
        return MeanStdFilter(shape)
    raise ConfigError(f"Unknown observation_filter {name!r}; allowed: {', '.join(FILTERS)}.")
