"""Unit tests for experience replay and the Q-learning helpers around it.

Covers rlstack/execution/segment_tree.py (sum/min trees against brute force),
rlstack/execution/replay_buffer.py (ring-buffer semantics, prioritized sampling
frequencies by a chi-square test, importance weights, priority updates, get/set_state,
make_replay_buffer), ``compute_n_step`` from rlstack/policies/postprocessing.py and
rlstack/utils/exploration.py (epsilon schedules, per-worker epsilons, config checks).
"""

from __future__ import annotations

import numpy as np
import pytest

from rlstack.errors import ConfigError
from rlstack.execution.replay_buffer import PrioritizedReplayBuffer, ReplayBuffer, make_replay_buffer
from rlstack.execution.segment_tree import MinSegmentTree, SumSegmentTree
from rlstack.policies.postprocessing import compute_n_step, discount_cumsum
from rlstack.sample_batch import SampleBatch
from rlstack.utils.exploration import EpsilonGreedy, per_worker_epsilon, validate_exploration_config

try:
    from scipy import stats as scipy_stats
except ImportError:  # pragma: no cover - scipy is optional
    scipy_stats = None

# chi2.ppf(1 - 0.001, df=9): the 0.1% critical value for 10 categories (9 degrees of freedom).
CHI2_CRIT_DF9_P001 = 27.877


def _rows(start: int, stop: int) -> SampleBatch:
    """Rows whose obs and rewards identify them: obs = [i, -i], rewards = i."""
    ids = np.arange(start, stop, dtype=np.float32)
    return SampleBatch({SampleBatch.OBS: np.stack([ids, -ids], axis=1), SampleBatch.REWARDS: ids})


def _stored_ids(buffer: ReplayBuffer) -> np.ndarray:
    """The row ids in slot order."""
    return buffer._columns[SampleBatch.REWARDS][: len(buffer)].copy()


def _chronological_ids(buffer: ReplayBuffer) -> np.ndarray:
    """The row ids oldest first, read through the public state."""
    return buffer.get_state()[f"column/{SampleBatch.REWARDS}"].copy()


# --- segment trees ---------------------------------------------------------------------


@pytest.mark.parametrize("capacity", [1, 5, 16, 37])
def test_segment_trees_match_brute_force(capacity):
    rng = np.random.default_rng(capacity)
    sum_tree, min_tree = SumSegmentTree(capacity), MinSegmentTree(capacity)
    leaves_sum = np.zeros(capacity)  # unused slots: 0 in the sum tree, +inf in the min tree
    leaves_min = np.full(capacity, np.inf)
    assert sum_tree.total() == 0.0 and min_tree.min() == np.inf
    for step in range(40):
        # Every other update sets one slot (the per-env-step add: its own code path).
        k = int(rng.integers(2, 2 * capacity + 3)) if step % 2 else 1
        indices = rng.integers(0, capacity, size=k)  # with repeats when k > 1
        # Multiples of 1/8 (zeros included): every partial sum is exact in float64, so the
        # tree's and numpy's summation orders agree bit for bit, boundaries included.
        values = rng.integers(0, 80, size=k) / 8.0
        sum_tree.update(indices, values)
        min_tree.update(indices, values)
        for i, v in zip(indices, values):  # sequential assignment: the last repeat wins
            leaves_sum[i] = v
            leaves_min[i] = v
        np.testing.assert_array_equal(sum_tree[np.arange(capacity)], leaves_sum)
        np.testing.assert_array_equal(min_tree[np.arange(capacity)], leaves_min)
        assert sum_tree.total() == leaves_sum.sum()
        assert min_tree.min() == leaves_min.min()

        total = sum_tree.total()
        if total == 0.0:
            continue
        cumsum = np.cumsum(leaves_sum)
        # Random prefix sums plus the exact boundaries cumsum[i] (which belong to the next
        # non-empty slot) and 0.
        prefix = np.concatenate([rng.random(200) * total, cumsum[cumsum < total], [0.0]])
        expected = np.array([np.flatnonzero(cumsum > s)[0] for s in prefix])
        np.testing.assert_array_equal(sum_tree.find_prefixsum_index(prefix), expected)
        assert leaves_sum[expected].min() > 0  # an empty slot is never found


