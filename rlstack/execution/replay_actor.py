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
from rlstack.sample_batch import DEFAULT_POLICY_ID, MultiAgentBatch, SampleBatch


# Between a policy id and a buffer's state key in a multi-agent shard's state.
_SEP = "::"


class ReplayActor:
    """Replay buffers behind a Ray actor interface: one, or in a multi-agent run one per
    policy id (1.13's "independent" replay), each made on the policy's first rows.

    Args:
        config: The trainer's config (``prioritized_replay`` and its keys).
        capacity: Rows this shard keeps (per policy).
        seed: Seed of the sampling generator (each policy's buffer its own stream).
    """

    def __init__(self, config: dict[str, Any], capacity: int, seed: int | None = None) -> None:
        self._config, self._capacity, self._seed = config, capacity, seed
        self.buffers: dict[str, ReplayBuffer] = {}
        self._buffer(DEFAULT_POLICY_ID)

    def _buffer(self, policy_id: str) -> ReplayBuffer:
        buffer = self.buffers.get(policy_id)
        if buffer is None:
            seed = None if self._seed is None else self._seed + 104_729 * len(self.buffers)
            buffer = self.buffers[policy_id] = make_replay_buffer(self._config, self._capacity, seed)
        return buffer

    def add(self, batch: SampleBatch | MultiAgentBatch) -> int:
        """Stores a sampled batch's rows (a multi-agent batch's in each policy's buffer);
        returns its env steps."""
        if isinstance(batch, MultiAgentBatch):
            for policy_id, rows in batch.policy_batches.items():
                if rows.count:
                    self._buffer(policy_id).add(rows)
        else:
            self._buffer(DEFAULT_POLICY_ID).add(batch)
        return batch.count

    def replay(self, num_items: int, beta: float, min_size: int = 1,
               policy_id: str = DEFAULT_POLICY_ID) -> SampleBatch | None:
        """A replayed batch of ``policy_id``'s rows with importance ``weights`` and
        ``batch_indexes``, or None while its buffer holds fewer than ``min_size`` rows."""
        buffer = self.buffers.get(policy_id)
        if buffer is None or len(buffer) < max(1, min_size):
            return None
        return buffer.sample(num_items, beta)

    def update_priorities(self, slots: np.ndarray, td_errors: np.ndarray, policy_id: str = DEFAULT_POLICY_ID) -> None:
        """Sets new priorities ``|td_error| + eps`` (no-op for a uniform shard)."""
        buffer = self.buffers.get(policy_id)
        if isinstance(buffer, PrioritizedReplayBuffer):
            buffer.update_priorities(slots, td_errors)

    def _multi_agent(self) -> bool:
        return set(self.buffers) != {DEFAULT_POLICY_ID}

    def stats(self) -> dict[str, Any]:
        """The shard's size and traffic counters (multi-agent: by policy id)."""
        if not self._multi_agent():
            return self.buffers[DEFAULT_POLICY_ID].stats()
        return {pid: buffer.stats() for pid, buffer in self.buffers.items() if pid != DEFAULT_POLICY_ID or len(buffer)}

    def get_state(self) -> dict[str, np.ndarray]:
        """The shard's rows and priorities (for checkpoints; multi-agent: ``<policy_id>::<name>``)."""
        if not self._multi_agent():
            return self.buffers[DEFAULT_POLICY_ID].get_state()
        return {f"{pid}{_SEP}{key}": value for pid, buffer in self.buffers.items()
                for key, value in buffer.get_state().items()}

    def set_state(self, state: dict[str, np.ndarray]) -> None:
        """Restores :meth:`get_state`."""
        if not any(_SEP in key for key in state):
            self._buffer(DEFAULT_POLICY_ID).set_state(state)
            return
        by_policy: dict[str, dict[str, np.ndarray]] = {}
        for key, value in state.items():
            pid, name = key.split(_SEP, 1)
            by_policy.setdefault(pid, {})[name] = value
        for pid, policy_state in by_policy.items():
            self._buffer(pid).set_state(policy_state)
