"""Unit tests for rlstack/policies/postprocessing.py (GAE, returns, bootstrapping)."""

from __future__ import annotations

import numpy as np
import pytest

from rlstack.policies.postprocessing import (
    compute_advantages,
    compute_gae,
    discount_cumsum,
    last_value_of,
    standardize,
)
from rlstack.sample_batch import SampleBatch

GAMMA = 0.9
LAMBDA = 0.8
REWARDS = [1.0, 0.0, 2.0]
VALUES = [0.5, 0.4, 0.3]
BOOT = 0.6


# --- discount_cumsum ------------------------------------------------------------------


def test_discount_cumsum_by_hand():
    # out[2] = 3; out[1] = 2 + 0.5*3 = 3.5; out[0] = 1 + 0.5*3.5 = 2.75
    np.testing.assert_allclose(discount_cumsum(np.array([1.0, 2.0, 3.0]), 0.5), [2.75, 3.5, 3.0])


def test_discount_cumsum_gamma_one_and_zero():
    x = np.array([1.0, -2.0, 4.0, 0.5])
    np.testing.assert_allclose(discount_cumsum(x, 1.0), np.cumsum(x[::-1])[::-1])
    np.testing.assert_allclose(discount_cumsum(x, 0.0), x)
    assert discount_cumsum(np.array([]), 0.9).shape == (0,)


# --- compute_gae ----------------------------------------------------------------------

# gamma = 0.9, lambda = 0.8 (gamma*lambda = 0.72), rewards [1, 0, 2],
# V = [0.5, 0.4, 0.3], V(s_T) = 0.6:
#   delta_0 = 1 + 0.9*0.4 - 0.5 = 0.86
#   delta_1 = 0 + 0.9*0.3 - 0.4 = -0.13
#   delta_2 = 2 + 0.9*0.6 - 0.3 = 2.24
#   A_2 = 2.24
#   A_1 = -0.13 + 0.72*2.24   = 1.4828
#   A_0 = 0.86  + 0.72*1.4828 = 1.927616
#   targets = A + V = [2.427616, 1.8828, 2.54]
GAE_ADV_BOOT = [1.927616, 1.4828, 2.24]
GAE_TARGETS_BOOT = [2.427616, 1.8828, 2.54]
# Same with V(s_T) = 0 (terminated):
#   delta_2 = 2 - 0.3 = 1.7
#   A_2 = 1.7; A_1 = -0.13 + 0.72*1.7 = 1.094; A_0 = 0.86 + 0.72*1.094 = 1.64768
#   targets = [2.14768, 1.494, 2.0]
GAE_ADV_TERM = [1.64768, 1.094, 1.7]
GAE_TARGETS_TERM = [2.14768, 1.494, 2.0]


def test_compute_gae_by_hand():
    adv, targets = compute_gae(np.array(REWARDS), np.array(VALUES), BOOT, GAMMA, LAMBDA)
    assert adv.dtype == np.float32 and targets.dtype == np.float32
    np.testing.assert_allclose(adv, GAE_ADV_BOOT, rtol=1e-6)
    np.testing.assert_allclose(targets, GAE_TARGETS_BOOT, rtol=1e-6)


def test_compute_gae_zero_last_value_by_hand():
    adv, targets = compute_gae(np.array(REWARDS), np.array(VALUES), 0.0, GAMMA, LAMBDA)
    np.testing.assert_allclose(adv, GAE_ADV_TERM, rtol=1e-6)
    np.testing.assert_allclose(targets, GAE_TARGETS_TERM, rtol=1e-6)


def test_compute_gae_lambda_one_is_monte_carlo_minus_baseline():
    adv, targets = compute_gae(np.array(REWARDS), np.array(VALUES), BOOT, GAMMA, 1.0)
    returns = discount_cumsum(np.array(REWARDS + [BOOT]), GAMMA)[:-1]
    np.testing.assert_allclose(targets, returns, rtol=1e-6)
    np.testing.assert_allclose(adv, returns - np.array(VALUES), rtol=1e-6)


# --- compute_advantages on a trajectory piece ---------------------------------------


def _piece(terminated_last: bool, truncated_last: bool, bootstrap_last: float = BOOT) -> SampleBatch:
    return SampleBatch(
        {
            SampleBatch.REWARDS: np.array(REWARDS, dtype=np.float32),
            SampleBatch.VF_PREDS: np.array(VALUES, dtype=np.float32),
            SampleBatch.TERMINATEDS: np.array([False, False, terminated_last]),
            SampleBatch.TRUNCATEDS: np.array([False, False, truncated_last]),
            SampleBatch.BOOTSTRAP_VALUE: np.array([0.0, 0.0, bootstrap_last], dtype=np.float32),
        }
    )


def test_terminated_piece_does_not_bootstrap_even_if_bootstrap_value_set():
    batch = _piece(terminated_last=True, truncated_last=False, bootstrap_last=123.0)
    assert last_value_of(batch) == 0.0
    out = compute_advantages(batch, GAMMA, LAMBDA)
    np.testing.assert_allclose(out[SampleBatch.ADVANTAGES], GAE_ADV_TERM, rtol=1e-6)
    np.testing.assert_allclose(out[SampleBatch.VALUE_TARGETS], GAE_TARGETS_TERM, rtol=1e-6)


def test_truncated_piece_bootstraps_from_last_bootstrap_value():
    batch = _piece(terminated_last=False, truncated_last=True)
    assert last_value_of(batch) == pytest.approx(BOOT)
    out = compute_advantages(batch, GAMMA, LAMBDA)
    np.testing.assert_allclose(out[SampleBatch.ADVANTAGES], GAE_ADV_BOOT, rtol=1e-6)
    np.testing.assert_allclose(out[SampleBatch.VALUE_TARGETS], GAE_TARGETS_BOOT, rtol=1e-6)