def test_segment_tree_repeated_index_last_value_wins():
    tree = SumSegmentTree(5)
    tree.update(np.array([3, 1, 3, 3]), np.array([7.0, 2.0, 1.0, 4.0]))
    assert tree[3] == 4.0 and tree.total() == 6.0
    min_tree = MinSegmentTree(5)
    min_tree.update(np.array([2, 2]), np.array([-1.0, 5.0]))
    assert min_tree.min() == 5.0


@pytest.mark.parametrize("tree_cls", [SumSegmentTree, MinSegmentTree])
def test_segment_tree_index_out_of_range(tree_cls):
    tree = tree_cls(5)  # padded to 8 leaves internally; 5..7 are still out of range
    for bad in (5, 7, -1):
        with pytest.raises(IndexError):
            tree.update(np.array([0, bad]), np.array([1.0, 1.0]))
    with pytest.raises(ValueError):
        tree_cls(0)


# --- prioritized sampling frequencies ----------------------------------------------------

PRIORITIES = np.array([0.05, 0.3, 1.0, 2.0, 0.5, 4.0, 0.1, 1.5, 3.0, 0.8])
ALPHA = 0.7


def _prioritized(capacity: int = 16, seed: int = 0, alpha: float = ALPHA) -> PrioritizedReplayBuffer:
    buffer = PrioritizedReplayBuffer(capacity, alpha=alpha, seed=seed)
    batch = _rows(0, len(PRIORITIES))
    batch[SampleBatch.PRIORITIES] = PRIORITIES.astype(np.float32)
    buffer.add(batch)
    return buffer


def _expected_probabilities(buffer: PrioritizedReplayBuffer, priorities=PRIORITIES) -> np.ndarray:
    scaled = (np.abs(priorities.astype(np.float32).astype(np.float64)) + buffer.eps) ** buffer.alpha
    return scaled / scaled.sum()


def _chi_square(counts: np.ndarray, probabilities: np.ndarray) -> float:
    expected = counts.sum() * probabilities
    return float(((counts - expected) ** 2 / expected).sum())


def test_prioritized_sampling_frequencies_chi_square():
    buffer = _prioritized()
    num = 50_000
    sample = buffer.sample(num)
    assert SampleBatch.PRIORITIES not in sample  # initial priorities are not stored as a column
    slots = sample[SampleBatch.BATCH_INDEXES]
    counts = np.bincount(slots, minlength=buffer.capacity)
    assert counts[len(PRIORITIES):].sum() == 0  # unused slots are never drawn
    counts = counts[: len(PRIORITIES)]

    critical = CHI2_CRIT_DF9_P001
    if scipy_stats is not None:
        assert scipy_stats.chi2.ppf(0.999, df=len(PRIORITIES) - 1) == pytest.approx(critical, abs=1e-3)
    statistic = _chi_square(counts, _expected_probabilities(buffer))
    assert statistic < critical, (statistic, counts)
    if scipy_stats is not None:
        _, p_value = scipy_stats.chisquare(counts, num * _expected_probabilities(buffer))
        assert p_value > 0.001

    # Negative control: the same counts are nowhere near uniform (nor near p_i without ** alpha).
    uniform = np.full(len(PRIORITIES), 1.0 / len(PRIORITIES))
    assert _chi_square(counts, uniform) > 100 * critical
    assert _chi_square(counts, PRIORITIES / PRIORITIES.sum()) > 10 * critical


def test_alpha_zero_samples_uniformly():
    buffer = _prioritized(alpha=0.0)
    counts = np.bincount(buffer.sample(50_000)[SampleBatch.BATCH_INDEXES], minlength=len(PRIORITIES))
    assert _chi_square(counts, np.full(len(PRIORITIES), 0.1)) < CHI2_CRIT_DF9_P001


# --- importance weights ----------------------------------------------------------------


