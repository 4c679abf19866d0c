"""ReplayActor: one shard of ApeX's distributed prioritized replay, run as a Ray actor.

The driver routes each sampled batch (as an object reference: the rows travel from the
rollout worker to the shard without passing through the driver) to a shard, asks shards
for replayed batches for the learner, and sends the learner's TD errors back as new
priorities. Shards take no CPU reservation (``num_cpus=0``), as in classic RLlib: they
mostly wait.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlstack.execution.replay_buffer import PrioritizedReplayBuffer, ReplayBuffer, make_replay_buffer
from rlstack.sample_batch import SampleBatch


class ReplayActor:
    """A replay buffer behind a Ray actor interface.

    Args:
        config: The trainer's config (``prioritized_replay`` and its keys).
        capacity: Rows this shard keeps.
        seed: Seed of the sampling generator.
    """

    def __init__(self, config: dict[str, Any], capacity: int, seed: int | None = None) -> None:
        self.buffer: ReplayBuffer = make_replay_buffer(config, capacity, seed)

    def add(self, batch: SampleBatch) -> int:
        """Stores a sampled batch's rows; returns how many."""
        self.buffer.add(batch)
        return batch.count

    def replay(self, num_items: int, beta: float, min_size: int = 1) -> SampleBatch | None:
        """A replayed batch with importance ``weights`` and ``batch_indexes``, or None
        while the shard holds fewer than ``min_size`` rows."""
        if len(self.buffer) < max(1, min_size):
            return None
        return self.buffer.sample(num_items, beta)

    def update_priorities(self, slots: np.ndarray, td_errors: np.ndarray) -> None:
        """Sets new priorities ``|td_error| + eps`` (no-op for a uniform shard)."""
        if isinstance(self.buffer, PrioritizedReplayBuffer):
            self.buffer.update_priorities(slots, td_errors)

    def stats(self) -> dict[str, Any]:
        """The shard's size and traffic counters."""
        return self.buffer.stats()

    def get_state(self) -> dict[str, np.ndarray]:
        """The shard's rows and priorities (for checkpoints)."""
        return self.buffer.get_state()

    def set_state(self, state: dict[str, np.ndarray]) -> None:
        """Restores :meth:`get_state`."""
        self.buffer.set_state(state)
