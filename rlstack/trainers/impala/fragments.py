"""IMPALA's train rows as fixed-length fragments, for rows that do not come that way.

V-trace reads a train batch as ``[T, B]``: B fragments of ``T = rollout_fragment_length``
rows of one trajectory each. A single-agent worker returns exactly that. A multi-agent
policy's rows are each agent's trajectory pieces, of any length (an agent may act every
other step, or leave early), so :func:`fixed_length_fragments` lays every piece out in
fragments of T rows: a piece longer than T is cut into consecutive fragments (each
fragment's last row then only bootstraps its predecessors, as with a worker's fragments),
a piece's open end (a cut, not the agent's end) becomes a truncation that adds
``gamma * V(next obs)`` from the worker (its ``bootstrap_value``), and the rest of its
last fragment is padding with ``valid = 0``, which the loss leaves out. Every batch the
IMPALA losses read has the ``valid`` column (:func:`with_valid_column`).
"""

from __future__ import annotations

import numpy as np

from rlstack.policies.rnn_sequencing import trajectory_ids
from rlstack.sample_batch import SampleBatch

__all__ = ["VALID", "fixed_length_fragments", "with_valid_column"]

# 1.0 on a real row, 0.0 on padding.
VALID = "valid"


def with_valid_column(batch: SampleBatch) -> SampleBatch:
    """``batch`` with a ``valid`` column (all ones where it has none)."""
    if VALID in batch:
        return batch
    out = SampleBatch(dict(batch))
    out[VALID] = np.ones(batch.count, dtype=np.float32)
    return out


def fixed_length_fragments(batch: SampleBatch, fragment_length: int) -> SampleBatch:
    """Lays a multi-agent policy's rows out in fragments of ``fragment_length`` rows (see
    the module docstring); the rows keep their order, pieces are found where ``eps_id`` or
    ``agent_index`` changes."""
    T = int(fragment_length)
    n = batch.count
    if n == 0:
        return with_valid_column(batch)
    ids = trajectory_ids(batch)
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    ends = np.r_[starts[1:], n]
    lengths = ends - starts
    padded_lengths = -(-lengths // T) * T
    # Each row's slot in the padded layout; a padding slot repeats its piece's last row.
    offsets = np.r_[0, np.cumsum(padded_lengths)[:-1]]
    source = np.concatenate([np.minimum(np.arange(p), length - 1) + start
                             for start, length, p in zip(starts, lengths, padded_lengths)])
    real = np.concatenate([np.arange(p) < length for length, p in zip(lengths, padded_lengths)])
    out = SampleBatch({key: value[source] for key, value in batch.items()})
    last = offsets + lengths - 1  # each piece's last real row
    terminateds, truncateds = out[SampleBatch.TERMINATEDS].copy(), out[SampleBatch.TRUNCATEDS].copy()
    truncateds[last] |= ~terminateds[last]  # an open end: bootstrap from the worker's V(next obs)
    # Padding ends its piece too (discount 0), so nothing flows back into the real rows.
    terminateds[~real] = True
    truncateds[~real] = False
    out[SampleBatch.TERMINATEDS], out[SampleBatch.TRUNCATEDS] = terminateds, truncateds
    for key in (SampleBatch.REWARDS, SampleBatch.BOOTSTRAP_VALUE):
        if key in out:
            column = out[key].copy()
            column[~real] = 0
            out[key] = column
    out[VALID] = real.astype(np.float32)
    return out