@pytest.mark.parametrize("beta", [0.0, 0.4, 1.0])
def test_importance_weights_match_formula(beta):
    # Row 0 has a tiny priority, so it is (with seed 0) not in the sample: the normaliser
    # must still come from the smallest P over all stored rows, not over the batch.
    priorities = PRIORITIES.copy()
    priorities[0] = 1e-4
    buffer = PrioritizedReplayBuffer(16, alpha=ALPHA, seed=0)  # 10 of 16 slots used: N = 10
    batch = _rows(0, len(priorities))
    batch[SampleBatch.PRIORITIES] = priorities
    buffer.add(batch)

    sample = buffer.sample(100, beta=beta)
    slots = sample[SampleBatch.BATCH_INDEXES]
    weights = sample[SampleBatch.WEIGHTS]
    assert weights.dtype == np.float32 and weights.shape == (100,)
    assert 0 not in slots

    n = len(priorities)
    probabilities = _expected_probabilities(buffer, priorities)
    expected = (n * probabilities[slots]) ** -beta / np.max((n * probabilities) ** -beta)
    np.testing.assert_allclose(weights, expected, rtol=1e-5)
    if beta == 0.0:
        np.testing.assert_array_equal(weights, np.ones(100, dtype=np.float32))
    else:
        assert weights.max() < 1.0  # the max-weight row (row 0) was not drawn


# --- priority updates ------------------------------------------------------------------


def test_update_priorities_changes_sampling_and_max_priority():
    buffer = PrioritizedReplayBuffer(16, alpha=ALPHA, seed=0)
    buffer.add(_rows(0, 10))  # no priorities column: every row gets the initial max, 1.0
    np.testing.assert_allclose(buffer.get_state()["priorities"], np.ones(10))
    assert buffer.stats()["max_priority"] == 1.0

    buffer.update_priorities(np.array([7]), np.array([-1e4]))  # |td_error| is used
    slots = buffer.sample(5000)[SampleBatch.BATCH_INDEXES]
    share = float(np.mean(slots == 7))
    dominant = (1e4 + buffer.eps) ** ALPHA
    expected_share = dominant / (dominant + 9.0)
    assert share > 0.95
    assert share == pytest.approx(expected_share, abs=0.01)

    # A new row (without its own priorities) gets the largest priority seen so far.
    slot = buffer.add(_rows(10, 11))
    assert buffer.stats()["max_priority"] == pytest.approx(1e4 + buffer.eps)
    np.testing.assert_allclose(buffer.get_state()["priorities"][slot], dominant)

    # Lowering priorities does not lower that maximum ("seen so far").
    buffer.update_priorities(np.array([7, 10]), np.array([0.5, 0.5]))
    slot = buffer.add(_rows(11, 12))
    np.testing.assert_allclose(buffer.get_state()["priorities"][slot], dominant)
    np.testing.assert_allclose(buffer.get_state()["priorities"][[7, 10]], (0.5 + buffer.eps) ** ALPHA)


def test_priorities_column_raises_max_priority():
    buffer = _prioritized()
    assert buffer.stats()["max_priority"] == pytest.approx(PRIORITIES.max() + buffer.eps)
    slot = buffer.add(_rows(10, 11))
    np.testing.assert_allclose(buffer.get_state()["priorities"][slot], (4.0 + buffer.eps) ** ALPHA, rtol=1e-6)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_update_priorities_rejects_non_finite(bad):
    buffer = _prioritized()
    before = buffer.get_state()["priorities"].copy()
    with pytest.raises(ValueError, match="finite"):
        buffer.update_priorities(np.array([1, 2]), np.array([0.5, bad]))
    np.testing.assert_array_equal(buffer.get_state()["priorities"], before)  # nothing applied


# --- ring-buffer semantics -------------------------------------------------------------


@pytest.mark.parametrize("cls", [ReplayBuffer, PrioritizedReplayBuffer])
def test_ring_buffer_overwrites_oldest_first(cls):
    buffer = cls(4, seed=0)
    assert len(buffer) == 0
    np.testing.assert_array_equal(buffer.add(_rows(0, 3)), [0, 1, 2])
    assert len(buffer) == 3
    np.testing.assert_array_equal(buffer.add(_rows(3, 6)), [3, 0, 1])
    assert len(buffer) == 4
    np.testing.assert_array_equal(_stored_ids(buffer), [4, 5, 2, 3])  # rows 0 and 1 went first
    buffer.add(_rows(6, 7))
    np.testing.assert_array_equal(_stored_ids(buffer), [4, 5, 6, 3])
    stats = buffer.stats()
    assert stats["num_entries"] == 4 and stats["capacity"] == 4 and stats["num_added"] == 7