def test_fragment_cut_bootstraps_like_truncation():
    cut = compute_advantages(_piece(terminated_last=False, truncated_last=False), GAMMA, LAMBDA)
    trunc = compute_advantages(_piece(terminated_last=False, truncated_last=True), GAMMA, LAMBDA)
    np.testing.assert_allclose(cut[SampleBatch.ADVANTAGES], GAE_ADV_BOOT, rtol=1e-6)
    np.testing.assert_array_equal(cut[SampleBatch.VALUE_TARGETS], trunc[SampleBatch.VALUE_TARGETS])


def test_bootstrap_only_reads_last_row():
    # Earlier rows' bootstrap_value must be ignored (only the last row is a piece end).
    batch = _piece(terminated_last=False, truncated_last=True)
    batch[SampleBatch.BOOTSTRAP_VALUE] = np.array([50.0, -7.0, BOOT], dtype=np.float32)
    out = compute_advantages(batch, GAMMA, LAMBDA)
    np.testing.assert_allclose(out[SampleBatch.ADVANTAGES], GAE_ADV_BOOT, rtol=1e-6)


def test_value_targets_differ_by_discounted_bootstrap_term_gae():
    term = compute_advantages(_piece(True, False), GAMMA, LAMBDA)
    trunc = compute_advantages(_piece(False, True), GAMMA, LAMBDA)
    # A_t changes by gamma * (gamma*lambda)^(T-1-t) * V_boot, t = 0..2:
    #   [0.9*0.6*0.72^2, 0.9*0.6*0.72, 0.9*0.6] = [0.279936, 0.3888, 0.54]
    expected = np.array([0.279936, 0.3888, 0.54])
    np.testing.assert_allclose(
        trunc[SampleBatch.VALUE_TARGETS] - term[SampleBatch.VALUE_TARGETS], expected, rtol=1e-5
    )
    np.testing.assert_allclose(trunc[SampleBatch.ADVANTAGES] - term[SampleBatch.ADVANTAGES], expected, rtol=1e-5)


# Discounted returns with gamma = 0.9:
#   bootstrapped from 0.6: R_2 = 2 + 0.9*0.6 = 2.54; R_1 = 0.9*2.54 = 2.286; R_0 = 1 + 0.9*2.286 = 3.0574
#   terminated:            R_2 = 2;              R_1 = 1.8;            R_0 = 1 + 1.62 = 2.62
RETURNS_BOOT = [3.0574, 2.286, 2.54]
RETURNS_TERM = [2.62, 1.8, 2.0]


def test_use_gae_false_gives_discounted_returns():
    trunc = compute_advantages(_piece(False, True), GAMMA, LAMBDA, use_gae=False)
    term = compute_advantages(_piece(True, False, bootstrap_last=123.0), GAMMA, LAMBDA, use_gae=False)
    np.testing.assert_allclose(trunc[SampleBatch.VALUE_TARGETS], RETURNS_BOOT, rtol=1e-6)
    np.testing.assert_allclose(trunc[SampleBatch.ADVANTAGES], np.array(RETURNS_BOOT) - VALUES, rtol=1e-6)
    np.testing.assert_allclose(term[SampleBatch.VALUE_TARGETS], RETURNS_TERM, rtol=1e-6)
    # difference = gamma^(T-t) * V_boot = [0.9^3, 0.9^2, 0.9] * 0.6 = [0.4374, 0.486, 0.54]
    np.testing.assert_allclose(
        trunc[SampleBatch.VALUE_TARGETS] - term[SampleBatch.VALUE_TARGETS], [0.4374, 0.486, 0.54], rtol=1e-5
    )


def test_use_critic_false_advantages_are_returns():
    out = compute_advantages(_piece(False, True), GAMMA, LAMBDA, use_gae=True, use_critic=False)
    np.testing.assert_allclose(out[SampleBatch.ADVANTAGES], RETURNS_BOOT, rtol=1e-6)
    np.testing.assert_allclose(out[SampleBatch.VALUE_TARGETS], RETURNS_BOOT, rtol=1e-6)


def test_compute_advantages_adds_float32_columns_of_batch_length():
    out = compute_advantages(_piece(False, False), GAMMA, LAMBDA)
    for col in (SampleBatch.ADVANTAGES, SampleBatch.VALUE_TARGETS):
        assert out[col].shape == (3,)
        assert out[col].dtype == np.float32


# --- standardize ----------------------------------------------------------------------


def test_standardize_zero_mean_unit_std():
    rng = np.random.default_rng(0)
    batch = SampleBatch({SampleBatch.ADVANTAGES: rng.normal(5.0, 3.0, size=200)})
    standardize(batch, SampleBatch.ADVANTAGES)
    values = batch[SampleBatch.ADVANTAGES]
    assert values.dtype == np.float32
    assert abs(values.mean()) < 1e-5
    assert values.std() == pytest.approx(1.0, abs=1e-5)


def test_standardize_constant_column_does_not_divide_by_zero():
    batch = SampleBatch({SampleBatch.ADVANTAGES: np.full(5, 2.0)})
    standardize(batch, SampleBatch.ADVANTAGES)
    assert np.all(np.isfinite(batch[SampleBatch.ADVANTAGES]))
    np.testing.assert_allclose(batch[SampleBatch.ADVANTAGES], 0.0)
