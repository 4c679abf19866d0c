"""Unit tests for rlstack/sample_batch.py."""

from __future__ import annotations

import numpy as np
import pytest

from rlstack.sample_batch import SampleBatch, concat_samples


def _batch(n: int = 10, offset: int = 0) -> SampleBatch:
    rows = np.arange(offset, offset + n)
    return SampleBatch(
        {
            SampleBatch.OBS: np.stack([rows, rows * 10], axis=1).astype(np.float32),
            SampleBatch.ACTIONS: rows.astype(np.int64),
            SampleBatch.REWARDS: rows.astype(np.float32) * 0.5,
        }
    )


# --- construction and column assignment ---------------------------------------------


def test_construction_converts_columns_to_arrays_and_counts_rows():
    b = SampleBatch({SampleBatch.REWARDS: [1.0, 2.0, 3.0]}, t=[0, 1, 2])
    assert isinstance(b[SampleBatch.REWARDS], np.ndarray)
    assert isinstance(b["t"], np.ndarray)
    assert len(b) == b.count == 3
    assert sorted(b.columns) == ["rewards", "t"]


def test_construction_rejects_unequal_column_lengths():
    with pytest.raises(ValueError, match="differ in length"):
        SampleBatch({SampleBatch.OBS: np.zeros((4, 2)), SampleBatch.REWARDS: np.zeros(3)})


def test_empty_batch_has_zero_rows():
    assert len(SampleBatch()) == 0
    assert SampleBatch().count == 0


def test_setitem_with_wrong_length_raises():
    b = _batch(5)
    with pytest.raises(ValueError, match="'advantages' has 4 rows but the batch has 5"):
        b[SampleBatch.ADVANTAGES] = np.zeros(4)
    assert SampleBatch.ADVANTAGES not in b


def test_setitem_with_right_length_adds_column():
    b = _batch(5)
    b[SampleBatch.ADVANTAGES] = [1, 2, 3, 4, 5]
    assert isinstance(b[SampleBatch.ADVANTAGES], np.ndarray)
    assert b[SampleBatch.ADVANTAGES].tolist() == [1, 2, 3, 4, 5]


def test_setitem_on_zero_row_batch_with_columns_rejects_wrong_length():
    b = SampleBatch({SampleBatch.REWARDS: np.zeros(0)})
    with pytest.raises(ValueError):
        b[SampleBatch.ACTIONS] = np.zeros(5)


# --- slicing ------------------------------------------------------------------------


def test_slice_returns_rows_of_every_column():
    b = _batch(6)
    piece = b[1:3]
    assert isinstance(piece, SampleBatch)
    assert len(piece) == 2
    assert piece[SampleBatch.ACTIONS].tolist() == [1, 2]
    assert piece[SampleBatch.REWARDS].tolist() == [0.5, 1.0]
    np.testing.assert_array_equal(piece[SampleBatch.OBS], [[1, 10], [2, 20]])


def test_slice_open_ended_and_negative():
    b = _batch(6)
    assert b[4:][SampleBatch.ACTIONS].tolist() == [4, 5]
    assert b[:2][SampleBatch.ACTIONS].tolist() == [0, 1]
    assert b[-2:][SampleBatch.ACTIONS].tolist() == [4, 5]
    assert b[:-1][SampleBatch.ACTIONS].tolist() == [0, 1, 2, 3, 4]


def test_slice_with_step_honours_step():
    b = _batch(6)
    assert b[::2][SampleBatch.ACTIONS].tolist() == [0, 2, 4]


def test_take_and_copy_are_independent_copies():
    b = _batch(4)
    taken = b.take(np.array([3, 0]))
    assert taken[SampleBatch.ACTIONS].tolist() == [3, 0]
    copied = b.copy()
    copied[SampleBatch.REWARDS][0] = 99.0
    assert b[SampleBatch.REWARDS][0] == 0.0


# --- concat_samples -----------------------------------------------------------------


def test_concat_samples_keeps_order():
    out = concat_samples([_batch(2, offset=0), _batch(3, offset=10), _batch(1, offset=20)])
    assert len(out) == 6
    assert out[SampleBatch.ACTIONS].tolist() == [0, 1, 10, 11, 12, 20]
    assert out[SampleBatch.OBS].shape == (6, 2)
    np.testing.assert_array_equal(out[SampleBatch.OBS][:, 1], [0, 10, 100, 110, 120, 200])


def test_concat_samples_static_method_is_the_same():
    out = SampleBatch.concat_samples([_batch(2), _batch(2, offset=5)])
    assert out[SampleBatch.ACTIONS].tolist() == [0, 1, 5, 6]


def test_concat_samples_skips_empty_batches():
    # Empty batches (even with different/no columns) must not break the concatenation.
    out = concat_samples([SampleBatch(), _batch(2), SampleBatch({"other": np.zeros(0)}), _batch(1, offset=7)])
    assert out[SampleBatch.ACTIONS].tolist() == [0, 1, 7]
    assert "other" not in out