@pytest.mark.parametrize("cls", [ReplayBuffer, PrioritizedReplayBuffer])
def test_batch_bigger_than_capacity_keeps_newest_rows(cls):
    buffer = cls(4, seed=0)
    buffer.add(_rows(0, 1))
    slots = buffer.add(_rows(1, 11))
    assert len(slots) == 4 and len(buffer) == 4
    assert sorted(_stored_ids(buffer).tolist()) == [7, 8, 9, 10]
    np.testing.assert_array_equal(_stored_ids(buffer)[slots], [7, 8, 9, 10])
    assert set(buffer.sample(200)[SampleBatch.REWARDS].tolist()) == {7, 8, 9, 10}
    # The next row overwrites the oldest survivor (7).
    buffer.add(_rows(11, 12))
    assert sorted(_stored_ids(buffer).tolist()) == [8, 9, 10, 11]


def test_prioritized_big_batch_keeps_matching_priorities():
    buffer = PrioritizedReplayBuffer(3, alpha=1.0, eps=0.0, seed=0)
    batch = _rows(0, 5)
    batch[SampleBatch.PRIORITIES] = np.array([10.0, 20.0, 1.0, 2.0, 3.0])
    slots = buffer.add(batch)
    leaves = buffer.get_state()["priorities"]
    np.testing.assert_array_equal(_stored_ids(buffer)[slots], [2, 3, 4])
    np.testing.assert_allclose(leaves[slots], [1.0, 2.0, 3.0])  # priorities of the kept rows


@pytest.mark.parametrize("cls", [ReplayBuffer, PrioritizedReplayBuffer])
def test_mismatched_columns_raise(cls):
    buffer = cls(8)
    buffer.add(_rows(0, 2))
    extra = _rows(2, 4)
    extra[SampleBatch.ACTIONS] = np.zeros(2, dtype=np.int64)
    with pytest.raises(ValueError, match="columns"):
        buffer.add(extra)
    with pytest.raises(ValueError, match="columns"):
        buffer.add(SampleBatch({SampleBatch.OBS: np.zeros((2, 2), np.float32)}))
    assert len(buffer) == 2


@pytest.mark.parametrize("cls", [ReplayBuffer, PrioritizedReplayBuffer])
def test_sampling_empty_buffer_raises_helpful_error(cls):
    with pytest.raises(ValueError, match="empty replay buffer.*learning_starts"):
        cls(8).sample(4)


@pytest.mark.parametrize("cls", [ReplayBuffer, PrioritizedReplayBuffer])
def test_batch_indexes_point_to_returned_rows(cls):
    buffer = cls(6, seed=1)
    buffer.add(_rows(0, 4))  # partly full: only slots 0..3 may come back
    sample = buffer.sample(300)
    slots = sample[SampleBatch.BATCH_INDEXES]
    assert sample.count == 300
    assert slots.min() >= 0 and slots.max() < 4
    assert set(slots.tolist()) == {0, 1, 2, 3}
    buffer.add(_rows(4, 9))  # wraps: slots now hold [6, 7, 8, 3, 4, 5]
    sample = buffer.sample(300)
    slots = sample[SampleBatch.BATCH_INDEXES]
    stored = _stored_ids(buffer)
    np.testing.assert_array_equal(sample[SampleBatch.REWARDS], stored[slots])
    np.testing.assert_array_equal(sample[SampleBatch.OBS][:, 0], stored[slots])
    np.testing.assert_array_equal(sample[SampleBatch.OBS][:, 1], -stored[slots])
    assert buffer.stats()["num_sampled"] == 600


def test_uniform_buffer_samples_uniformly():
    buffer = ReplayBuffer(16, seed=0)
    buffer.add(_rows(0, 10))
    counts = np.bincount(buffer.sample(50_000)[SampleBatch.BATCH_INDEXES], minlength=16)
    assert counts[10:].sum() == 0
    assert _chi_square(counts[:10], np.full(10, 0.1)) < CHI2_CRIT_DF9_P001


def test_invalid_constructor_arguments():
    with pytest.raises(ValueError, match="buffer_size"):
        ReplayBuffer(0)
    with pytest.raises(ValueError, match="alpha"):
        PrioritizedReplayBuffer(4, alpha=-0.1)


