"""Sequences for recurrent models: train batches chopped into padded sequences.

Framework-free (numpy), shared by the torch and TF learners. A rollout worker records
one row per step with the state the policy acted from (``state_in_<i>``) and the state it
returned (``state_out_<i>``). For training, :func:`pad_batch_to_sequences` cuts the rows
into sequences of at most ``max_seq_len`` steps that never cross an episode boundary,
pads each to ``max_seq_len`` with zeros, and keeps the state only at each sequence's
start; the learner then shuffles and batches whole sequences, and every loss term is a
mean over the real steps only (``seq_mask``).

Examples:
    >>> import numpy as np
    >>> batch = SampleBatch({"obs": np.arange(5.0)[:, None], "eps_id": [7, 7, 7, 8, 8],
    ...                      "state_in_0": np.arange(5.0)[:, None]})
    >>> seqs = pad_batch_to_sequences(batch, max_seq_len=2)
    >>> seqs["seq_lens"].tolist(), seqs["obs"][..., 0].tolist(), seqs["state_in_0"][:, 0].tolist()
    ([2, 1, 2], [[0.0, 1.0], [2.0, 0.0], [3.0, 4.0]], [0.0, 2.0, 3.0])
"""

from __future__ import annotations

from typing import Any

import numpy as np

# Re-exported: 1.13 had it here.
from rlstack.models.modelv2 import add_time_dimension  # noqa: F401
from rlstack.sample_batch import SampleBatch

# The per-sequence columns of a padded batch (the others are [num_sequences, max_seq_len, ...]).
SEQ_LENS = SampleBatch.SEQ_LENS
# 1.0 on real steps, 0.0 on padding: [num_sequences, max_seq_len].
SEQ_MASK = "seq_mask"
# True on the first row of each sequence of a batch kept in row order (IMPALA's fragments).
SEQ_START = "seq_start"


def state_in_key(i: int) -> str:
    """``state_in_<i>``: the i-th state tensor a row acted from (1.13's name)."""
    return f"state_in_{i}"


def state_out_key(i: int) -> str:
    """``state_out_<i>``: the i-th state tensor a row's step returned (1.13's name)."""
    return f"state_out_{i}"


def is_per_sequence(column: str) -> bool:
    """Whether a padded batch holds ``column`` once per sequence (lengths and the states
    at each sequence's start) rather than per step."""
    return column == SEQ_LENS or column.startswith("state_in_")


def sequence_starts(eps_id: np.ndarray, max_seq_len: int) -> np.ndarray:
    """The row where each sequence starts: at every change of ``eps_id`` and every
    ``max_seq_len`` steps within an episode's run of rows.

    Raises:
        ValueError: If ``max_seq_len`` < 1.
    """
    if max_seq_len < 1:
        raise ValueError(f"max_seq_len must be >= 1, got {max_seq_len}; set model.max_seq_len to e.g. 20.")
    n = len(eps_id)
    if n == 0:
        return np.zeros(0, np.int64)
    run_starts = np.flatnonzero(np.r_[True, eps_id[1:] != eps_id[:-1]])
    run_ends = np.r_[run_starts[1:], n]
    return np.concatenate([np.arange(a, b, max_seq_len) for a, b in zip(run_starts, run_ends)]).astype(np.int64)


def trajectory_ids(batch: SampleBatch) -> np.ndarray:
    """One id per row that changes where a trajectory does: the ``eps_id``, and in a
    multi-agent policy's rows (several agents of one episode side by side) the
    ``agent_index`` too."""
    eps_id = np.asarray(batch[SampleBatch.EPS_ID])
    if SampleBatch.AGENT_INDEX not in batch or len(eps_id) == 0:
        return eps_id
    pairs = np.stack([eps_id, np.asarray(batch[SampleBatch.AGENT_INDEX])], axis=1)
    return np.cumsum(np.r_[True, (pairs[1:] != pairs[:-1]).any(axis=1)])