def test_concat_samples_of_nothing_is_empty():
    assert len(concat_samples([])) == 0
    assert len(concat_samples([SampleBatch(), SampleBatch()])) == 0


def test_concat_samples_mismatched_columns_raise():
    a = _batch(2)
    b = _batch(2)
    b[SampleBatch.ADVANTAGES] = np.zeros(2)
    with pytest.raises(ValueError, match="different columns"):
        concat_samples([a, b])


# --- shuffle and minibatches ------------------------------------------------------------


def _assert_rows_aligned(batch: SampleBatch) -> None:
    actions = batch[SampleBatch.ACTIONS]
    np.testing.assert_array_equal(batch[SampleBatch.OBS][:, 0], actions)
    np.testing.assert_array_equal(batch[SampleBatch.OBS][:, 1], actions * 10)
    np.testing.assert_array_equal(batch[SampleBatch.REWARDS], actions * 0.5)


def test_shuffle_keeps_rows_intact_and_is_a_permutation():
    b = _batch(50)
    shuffled = b.shuffle(np.random.default_rng(0))
    assert len(shuffled) == 50
    assert sorted(shuffled[SampleBatch.ACTIONS].tolist()) == list(range(50))
    assert shuffled[SampleBatch.ACTIONS].tolist() != list(range(50))  # actually reordered
    _assert_rows_aligned(shuffled)


def test_shuffle_is_reproducible_with_seeded_rng():
    b = _batch(20)
    one = b.shuffle(np.random.default_rng(123))[SampleBatch.ACTIONS]
    two = b.shuffle(np.random.default_rng(123))[SampleBatch.ACTIONS]
    np.testing.assert_array_equal(one, two)


@pytest.mark.parametrize("shuffle", [False, True])
def test_minibatches_cover_every_row_once_with_remainder(shuffle):
    b = _batch(10)
    mbs = list(b.minibatches(4, shuffle=shuffle, rng=np.random.default_rng(1)))
    assert [len(mb) for mb in mbs] == [4, 4, 2]
    seen = np.concatenate([mb[SampleBatch.ACTIONS] for mb in mbs])
    assert sorted(seen.tolist()) == list(range(10))
    for mb in mbs:
        _assert_rows_aligned(mb)
    if not shuffle:
        assert seen.tolist() == list(range(10))
    else:
        assert seen.tolist() != list(range(10))


def test_minibatches_exact_division_has_no_empty_tail():
    assert [len(mb) for mb in _batch(8).minibatches(4, shuffle=False)] == [4, 4]


def test_minibatches_larger_than_batch_yields_whole_batch():
    assert [len(mb) for mb in _batch(3).minibatches(100, shuffle=True)] == [3]


@pytest.mark.parametrize("size", [0, -1])
def test_minibatches_non_positive_size_raises(size):
    with pytest.raises(ValueError, match="positive"):
        list(_batch(3).minibatches(size))


# --- split_by_episode, size_bytes ---------------------------------------------------


def test_split_by_episode_contiguous_runs():
    b = SampleBatch({SampleBatch.EPS_ID: [5, 5, 7, 7, 7, 5], "t": [0, 1, 0, 1, 2, 2]})
    pieces = b.split_by_episode()
    assert [len(p) for p in pieces] == [2, 3, 1]
    assert [p[SampleBatch.EPS_ID].tolist() for p in pieces] == [[5, 5], [7, 7, 7], [5]]
    assert [p["t"].tolist() for p in pieces] == [[0, 1], [0, 1, 2], [2]]


def test_split_by_episode_single_and_empty():
    assert [len(p) for p in SampleBatch({SampleBatch.EPS_ID: [3, 3, 3]}).split_by_episode()] == [3]
    assert SampleBatch().split_by_episode() == []


def test_split_by_episode_without_eps_id_raises_key_error():
    with pytest.raises(KeyError):
        _batch(3).split_by_episode()


def test_size_bytes_is_sum_of_nbytes():
    b = _batch(7)
    expected = sum(v.nbytes for v in b.values())
    assert b.size_bytes() == expected
    # 7*2 float32 + 7 int64 + 7 float32
    assert expected == 7 * 2 * 4 + 7 * 8 + 7 * 4


def test_scalar_column_is_a_clear_error():
    with pytest.raises(ValueError, match="Column 'a' is a scalar"):
        SampleBatch(a=5)


def test_1_13_column_names_and_dones_read_from_terminateds_and_truncateds():
    batch = SampleBatch({SampleBatch.OBS: np.zeros((3, 1), np.float32),
                         SampleBatch.TERMINATEDS: np.array([False, True, False]),
                         SampleBatch.TRUNCATEDS: np.array([False, False, True])})
    assert SampleBatch.CUR_OBS == SampleBatch.OBS == "obs"
    assert batch[SampleBatch.DONES].tolist() == [False, True, True]
    assert SampleBatch.DONES not in batch  # computed, not stored
    with pytest.raises(KeyError):
        batch[SampleBatch.INFOS]