def test_make_replay_buffer():
    config = {"buffer_size": 50, "prioritized_replay": False, "prioritized_replay_alpha": 0.5,
              "prioritized_replay_eps": 1e-3}
    plain = make_replay_buffer(config)
    assert type(plain) is ReplayBuffer and plain.capacity == 50
    prioritized = make_replay_buffer({**config, "prioritized_replay": True}, capacity=7)
    assert isinstance(prioritized, PrioritizedReplayBuffer)
    assert (prioritized.capacity, prioritized.alpha, prioritized.eps) == (7, 0.5, 1e-3)
    a = make_replay_buffer(config, seed=3)
    b = make_replay_buffer(config, seed=3)
    a.add(_rows(0, 10))
    b.add(_rows(0, 10))
    np.testing.assert_array_equal(a.sample(20)[SampleBatch.BATCH_INDEXES], b.sample(20)[SampleBatch.BATCH_INDEXES])


# --- get_state / set_state ---------------------------------------------------------------


def test_uniform_state_round_trip():
    buffer = ReplayBuffer(5, seed=0)
    buffer.add(_rows(0, 3))
    buffer.add(_rows(3, 8))  # wrapped: next write goes to slot 3
    buffer.sample(7)
    state = {key: value.copy() for key, value in buffer.get_state().items()}

    restored = ReplayBuffer(5, seed=1)
    restored.set_state(state)
    assert len(restored) == len(buffer) == 5
    assert restored.stats() == buffer.stats()
    np.testing.assert_array_equal(_chronological_ids(restored), [3, 4, 5, 6, 7])
    np.testing.assert_array_equal(_chronological_ids(restored), _chronological_ids(buffer))
    np.testing.assert_array_equal(restored.get_state()[f"column/{SampleBatch.OBS}"],
                                  buffer.get_state()[f"column/{SampleBatch.OBS}"])
    # The age order survives: the next row replaces the oldest row in both.
    restored.add(_rows(8, 9))
    buffer.add(_rows(8, 9))
    np.testing.assert_array_equal(_chronological_ids(restored), [4, 5, 6, 7, 8])
    np.testing.assert_array_equal(_chronological_ids(restored), _chronological_ids(buffer))
    sample = restored.sample(50)
    np.testing.assert_array_equal(sample[SampleBatch.REWARDS], _stored_ids(restored)[sample[SampleBatch.BATCH_INDEXES]])


def test_prioritized_state_round_trip():
    buffer = _prioritized(capacity=12)
    buffer.update_priorities(np.array([2, 5]), np.array([9.0, 0.01]))
    buffer.add(_rows(10, 14))  # wraps around
    state = {key: value.copy() for key, value in buffer.get_state().items()}

    restored = PrioritizedReplayBuffer(12, alpha=ALPHA, seed=123)
    restored.set_state(state)
    assert len(restored) == len(buffer)
    assert restored.stats() == buffer.stats()
    np.testing.assert_array_equal(_chronological_ids(restored), _chronological_ids(buffer))
    slots = np.arange(restored.capacity)
    # The same row has the same priority leaf in both (rows may sit in other slots).
    leaf_by_id = lambda b: dict(zip(_stored_ids(b).tolist(), b._sum_tree[np.arange(len(b))].tolist()))  # noqa: E731
    assert leaf_by_id(restored) == pytest.approx(leaf_by_id(buffer))
    assert restored._sum_tree.total() == pytest.approx(buffer._sum_tree.total())
    assert restored._min_tree.min() == buffer._min_tree.min()
    # Same weights for the same slots, i.e. the same sampling probabilities and normaliser.
    for beta in (0.4, 1.0):
        a, b = restored.sample(200, beta), buffer.sample(200, beta)
        for sample, source in ((a, restored), (b, buffer)):
            leaves = source._sum_tree[slots[: len(source)]]
            probabilities = leaves / leaves.sum()
            expected = (len(source) * probabilities[sample[SampleBatch.BATCH_INDEXES]]) ** -beta
            expected /= (len(source) * probabilities.min()) ** -beta
            np.testing.assert_allclose(sample[SampleBatch.WEIGHTS], expected, rtol=1e-5)
    # New rows still get the restored max priority.
    slot = restored.add(_rows(20, 21))
    np.testing.assert_allclose(restored._sum_tree[slot], (9.0 + buffer.eps) ** ALPHA)


