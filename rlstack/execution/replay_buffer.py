"""Experience replay: a uniform ring buffer and a prioritized one (Schaul et al. 2016).

Rows are stored column by column in preallocated numpy arrays (allocated on the first
``add``, from that batch's columns), so sampling a batch is one fancy-index per column.
The prioritized buffer keeps ``priority ** alpha`` of every slot in a sum tree (to
sample in proportion) and a min tree (to normalise the importance weights).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlstack.execution.segment_tree import MinSegmentTree, SumSegmentTree
from rlstack.sample_batch import SampleBatch

__all__ = ["PrioritizedReplayBuffer", "ReplayBuffer"]


class ReplayBuffer:
    """A ring buffer of the last ``capacity`` rows, sampled uniformly with replacement.

    Args:
        capacity: Rows kept; the oldest are overwritten first.
        seed: Seed of the sampling generator (None: random).

    Raises:
        ValueError: If ``capacity < 1``.
    """

    def __init__(self, capacity: int, seed: int | None = None) -> None:
        if capacity < 1:
            raise ValueError(f"A replay buffer needs capacity >= 1 (buffer_size), got {capacity}.")
        self.capacity = int(capacity)
        self._columns: dict[str, np.ndarray] = {}
        self._next = 0
        self._size = 0
        self._num_added = 0
        self._num_sampled = 0
        self._rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        return self._size

    def _allocate(self, batch: SampleBatch) -> None:
        for key, value in batch.items():
            self._columns[key] = np.empty((self.capacity, *value.shape[1:]), dtype=value.dtype)

    def add(self, batch: SampleBatch) -> np.ndarray:
        """Appends the rows of ``batch`` (overwriting the oldest when full).

        Returns:
            The slots the rows went to.

        Raises:
            ValueError: If the batch's columns differ from those already stored.
        """
        if not self._columns:
            self._allocate(batch)
        if set(batch) != set(self._columns):
            raise ValueError(
                f"Replay batch columns {sorted(batch)} differ from the stored columns {sorted(self._columns)}."
            )
        n = batch.count
        if n > self.capacity:  # only the newest rows fit
            batch = batch.slice(n - self.capacity, n)
            n = self.capacity
        slots = (self._next + np.arange(n)) % self.capacity
        for key, column in self._columns.items():
            column[slots] = batch[key]
        self._next = int((self._next + n) % self.capacity)
        self._size = min(self.capacity, self._size + n)
        self._num_added += n
        return slots

    def _take(self, slots: np.ndarray) -> SampleBatch:
        columns = {key: column[slots] for key, column in self._columns.items()}
        columns[SampleBatch.BATCH_INDEXES] = slots
        self._num_sampled += len(slots)
        return SampleBatch(columns)

    def sample(self, num_items: int, beta: float = 0.4) -> SampleBatch:
        """``num_items`` rows drawn uniformly with replacement, with their slots in
        ``batch_indexes`` and importance ``weights`` of 1 (so that learners treat both
        buffers alike; ``beta`` only matters for the prioritized buffer).

        Raises:
            ValueError: If the buffer is empty.
        """
        if self._size == 0:
            raise ValueError("Cannot sample from an empty replay buffer; add experience first (learning_starts).")
        batch = self._take(self._rng.integers(0, self._size, size=num_items))
        batch[SampleBatch.WEIGHTS] = np.ones(num_items, dtype=np.float32)
        return batch

    def stats(self) -> dict[str, float]:
        """Size and traffic counters, for the result dict."""
        return {"num_entries": self._size, "capacity": self.capacity, "num_added": self._num_added,
                "num_sampled": self._num_sampled}

    def get_state(self) -> dict[str, np.ndarray]:
        """The stored rows and counters as numpy arrays (for checkpoints)."""
        # Oldest row first, so the state loads into a buffer of any capacity that fits it.
        order = self._chronological_slots()
        state = {f"column/{key}": column[order] for key, column in self._columns.items()}
        state["counters"] = np.asarray([self._size, self._num_added, self._num_sampled], dtype=np.int64)
        return state

    def _chronological_slots(self) -> np.ndarray:
        if self._size < self.capacity:
            return np.arange(self._size)
        return (self._next + np.arange(self.capacity)) % self.capacity

    def set_state(self, state: dict[str, np.ndarray]) -> None:
        """Restores :meth:`get_state`'s arrays.

        Raises:
            ValueError: If the stored rows do not fit this buffer's capacity.
        """
        size, self._num_added, self._num_sampled = (int(v) for v in state["counters"])
        if size > self.capacity:
            raise ValueError(f"The saved replay buffer holds {size} rows but buffer_size is {self.capacity}; "
                             f"restore with buffer_size >= {size}.")
        self._columns = {}
        for key, value in state.items():
            if key.startswith("column/"):
                column = np.empty((self.capacity, *value.shape[1:]), dtype=value.dtype)
                column[:size] = value
                self._columns[key[len("column/"):]] = column
        self._size = size
        self._next = size % self.capacity


class PrioritizedReplayBuffer(ReplayBuffer):
    """Samples row ``i`` with probability ``p_i ** alpha / sum_k p_k ** alpha``.

    New rows get the largest priority seen so far (or their own ``priorities`` column,
    computed by the worker, when the batch has one); :meth:`update_priorities` sets
    ``p_i = |td_error_i| + eps`` after learning on them.

    Args:
        capacity: Rows kept.
        alpha: How much prioritisation is used (0: uniform).
        eps: Added to every priority so that no row becomes unreachable.
        seed: Seed of the sampling generator.
    """

    def __init__(self, capacity: int, alpha: float = 0.6, eps: float = 1e-6, seed: int | None = None) -> None:
        super().__init__(capacity, seed)
        if alpha < 0:
            raise ValueError(f"prioritized_replay_alpha must be >= 0, got {alpha}.")
        self.alpha = float(alpha)
        self.eps = float(eps)
        self._sum_tree = SumSegmentTree(self.capacity)
        self._min_tree = MinSegmentTree(self.capacity)
        self._max_priority = 1.0

    def add(self, batch: SampleBatch) -> np.ndarray:
        """Appends rows; a ``priorities`` column (worker-side prioritisation) sets their
        initial priorities and is not stored."""
        priorities = None
        if SampleBatch.PRIORITIES in batch:
            batch = SampleBatch(batch)
            priorities = np.abs(batch.pop(SampleBatch.PRIORITIES).astype(np.float64)) + self.eps
        slots = super().add(batch)
        if priorities is None:
            priorities = np.full(len(slots), self._max_priority)
        else:
            priorities = priorities[-len(slots):]
            self._max_priority = max(self._max_priority, float(priorities.max()))
        self._set_priorities(slots, priorities)
        return slots

    def _set_priorities(self, slots: np.ndarray, priorities: np.ndarray) -> None:
        scaled = np.power(priorities, self.alpha)
        self._sum_tree.update(slots, scaled)
        self._min_tree.update(slots, scaled)

    def sample(self, num_items: int, beta: float = 0.4) -> SampleBatch:
        """``num_items`` rows drawn in proportion to their priorities, with importance
        weights ``w_i = (N P(i)) ** -beta / max_j (N P(j)) ** -beta`` in ``weights``.

        Args:
            num_items: Rows to draw (with replacement).
            beta: Importance-sampling exponent (0: no correction, 1: full correction).

        Raises:
            ValueError: If the buffer is empty.
        """
        if self._size == 0:
            raise ValueError("Cannot sample from an empty replay buffer; add experience first (learning_starts).")
        total = self._sum_tree.total()
        mass = self._rng.random(num_items) * total
        slots = np.minimum(self._sum_tree.find_prefixsum_index(mass), self._size - 1)
        probabilities = self._sum_tree[slots] / total
        min_probability = self._min_tree.min() / total
        weights = np.power(self._size * probabilities, -beta) / np.power(self._size * min_probability, -beta)
        batch = self._take(slots)
        batch[SampleBatch.WEIGHTS] = weights.astype(np.float32)
        return batch

    def update_priorities(self, slots: np.ndarray, priorities: np.ndarray) -> None:
        """Sets ``p_i = |priority_i| + eps`` for the given slots (TD errors after learning).

        Raises:
            ValueError: If a priority is not finite.
        """
        priorities = np.abs(np.asarray(priorities, dtype=np.float64)) + self.eps
        slots = np.asarray(slots, dtype=np.int64)
        if not np.isfinite(priorities).all():
            raise ValueError("Replay priorities must be finite; the TD errors contain NaN or inf.")
        if slots.size and (slots.min() < 0 or slots.max() >= self._size):
            raise IndexError(f"Replay slots must be in [0, {self._size}) (the rows stored), got "
                             f"{slots.min()}..{slots.max()}.")
        self._set_priorities(slots, priorities)
        self._max_priority = max(self._max_priority, float(priorities.max(initial=0.0)))

    def stats(self) -> dict[str, float]:
        return {**super().stats(), "max_priority": self._max_priority}

    def get_state(self) -> dict[str, np.ndarray]:
        state = super().get_state()
        # Leaves hold p ** alpha, in the same oldest-first order as the rows.
        state["priorities"] = self._sum_tree[self._chronological_slots()]
        state["max_priority"] = np.asarray(self._max_priority)
        return state

    def set_state(self, state: dict[str, np.ndarray]) -> None:
        if "priorities" not in state:
            raise ValueError("This replay state has no priorities (it was saved with prioritized_replay=False); "
                             "restore it with prioritized_replay=False.")
        super().set_state(state)
        self._sum_tree = SumSegmentTree(self.capacity)
        self._min_tree = MinSegmentTree(self.capacity)
        slots = np.arange(self._size)
        self._sum_tree.update(slots, state["priorities"])
        self._min_tree.update(slots, state["priorities"])
        self._max_priority = float(state["max_priority"])


def make_replay_buffer(config: dict[str, Any], capacity: int | None = None, seed: int | None = None) -> ReplayBuffer:
    """The buffer a DQN-family config asks for (``prioritized_replay`` and friends)."""
    capacity = int(capacity or config["buffer_size"])
    if config["prioritized_replay"]:
        return PrioritizedReplayBuffer(capacity, config["prioritized_replay_alpha"], config["prioritized_replay_eps"],
                                       seed=seed)
    return ReplayBuffer(capacity, seed=seed)
