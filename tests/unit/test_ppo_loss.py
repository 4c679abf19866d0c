"""PPO's loss against a numpy reference written from the paper (Schulman et al. 2017),
plus the adaptive KL coefficient, the lr / entropy schedules and TF determinism.

Both policies (torch and TF) are checked against the same reference; each framework is
skipped on its own when it is not installed.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlstack.policies.postprocessing import adapt_kl_coeff
from rlstack.sample_batch import SampleBatch
from rlstack.trainers.common.config import merge_config
from rlstack.trainers.ppo import DEFAULT_CONFIG
from tests.helpers.tensors import as_tensors, to_float

B = SampleBatch
OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
ACTION_SPACE = gym.spaces.Discrete(3)
LOSS_CONFIG = {"seed": 0, "entropy_coeff": 0.01, "clip_param": 0.2, "vf_clip_param": 5.0,
               "model": {"fcnet_hiddens": [16]}}
FRAMEWORKS = ["torch", "tf"]


# ----- numpy reference -----------------------------------------------------------------


def _log_softmax(x):
    x = np.asarray(x, dtype=np.float64)
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def _ratio(dist_inputs, batch):
    logp_new = _log_softmax(dist_inputs)[np.arange(len(batch[B.ACTIONS])), batch[B.ACTIONS]]
    return np.exp(logp_new - np.asarray(batch[B.ACTION_LOGP], np.float64))


def numpy_ppo_loss(dist_inputs, values, batch, cfg, kl_coeff, entropy_coeff):
    """PPO's total loss and its parts for a Categorical policy, in float64.

    L = -E[min(A r, A clip(r, 1 - eps, 1 + eps))] + kl_coeff KL(old || new)
        + vf_loss_coeff E[clip((V - V_target)^2, 0, vf_clip_param)] - entropy_coeff H(new)
    """
    eps = cfg["clip_param"]
    advantages = np.asarray(batch[B.ADVANTAGES], np.float64)
    ratio = _ratio(dist_inputs, batch)
    surrogate = np.mean(np.minimum(advantages * ratio, advantages * np.clip(ratio, 1 - eps, 1 + eps)))

    logp_new = _log_softmax(dist_inputs)
    logp_old = _log_softmax(batch[B.ACTION_DIST_INPUTS])
    kl = np.mean(np.sum(np.exp(logp_old) * (logp_old - logp_new), axis=-1))
    entropy = np.mean(-np.sum(np.exp(logp_new) * logp_new, axis=-1))

    sq_error = (np.asarray(values, np.float64) - np.asarray(batch[B.VALUE_TARGETS], np.float64)) ** 2
    vf_loss = np.mean(np.clip(sq_error, 0.0, cfg["vf_clip_param"]))

    total = -surrogate + kl_coeff * kl + cfg["vf_loss_coeff"] * vf_loss - entropy_coeff * entropy
    return {"total_loss": total, "policy_loss": -surrogate, "vf_loss": vf_loss, "kl": kl, "entropy": entropy}


# ----- framework helpers -----------------------------------------------------------------


def _policy_class(framework):
    if framework == "torch":
        pytest.importorskip("torch")
        from rlstack.trainers.ppo.ppo_torch_policy import PPOTorchPolicy

        return PPOTorchPolicy
    pytest.importorskip("tensorflow")
    from rlstack.trainers.ppo.ppo_tf_policy import PPOTFPolicy

    return PPOTFPolicy


def _build(framework, **overrides):
    config = merge_config(DEFAULT_CONFIG, {**LOSS_CONFIG, **overrides}, "PPO")
    return _policy_class(framework)(OBS_SPACE, ACTION_SPACE, config)


def _coeff(policy, name):
    value = getattr(policy, name)
    return float(value.numpy()) if hasattr(value, "numpy") else float(value)


def _make_batch(policy, n=64, seed=0):
    """A fixed batch whose "old" policy differs enough from the current one that the
    ratio leaves [1 - eps, 1 + eps] on both sides, and whose value targets are spread
    wide enough that some squared errors exceed vf_clip_param."""
    rng = np.random.default_rng(seed)
    obs = rng.uniform(-1, 1, (n, OBS_SPACE.shape[0])).astype(np.float32)
    _, extras = policy.compute_actions(obs, explore=False)
    old_inputs = (extras[B.ACTION_DIST_INPUTS] + rng.normal(0, 0.5, extras[B.ACTION_DIST_INPUTS].shape))
    old_inputs = old_inputs.astype(np.float32)
    actions = rng.integers(0, ACTION_SPACE.n, n).astype(np.int64)
    old_logp = _log_softmax(old_inputs)[np.arange(n), actions].astype(np.float32)
    return SampleBatch({
        B.OBS: obs,
        B.ACTIONS: actions,
        B.ACTION_LOGP: old_logp,
        B.ACTION_DIST_INPUTS: old_inputs,
        B.ADVANTAGES: rng.normal(0, 1, n).astype(np.float32),
        B.VALUE_TARGETS: rng.normal(0, 3, n).astype(np.float32),
    })


def _model_outputs(policy, batch):
    _, extras = policy.compute_actions(batch[B.OBS], explore=False)
    return extras[B.ACTION_DIST_INPUTS], extras[B.VF_PREDS]


def _assert_loss_matches_reference(framework, policy, batch):
    dist_inputs, values = _model_outputs(policy, batch)
    expected = numpy_ppo_loss(dist_inputs, values, batch, policy.config,
                              _coeff(policy, "kl_coeff"), _coeff(policy, "entropy_coeff"))
    loss, stats = policy.loss(as_tensors(framework, batch))
    np.testing.assert_allclose(to_float(loss), expected["total_loss"], rtol=1e-5)
    for key in ("total_loss", "policy_loss", "vf_loss", "kl", "entropy"):
        np.testing.assert_allclose(to_float(stats[key]), expected[key], rtol=1e-5, atol=1e-8, err_msg=key)


# ----- the loss ----------------------------------------------------------------------------


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_loss_matches_numpy_reference(framework):
    policy = _build(framework)
    batch = _make_batch(policy)
    cfg = policy.config
    dist_inputs, values = _model_outputs(policy, batch)

    # The batch exercises the clip on both sides: rows where the clipped term is the
    # smaller one, with positive advantages (ratio > 1 + eps) and negative ones (< 1 - eps).
    ratio = _ratio(dist_inputs, batch)
    adv = batch[B.ADVANTAGES]
    eps = cfg["clip_param"]
    assert np.any((adv > 0) & (ratio > 1 + eps))
    assert np.any((adv < 0) & (ratio < 1 - eps))
    assert np.any((ratio > 1 - eps) & (ratio < 1 + eps))
    # ...and the value-loss clip is active for some rows, not for all.
    sq_error = (values - batch[B.VALUE_TARGETS]) ** 2
    assert np.any(sq_error > cfg["vf_clip_param"]) and np.any(sq_error < cfg["vf_clip_param"])
    # The KL penalty and entropy bonus both contribute.
    assert _coeff(policy, "kl_coeff") == pytest.approx(0.2)
    assert _coeff(policy, "entropy_coeff") == pytest.approx(0.01)

    _assert_loss_matches_reference(framework, policy, batch)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_loss_without_critic_has_no_value_term(framework):
    policy = _build(framework, use_critic=False, use_gae=False)
    batch = _make_batch(policy)
    dist_inputs, values = _model_outputs(policy, batch)
    expected = numpy_ppo_loss(dist_inputs, values, batch, policy.config, 0.2, 0.01)
    loss, stats = policy.loss(as_tensors(framework, batch))
    assert to_float(stats["vf_loss"]) == 0.0
    np.testing.assert_allclose(to_float(loss), expected["total_loss"] - expected["vf_loss"], rtol=1e-5)


def test_numpy_reference_sanity():
    """The reference itself: equal old and new policies give ratio 1, KL 0, and the
    surrogate is the mean advantage."""
    rng = np.random.default_rng(3)
    inputs = rng.normal(size=(8, 3)).astype(np.float32)
    actions = rng.integers(0, 3, 8)
    batch = {B.ACTIONS: actions, B.ACTION_DIST_INPUTS: inputs,
             B.ACTION_LOGP: _log_softmax(inputs)[np.arange(8), actions],
             B.ADVANTAGES: rng.normal(size=8), B.VALUE_TARGETS: np.zeros(8)}
    cfg = {"clip_param": 0.2, "vf_clip_param": 10.0, "vf_loss_coeff": 1.0}
    out = numpy_ppo_loss(inputs, np.ones(8), batch, cfg, kl_coeff=0.2, entropy_coeff=0.0)
    assert out["kl"] == pytest.approx(0.0, abs=1e-12)
    assert out["policy_loss"] == pytest.approx(-batch[B.ADVANTAGES].mean())
    assert out["vf_loss"] == pytest.approx(1.0)
    assert out["entropy"] == pytest.approx(np.mean(-np.sum(np.exp(_log_softmax(inputs)) * _log_softmax(inputs), -1)))


# ----- adaptive KL coefficient ----------------------------------------------------------------


@pytest.mark.parametrize("kl, expected", [
    (0.05, 0.3),     # > 2 * target: x1.5
    (0.0201, 0.3),
    (0.02, 0.2),     # == 2 * target: unchanged
    (0.01, 0.2),
    (0.005, 0.2),    # == 0.5 * target: unchanged
    (0.0049, 0.1),   # < 0.5 * target: x0.5
    (0.0, 0.1),
])
def test_adapt_kl_coeff_rule(kl, expected):
    assert adapt_kl_coeff(0.2, kl, 0.01) == pytest.approx(expected)


LEARN_CONFIG = {"num_sgd_iter": 2, "sgd_minibatch_size": 32, "train_batch_size": 64, "lr": 1e-3}


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_learn_on_batch_adapts_kl_coeff(framework):
    """After each learn_on_batch, kl_coeff = adapt_kl_coeff(previous, stats["kl"], kl_target).

    One policy goes through the three branches; kl_target is changed between calls
    (after_learn reads it from the policy's config). The measured KL is dominated by the
    batch's perturbed "old" distribution, so it barely moves between calls and the last
    target (the previous call's KL) falls in the unchanged band.
    """
    policy = _build(framework, kl_target=1e-7, **LEARN_CONFIG)
    batch = _make_batch(policy)
    coeff, previous_kl = 0.2, None
    for kl_target, factor in [(1e-7, 1.5), (1e-7, 1.5), (100.0, 0.5), (None, 1.0)]:
        kl_target = previous_kl if kl_target is None else kl_target
        policy.config["kl_target"] = kl_target
        stats = policy.learn_on_batch(batch)
        assert stats["kl"] > 0
        expected = adapt_kl_coeff(coeff, stats["kl"], kl_target)
        assert expected == pytest.approx(coeff * factor)
        assert _coeff(policy, "kl_coeff") == pytest.approx(expected, rel=1e-6)
        assert stats["kl_coeff"] == pytest.approx(expected, rel=1e-6)
        coeff, previous_kl = expected, stats["kl"]
    assert coeff == pytest.approx(0.2 * 1.5 * 1.5 * 0.5)


# ----- schedules ------------------------------------------------------------------------------


def _optimizer_lr(framework, policy):
    return policy.optimizer.lr if framework == "torch" else float(policy.lr.numpy())


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_lr_schedule_reaches_optimizer(framework):
    policy = _build(framework, lr_schedule=[[0, 1e-3], [1000, 1e-4]], num_sgd_iter=1,
                    sgd_minibatch_size=64, train_batch_size=64)
    assert _optimizer_lr(framework, policy) == pytest.approx(1e-3, rel=1e-6)
    policy.on_global_var_update(500)
    assert _optimizer_lr(framework, policy) == pytest.approx(5.5e-4, rel=1e-6)
    before = policy.get_weights()
    stats = policy.learn_on_batch(_make_batch(policy))
    assert stats["cur_lr"] == pytest.approx(5.5e-4, rel=1e-6)
    # Adam's first step moves every weight with a non-negligible gradient by lr.
    after = policy.get_weights()
    largest = max(float(np.max(np.abs(after[k] - before[k]))) for k in before)
    assert largest == pytest.approx(5.5e-4, rel=1e-3)
    policy.on_global_var_update(2000)
    assert _optimizer_lr(framework, policy) == pytest.approx(1e-4, rel=1e-6)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_entropy_coeff_schedule_moves_coefficient_and_loss(framework):
    policy = _build(framework, entropy_coeff_schedule=[[0, 0.1], [1000, 0.0]])
    assert _coeff(policy, "entropy_coeff") == pytest.approx(0.1, rel=1e-6)
    policy.on_global_var_update(500)
    assert _coeff(policy, "entropy_coeff") == pytest.approx(0.05, rel=1e-6)
    _assert_loss_matches_reference(framework, policy, _make_batch(policy))


# ----- determinism -----------------------------------------------------------------------------


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_same_seed_same_batch_same_weights(framework):
    config = dict(LEARN_CONFIG, sgd_minibatch_size=16, grad_clip=0.5)
    first, second = _build(framework, **config), _build(framework, **config)
    initial = first.get_weights()
    batch = _make_batch(first)
    stats_first, stats_second = first.learn_on_batch(batch), second.learn_on_batch(batch)
    w_first, w_second = first.get_weights(), second.get_weights()
    assert w_first.keys() == w_second.keys()
    for name in w_first:
        np.testing.assert_array_equal(w_first[name], w_second[name], err_msg=name)
    assert stats_first == stats_second
    # The update did move the weights (the comparison is not between two untouched copies).
    assert any(not np.array_equal(initial[k], w_first[k]) for k in initial)