@pytest.mark.parametrize("cls", [ReplayBuffer, PrioritizedReplayBuffer])
def test_state_of_a_full_buffer_loads_into_a_larger_one(cls):
    # buffer_size may grow between checkpoint and restore: no row is lost, no empty slot
    # is ever sampled, and the oldest row is still the first to go once full.
    buffer = cls(4, seed=0)
    buffer.add(_rows(0, 6))  # holds 2..5, wrapped
    bigger = cls(6, seed=0)
    bigger.set_state({key: value.copy() for key, value in buffer.get_state().items()})
    bigger.add(_rows(6, 7))
    assert len(bigger) == 5
    np.testing.assert_array_equal(_chronological_ids(bigger), [2, 3, 4, 5, 6])
    sampled = bigger.sample(500) if cls is ReplayBuffer else bigger.sample(500, 0.4)
    assert set(sampled[SampleBatch.REWARDS].tolist()) <= {2.0, 3.0, 4.0, 5.0, 6.0}
    bigger.add(_rows(7, 9))
    np.testing.assert_array_equal(_chronological_ids(bigger), [3, 4, 5, 6, 7, 8])


@pytest.mark.parametrize("cls", [ReplayBuffer, PrioritizedReplayBuffer])
def test_set_state_into_too_small_buffer_raises(cls):
    buffer = cls(8)
    buffer.add(_rows(0, 6))
    with pytest.raises(ValueError, match="6 rows.*buffer_size is 5"):
        cls(5).set_state(buffer.get_state())
    smaller_ok = cls(6)  # exactly fits
    smaller_ok.set_state(buffer.get_state())
    np.testing.assert_array_equal(_stored_ids(smaller_ok), np.arange(6))


# --- compute_n_step ----------------------------------------------------------------------

N_GAMMA = 0.9
N_REWARDS = [1.0, -2.0, 3.0, 0.5, 10.0]
# n_step = 3, T = 5, so k = min(3, 5 - t) = [3, 3, 3, 2, 1]:
#   R_0 = 1    + 0.9*(-2) + 0.81*3   = 1.63
#   R_1 = -2   + 0.9*3    + 0.81*0.5 = 1.105
#   R_2 = 3    + 0.9*0.5  + 0.81*10  = 11.55
#   R_3 = 0.5  + 0.9*10              = 9.5
#   R_4 = 10
N3_RETURNS = [1.63, 1.105, 11.55, 9.5, 10.0]
# new_obs of row t is that of row t + k - 1 = [2, 3, 4, 4, 4]; row j's new_obs is 10 * (j + 1).
N3_NEW_OBS = [30.0, 40.0, 50.0, 50.0, 50.0]
N3_DISCOUNTS = [0.729, 0.729, 0.729, 0.81, 0.9]


def _n_step_piece(terminated_last: bool) -> SampleBatch:
    t = np.arange(5, dtype=np.float32)
    return SampleBatch(
        {
            SampleBatch.OBS: 10.0 * t[:, None],
            SampleBatch.ACTIONS: np.array([0, 1, 0, 1, 1]),
            SampleBatch.REWARDS: np.array(N_REWARDS, dtype=np.float32),
            SampleBatch.NEXT_OBS: 10.0 * (t[:, None] + 1),
            SampleBatch.TERMINATEDS: np.array([False, False, False, False, terminated_last]),
        }
    )


@pytest.mark.parametrize("terminated_last", [True, False])
def test_compute_n_step_by_hand(terminated_last):
    out = compute_n_step(_n_step_piece(terminated_last), n_step=3, gamma=N_GAMMA)
    assert out[SampleBatch.REWARDS].dtype == np.float32
    np.testing.assert_allclose(out[SampleBatch.REWARDS], N3_RETURNS, rtol=1e-6)
    np.testing.assert_array_equal(out[SampleBatch.NEXT_OBS][:, 0], N3_NEW_OBS)
    np.testing.assert_allclose(out[SampleBatch.DISCOUNTS], N3_DISCOUNTS, rtol=1e-6)
    expected_terminateds = [False, False, True, True, True] if terminated_last else [False] * 5
    np.testing.assert_array_equal(out[SampleBatch.TERMINATEDS], expected_terminateds)
    # Untouched columns.
    np.testing.assert_array_equal(out[SampleBatch.OBS][:, 0], [0, 10, 20, 30, 40])
    np.testing.assert_array_equal(out[SampleBatch.ACTIONS], [0, 1, 0, 1, 1])


