"""RLlib 1.13's ``MultiAgentReplayBuffer`` (``ray.rllib.execution.buffers``): one replay
buffer per policy, filled with a worker's batches and sampled as a MultiAgentBatch.

Each policy's rows go to a buffer of their own (1.13's ``replay_mode="independent"``),
prioritized unless ``prioritized_replay_alpha`` is 0. :meth:`replay` gives nothing until
``learning_starts`` rows were added.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlstack.execution.replay_buffer import PrioritizedReplayBuffer, ReplayBuffer
from rlstack.sample_batch import DEFAULT_POLICY_ID, MultiAgentBatch, SampleBatch

__all__ = ["MultiAgentReplayBuffer"]


class MultiAgentReplayBuffer:
    """Replay buffers by policy id.

    Args:
        num_shards: How many such buffers the caller runs (each holds
            ``capacity // num_shards`` rows per policy).
        learning_starts: Rows to add before :meth:`replay` samples.
        capacity: Rows kept per policy (over all shards).
        replay_batch_size: Rows per policy in each replayed batch.
        prioritized_replay_alpha: Prioritization exponent (0: uniform buffers).
        prioritized_replay_beta: Importance-sampling exponent of the replayed weights.
        prioritized_replay_eps: Added to every priority.
        replay_mode: ``"independent"`` (each policy samples its own rows).
        replay_sequence_length: 1 (single rows; sequences are not replayed).
        seed: Seed of the sampling generators.

    Raises:
        ValueError: For ``replay_mode="lockstep"`` or sequences, which rlstack's buffers
            do not replay.
    """

    def __init__(self, num_shards: int = 1, learning_starts: int = 1000, capacity: int = 10000,
                 replay_batch_size: int = 1, prioritized_replay_alpha: float = 0.6,
                 prioritized_replay_beta: float = 0.4, prioritized_replay_eps: float = 1e-6,
                 replay_mode: str = "independent", replay_sequence_length: int = 1, replay_burn_in: int = 0,
                 replay_zero_init_states: bool = True, buffer_size: Any = None, seed: int | None = None) -> None:
        if replay_mode != "independent":
            raise ValueError(f"replay_mode={replay_mode!r} is not offered by rlstack's MultiAgentReplayBuffer: each "
                             "policy replays its own rows (replay_mode='independent').")
        if replay_sequence_length != 1 or replay_burn_in:
            raise ValueError("rlstack's MultiAgentReplayBuffer replays single rows: set replay_sequence_length=1 and "
                             "replay_burn_in=0 (R2D2 keeps sequences itself).")
        self.capacity = int(buffer_size or capacity) // max(1, int(num_shards))
        self.learning_starts = int(learning_starts)
        self.replay_batch_size = int(replay_batch_size)
        self.alpha = float(prioritized_replay_alpha)
        self.beta = float(prioritized_replay_beta)
        self.eps = float(prioritized_replay_eps)
        self.seed = seed
        self.replay_buffers: dict[str, ReplayBuffer] = {}
        self.num_added = 0

    def _buffer(self, policy_id: str) -> ReplayBuffer:
        buffer = self.replay_buffers.get(policy_id)
        if buffer is None:
            seed = None if self.seed is None else self.seed + len(self.replay_buffers)
            buffer = (PrioritizedReplayBuffer(self.capacity, self.alpha, self.eps, seed) if self.alpha > 0
                      else ReplayBuffer(self.capacity, seed))
            self.replay_buffers[policy_id] = buffer
        return buffer

    def add_batch(self, batch: SampleBatch | MultiAgentBatch) -> None:
        """Adds each policy's rows to its buffer (a SampleBatch is the default policy's)."""
        if isinstance(batch, SampleBatch):
            batch = MultiAgentBatch({DEFAULT_POLICY_ID: batch}, batch.count)
        for policy_id, rows in batch.policy_batches.items():
            if rows.count:
                self._buffer(policy_id).add(rows)
        self.num_added += batch.count

    def replay(self, policy_id: str | None = None) -> MultiAgentBatch | None:
        """``replay_batch_size`` rows of each policy (or of ``policy_id`` only), with
        ``weights`` and ``batch_indexes``; None before ``learning_starts`` rows."""
        if self.num_added < self.learning_starts or not self.replay_buffers:
            return None
        ids = [policy_id] if policy_id is not None else list(self.replay_buffers)
        samples = {}
        for pid in ids:
            samples[pid] = self.replay_buffers[pid].sample(self.replay_batch_size, beta=self.beta)
        return MultiAgentBatch(samples, self.replay_batch_size)

    def update_priorities(self, prio_dict: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
        """Sets new priorities: ``{policy_id: (batch_indexes, td_errors)}``."""
        for policy_id, (slots, td_errors) in prio_dict.items():
            buffer = self.replay_buffers[policy_id]
            if isinstance(buffer, PrioritizedReplayBuffer):
                buffer.update_priorities(np.asarray(slots), np.asarray(td_errors))

    def stats(self, debug: bool = False) -> dict[str, Any]:
        """Each policy buffer's size and traffic counters."""
        return {f"policy_{pid}": buffer.stats() for pid, buffer in self.replay_buffers.items()}

    def get_state(self) -> dict[str, Any]:
        """The buffers' rows and counters (for checkpoints)."""
        return {"num_added": self.num_added,
                "buffers": {pid: buffer.get_state() for pid, buffer in self.replay_buffers.items()}}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restores :meth:`get_state`'s contents."""
        self.num_added = int(state["num_added"])
        for pid, buffer_state in state["buffers"].items():
            self._buffer(pid).set_state(buffer_state)