def mark_sequence_starts(batch: SampleBatch, max_seq_len: int, fragment_length: int | None = None) -> SampleBatch:
    """The rows as they are, with a ``seq_start`` column: True where a sequence starts (an
    ``eps_id`` change, every ``max_seq_len`` steps, and with ``fragment_length`` every
    that many rows, where each rollout fragment starts). For losses that need the rows in
    their own order (IMPALA's time-major V-trace over whole fragments); the model runs
    over the sequences from their first row's ``state_in_<i>``.

    Raises:
        ValueError: If ``max_seq_len`` < 1.
    """
    eps_id = trajectory_ids(batch)
    if fragment_length:
        # Fragments of one episode may sit side by side (two sample() calls): a new id per fragment.
        eps_id = np.stack([eps_id, np.arange(len(eps_id)) // int(fragment_length)], axis=1)
        changed = np.r_[True, (eps_id[1:] != eps_id[:-1]).any(axis=1)]
        runs = np.cumsum(changed)
    else:
        runs = eps_id
    start = np.zeros(batch.count, dtype=bool)
    start[sequence_starts(np.asarray(runs), max_seq_len)] = True
    out = SampleBatch(dict(batch))
    out[SEQ_START] = start
    return out


def pad_batch_to_sequences(batch: SampleBatch, max_seq_len: int, state_columns: list[str] | None = None,
                           ) -> SampleBatch:
    """Chops ``batch`` into zero-padded sequences of at most ``max_seq_len`` steps.

    Rows must come in episode order (as rollout workers return them); a sequence ends at
    every change of ``eps_id`` (or ``agent_index``: :func:`trajectory_ids`) and after
    ``max_seq_len`` steps.

    Args:
        batch: Rows with an ``eps_id`` column and the ``state_in_<i>`` columns.
        max_seq_len: The longest sequence (``model.max_seq_len``).
        state_columns: The state columns to keep at each sequence's start (default:
            every ``state_in_<i>`` column); ``state_out_<i>`` columns are dropped.

    Returns:
        A SampleBatch with one row per sequence: each step column as
        ``[num_sequences, max_seq_len, ...]`` (zeros after a sequence's end),
        ``seq_lens [num_sequences]``, ``seq_mask [num_sequences, max_seq_len]`` (float32
        1.0 on real steps) and each state column at the sequence's first step.

    Raises:
        ValueError: If ``max_seq_len`` < 1.
        KeyError: If the batch has no ``eps_id`` column.
    """
    starts = sequence_starts(trajectory_ids(batch), max_seq_len)
    n = batch.count
    seq_lens = np.diff(np.r_[starts, n]).astype(np.int32)
    if state_columns is None:
        state_columns = sorted(key for key in batch if key.startswith("state_in_"))
    # Where each row goes in the flattened [num_sequences * max_seq_len] layout.
    sequence_of_row = np.repeat(np.arange(len(starts)), seq_lens)
    slot = sequence_of_row * max_seq_len + (np.arange(n) - starts[sequence_of_row])
    out: dict[str, Any] = {}
    for key, value in batch.items():
        if key.startswith("state_out_") or key in state_columns:
            continue
        padded = np.zeros((len(starts) * max_seq_len, *value.shape[1:]), dtype=value.dtype)
        padded[slot] = value
        out[key] = padded.reshape(len(starts), max_seq_len, *value.shape[1:])
    for key in state_columns:
        out[key] = batch[key][starts]
    out[SEQ_LENS] = seq_lens
    out[SEQ_MASK] = (np.arange(max_seq_len)[None, :] < seq_lens[:, None]).astype(np.float32)
    return SampleBatch(out)


def chop_into_sequences(*, feature_columns: list[np.ndarray], state_columns: list[np.ndarray], max_seq_len: int,
                        episode_ids: np.ndarray, **_unused: Any) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray]:
    """1.13's ``chop_into_sequences`` on plain arrays: the same cut as
    :func:`pad_batch_to_sequences`.

    Returns:
        ``(feature_sequences, initial_states, seq_lens)``: each feature column padded
        and flattened to ``[num_sequences * max_seq_len, ...]``, each state column at the
        sequences' starts ``[num_sequences, ...]``, and the lengths.
    """
    batch = SampleBatch({SampleBatch.EPS_ID: np.asarray(episode_ids),
                         **{f"f{i}": np.asarray(c) for i, c in enumerate(feature_columns)},
                         **{state_in_key(i): np.asarray(c) for i, c in enumerate(state_columns)}})
    padded = pad_batch_to_sequences(batch, max_seq_len)
    features = [padded[f"f{i}"].reshape(-1, *padded[f"f{i}"].shape[2:]) for i in range(len(feature_columns))]
    states = [padded[state_in_key(i)] for i in range(len(state_columns))]
    return features, states, padded[SEQ_LENS]