def test_compute_n_step_one_is_one_step_td():
    piece = _n_step_piece(terminated_last=True)
    original = piece.copy()
    out = compute_n_step(piece, n_step=1, gamma=N_GAMMA)
    np.testing.assert_array_equal(out[SampleBatch.REWARDS], original[SampleBatch.REWARDS])
    np.testing.assert_array_equal(out[SampleBatch.NEXT_OBS], original[SampleBatch.NEXT_OBS])
    np.testing.assert_array_equal(out[SampleBatch.TERMINATEDS], original[SampleBatch.TERMINATEDS])
    np.testing.assert_allclose(out[SampleBatch.DISCOUNTS], np.full(5, N_GAMMA), rtol=1e-6)


def test_compute_n_step_longer_than_piece_is_monte_carlo():
    out = compute_n_step(_n_step_piece(terminated_last=True), n_step=10, gamma=N_GAMMA)
    np.testing.assert_allclose(out[SampleBatch.REWARDS], discount_cumsum(np.array(N_REWARDS), N_GAMMA), rtol=1e-6)
    np.testing.assert_array_equal(out[SampleBatch.NEXT_OBS][:, 0], np.full(5, 50.0))
    np.testing.assert_allclose(out[SampleBatch.DISCOUNTS], N_GAMMA ** (5 - np.arange(5)), rtol=1e-6)
    np.testing.assert_array_equal(out[SampleBatch.TERMINATEDS], [True] * 5)


def test_n_step_target_equals_bootstrapped_return():
    # With V(new_obs) = 7 after the cut piece, R_t + discount_t * V must equal the
    # discounted sum of the k rewards and the bootstrap, for every row.
    bootstrap = 7.0
    out = compute_n_step(_n_step_piece(terminated_last=False), n_step=3, gamma=N_GAMMA)
    target = out[SampleBatch.REWARDS] + out[SampleBatch.DISCOUNTS] * bootstrap
    rewards = np.array(N_REWARDS)
    for t in range(5):
        k = min(3, 5 - t)
        expected = sum(N_GAMMA**j * rewards[t + j] for j in range(k)) + N_GAMMA**k * bootstrap
        assert target[t] == pytest.approx(expected, rel=1e-6)


# --- epsilon-greedy exploration -------------------------------------------------------

SCHEDULE = {"type": "EpsilonGreedy", "initial_epsilon": 1.0, "final_epsilon": 0.1, "epsilon_timesteps": 100}


def test_epsilon_schedule_linear_then_constant():
    exploration = EpsilonGreedy(SCHEDULE, worker_index=0, num_workers=0, seed=0)
    for timestep, expected in [(0, 1.0), (25, 0.775), (50, 0.55), (99, 0.109), (100, 0.1), (10**6, 0.1)]:
        assert exploration.epsilon(timestep) == pytest.approx(expected), timestep
    defaults = EpsilonGreedy({}, worker_index=0, num_workers=0)
    assert defaults.epsilon(0) == pytest.approx(1.0)
    assert defaults.epsilon(5000) == pytest.approx(0.51)
    assert defaults.epsilon(20000) == pytest.approx(0.02)


def test_explore_false_is_always_greedy():
    rng = np.random.default_rng(0)
    q_values = rng.normal(size=(500, 5))
    exploration = EpsilonGreedy({**SCHEDULE, "final_epsilon": 1.0}, worker_index=0, num_workers=0, seed=0)
    actions = exploration.choose(q_values, timestep=10**6, explore=False)
    assert actions.shape == (500,)
    np.testing.assert_array_equal(actions, np.argmax(q_values, axis=1))
    zero = EpsilonGreedy({**SCHEDULE, "initial_epsilon": 0.0, "final_epsilon": 0.0}, 0, 0, seed=0)
    np.testing.assert_array_equal(zero.choose(q_values, timestep=0, explore=True), np.argmax(q_values, axis=1))


