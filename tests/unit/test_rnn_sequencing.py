"""Chopping train batches into padded sequences (rlstack.policies.rnn_sequencing), on
hand-built episodes: where sequences start and end, padding, the mask, the states kept."""

from __future__ import annotations

import numpy as np
import pytest

from rlstack.policies.rnn_sequencing import (SEQ_MASK, add_time_dimension, chop_into_sequences,
                                             pad_batch_to_sequences, sequence_starts)
from rlstack.sample_batch import SampleBatch

B = SampleBatch


def _batch(eps_id):
    n = len(eps_id)
    return SampleBatch({
        B.OBS: np.arange(n, dtype=np.float32)[:, None] + 1.0,  # row i holds i + 1 (padding is 0)
        B.ACTIONS: np.arange(n),
        B.EPS_ID: np.asarray(eps_id),
        "state_in_0": np.arange(n, dtype=np.float32)[:, None] * 10,
        "state_in_1": -np.arange(n, dtype=np.float32)[:, None],
        "state_out_0": np.zeros((n, 1), np.float32),
    })


def test_sequences_end_at_episode_boundaries_and_every_max_seq_len_steps():
    # Episodes of 5, 2 and 4 steps; max_seq_len 3: [3, 2], [2], [3, 1].
    batch = _batch([4] * 5 + [9] * 2 + [2] * 4)
    seqs = pad_batch_to_sequences(batch, max_seq_len=3)
    assert seqs[B.SEQ_LENS].tolist() == [3, 2, 2, 3, 1]
    assert seqs.count == 5
    assert seqs[B.OBS].shape == (5, 3, 1)
    assert seqs[B.OBS][..., 0].tolist() == [[1, 2, 3], [4, 5, 0], [6, 7, 0], [8, 9, 10], [11, 0, 0]]
    # Every row appears once, in order, and nothing but padding was added.
    mask = seqs[SEQ_MASK].astype(bool)
    assert seqs[B.ACTIONS][mask].tolist() == list(range(11))
    assert seqs[SEQ_MASK].tolist() == [[1, 1, 1], [1, 1, 0], [1, 1, 0], [1, 1, 1], [1, 0, 0]]
    # No sequence mixes episodes.
    for eps, m in zip(seqs[B.EPS_ID], mask):
        assert len(set(eps[m].tolist())) == 1


def test_states_are_kept_only_at_each_sequence_start():
    batch = _batch([1] * 5 + [2] * 2)
    seqs = pad_batch_to_sequences(batch, max_seq_len=2)
    # Sequences start at rows 0, 2, 4 (episode 1) and 5 (episode 2).
    assert seqs["state_in_0"][:, 0].tolist() == [0, 20, 40, 50]
    assert seqs["state_in_1"][:, 0].tolist() == [0, -2, -4, -5]
    assert seqs["state_in_0"].shape == (4, 1)
    assert "state_out_0" not in seqs


def test_the_same_episode_id_in_non_adjacent_runs_starts_a_new_sequence():
    # Two pieces of one episode separated by another episode's rows.
    starts = sequence_starts(np.array([5, 5, 6, 5, 5]), max_seq_len=10)
    assert starts.tolist() == [0, 2, 3]


def test_max_seq_len_of_one_gives_one_step_sequences():
    seqs = pad_batch_to_sequences(_batch([1, 1, 2]), max_seq_len=1)
    assert seqs[B.SEQ_LENS].tolist() == [1, 1, 1] and seqs[SEQ_MASK].tolist() == [[1], [1], [1]]


def test_max_seq_len_below_one_names_the_fix():
    with pytest.raises(ValueError, match="max_seq_len must be >= 1.*model.max_seq_len"):
        pad_batch_to_sequences(_batch([1, 1]), max_seq_len=0)


def test_classic_chop_into_sequences_pads_and_flattens_features():
    features, states, seq_lens = chop_into_sequences(
        feature_columns=[np.array([1.0, 2.0, 3.0, 4.0])], state_columns=[np.array([[10.0], [11.0], [12.0], [13.0]])],
        max_seq_len=2, episode_ids=np.array([0, 0, 0, 1]))
    assert seq_lens.tolist() == [2, 1, 1]
    assert features[0].tolist() == [1.0, 2.0, 3.0, 0.0, 4.0, 0.0]
    assert states[0][:, 0].tolist() == [10.0, 12.0, 13.0]


def test_add_time_dimension_from_seq_lens_or_max_seq_len():
    rows = np.arange(12.0).reshape(6, 2)
    assert add_time_dimension(rows, seq_lens=np.array([3, 1]), framework="np").shape == (2, 3, 2)
    assert add_time_dimension(rows, max_seq_len=2, framework="np").shape == (3, 2, 2)
    time_major = add_time_dimension(rows, max_seq_len=3, framework="np", time_major=True)
    assert time_major.shape == (3, 2, 2) and time_major[1, 0].tolist() == [2.0, 3.0]