def test_epsilon_one_is_uniform_and_epsilon_sets_random_share():
    num_actions, rows = 4, 40_000
    q_values = np.zeros((rows, num_actions))
    q_values[:, 2] = 1.0  # action 2 is greedy everywhere
    exploration = EpsilonGreedy(SCHEDULE, worker_index=0, num_workers=0, seed=0)
    counts = np.bincount(exploration.choose(q_values, timestep=0, explore=True), minlength=num_actions)
    # Chi-square against uniform, 3 degrees of freedom; chi2.ppf(0.999, 3) = 16.266.
    assert _chi_square(counts, np.full(num_actions, 0.25)) < 16.266, counts
    # At timestep 50 epsilon = 0.55: a non-greedy action with probability 0.55 * 3/4.
    actions = exploration.choose(q_values, timestep=50, explore=True)
    assert np.mean(actions != 2) == pytest.approx(0.55 * 0.75, abs=0.01)


def test_per_worker_epsilon():
    n = 4
    for i in range(1, n + 1):
        assert per_worker_epsilon(i, n) == pytest.approx(0.4 ** (1 + 7 * (i - 1) / (n - 1)))
    assert per_worker_epsilon(1, n) == pytest.approx(0.4)
    assert per_worker_epsilon(n, n) == pytest.approx(0.4**8)
    assert per_worker_epsilon(1, 1) == pytest.approx(0.4)

    config = {**SCHEDULE, "type": "PerWorkerEpsilonGreedy"}
    for i in range(1, n + 1):
        worker = EpsilonGreedy(config, worker_index=i, num_workers=n, seed=i)
        expected = 0.4 ** (1 + 7 * (i - 1) / (n - 1))
        assert worker.epsilon(0) == pytest.approx(expected)
        assert worker.epsilon(10**6) == pytest.approx(expected)  # constant, ignores the schedule
    assert EpsilonGreedy(config, worker_index=1, num_workers=1).epsilon(0) == pytest.approx(0.4)
    driver = EpsilonGreedy(config, worker_index=0, num_workers=n)
    assert driver.epsilon(0) == pytest.approx(1.0)
    assert driver.epsilon(50) == pytest.approx(0.55)
    # Plain EpsilonGreedy on a rollout worker follows the schedule too.
    assert EpsilonGreedy(SCHEDULE, worker_index=3, num_workers=n).epsilon(50) == pytest.approx(0.55)


def test_validate_exploration_config_accepts_valid():
    validate_exploration_config({"type": "EpsilonGreedy"})
    validate_exploration_config({**SCHEDULE, "type": "PerWorkerEpsilonGreedy"})
    validate_exploration_config({**SCHEDULE, "initial_epsilon": 0, "final_epsilon": 1, "epsilon_timesteps": 0})
    validate_exploration_config({"type": "SoftQ", "temperature": 0.5})
    validate_exploration_config({"type": "StochasticSampling"})
    validate_exploration_config({"type": "ParameterNoise", "random_timesteps": 10000, "initial_stddev": 1.0})
    validate_exploration_config({"type": "ParameterNoise", "sub_exploration": {"type": "EpsilonGreedy"}})


@pytest.mark.parametrize(
    "config, named",
    [
        ({"type": "SoftQQ"}, "SoftQQ"),
        ({}, "type"),
        ({"type": "SoftQ", "temperature": 0}, "temperature"),
        ({"type": "SoftQ", "temprature": 0.5}, "did you mean 'temperature'"),
        ({"type": "SoftQ", "initial_epsilon": 1.0}, "initial_epsilon"),  # another type's key
        ({"type": "ParameterNoise", "initial_stddev": -1.0}, "initial_stddev"),
        ({"type": "ParameterNoise", "random_timesteps": 1.5}, "random_timesteps"),
        ({"type": "ParameterNoise", "sub_exploration": {"type": "SoftQ"}}, "sub_exploration"),
        ({**SCHEDULE, "epsilon_timestep": 100}, "epsilon_timestep"),
        ({**SCHEDULE, "initial_epsilon": 1.5}, "initial_epsilon"),
        ({**SCHEDULE, "final_epsilon": -0.1}, "final_epsilon"),
        ({**SCHEDULE, "final_epsilon": "0.1"}, "final_epsilon"),
        ({**SCHEDULE, "initial_epsilon": True}, "initial_epsilon"),
        ({**SCHEDULE, "epsilon_timesteps": -1}, "epsilon_timesteps"),
        ({**SCHEDULE, "epsilon_timesteps": 10.5}, "epsilon_timesteps"),
    ],
)
def test_validate_exploration_config_names_bad_key(config, named):
    with pytest.raises(ConfigError, match=named):
        validate_exploration_config(config)
