"""The TF PPO policy's closed-form gradient (models/tf/fused.py) against the GradientTape.

Every TF PPO run with a built-in dense model and Discrete actions takes the fused path,
so it must give the tape's gradients, statistics and weights on every branch of the
loss, for the same model shapes as the torch twin (tests/helpers/fused_cases.py).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from rlstack.models.tf.fused import DenseGraph  # noqa: E402
from rlstack.trainers.common.config import merge_config  # noqa: E402
from rlstack.trainers.ppo import DEFAULT_CONFIG  # noqa: E402
from rlstack.trainers.ppo.ppo_tf_policy import PPOTFPolicy  # noqa: E402
from tests.helpers.fused_cases import (  # noqa: E402
    B, CASES, OBS_SPACE, check_every_branch_is_hit, check_fused_learning_matches_reference,
    check_non_finite_target_stops_the_update, check_value_layers_stay_without_a_critic,
    make_policy, ppo_batch,
)


def _loss_and_gradients(policy, batch, fused):
    policy.use_fused_sgd = fused
    tensors = {key: tf.convert_to_tensor(batch[key]) for key in policy.loss_columns}
    loss, stats, grads = policy.loss_and_gradients(tensors)
    return [g.numpy() for g in grads], {key: float(value) for key, value in stats.items()}, float(loss)


@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_gradient_equals_the_tape(case):
    policy = make_policy(PPOTFPolicy, CASES[case])
    assert DenseGraph.supports(policy.model)
    batch = ppo_batch(policy)
    fused_grads, fused_stats, fused_loss = _loss_and_gradients(policy, batch, fused=True)
    tape_grads, tape_stats, tape_loss = _loss_and_gradients(policy, batch, fused=False)
    assert len(fused_grads) == len(tape_grads) == len(policy.train_variables)
    for fused, tape, var in zip(fused_grads, tape_grads, policy.train_variables):
        assert fused.shape == tape.shape == tuple(var.shape)
        np.testing.assert_allclose(fused, tape, rtol=1e-4, atol=1e-6, err_msg=var.name)
    assert fused_stats.keys() == tape_stats.keys()
    for key in tape_stats:
        assert fused_stats[key] == pytest.approx(tape_stats[key], rel=1e-5, abs=1e-7), key
    assert fused_loss == pytest.approx(tape_loss, rel=1e-5, abs=1e-7)
    dist_inputs, values = policy.model.policy_and_value(tf.convert_to_tensor(batch[B.OBS]))
    check_every_branch_is_hit(policy, dist_inputs.numpy(), values.numpy(), batch)


@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_learning_matches_the_tape_over_several_batches(case):
    check_fused_learning_matches_reference(PPOTFPolicy, CASES[case])


def test_models_outside_the_fused_path_keep_the_tape(monkeypatch):
    # Multi-discrete actions, images, other activations and no critic use the tape: the
    # fused method is never reached for them.
    calls = []
    monkeypatch.setattr(PPOTFPolicy, "_fused_loss_and_gradients",
                        lambda self, minibatch: calls.append(self) or pytest.fail("fused path taken"))
    multi = PPOTFPolicy(OBS_SPACE, gym.spaces.MultiDiscrete([2, 3]), merge_config(DEFAULT_CONFIG, {"seed": 0}, "PPO"))
    image = PPOTFPolicy(gym.spaces.Box(0, 255, (42, 42, 3), np.uint8), gym.spaces.Discrete(2),
                        merge_config(DEFAULT_CONFIG, {"seed": 0}, "PPO"))
    swish = make_policy(PPOTFPolicy, {"model": {"fcnet_hiddens": [8], "fcnet_activation": "swish"}})
    no_critic = make_policy(PPOTFPolicy, {"use_critic": False, "use_gae": False})
    assert DenseGraph.supports(multi.model)  # the model would do; the distribution is not covered
    assert not DenseGraph.supports(image.model)
    assert not DenseGraph.supports(swish.model)
    for policy in (swish, no_critic):
        stats = policy.learn_on_batch(ppo_batch(policy))
        assert np.isfinite(stats["total_loss"])
    assert calls == []


def test_fused_path_rejects_a_non_finite_loss_before_the_update():
    check_non_finite_target_stops_the_update(make_policy(PPOTFPolicy, {}))


def test_without_a_critic_the_value_layers_stay_as_they_were():
    # The tape gives the value layers no gradient (None); Adam leaves them and their
    # moments alone, as the torch policy does, instead of failing on the None.
    policy = make_policy(PPOTFPolicy, {"use_critic": False, "use_gae": False, "grad_clip": 1.0})
    check_value_layers_stay_without_a_critic(policy)


@pytest.mark.parametrize("kind", ["categorical", "diag_gaussian"])
def test_closed_form_terms_equal_the_distributions_own_and_their_gradient_tape(kind):
    from rlstack.models.tf.distributions import CLOSED_FORM_TERMS

    dist_class = CLOSED_FORM_TERMS[kind]
    rng = np.random.default_rng(3)
    width = 4
    z = tf.constant(rng.normal(size=(6, width)), tf.float32)
    old_inputs = tf.constant(rng.normal(size=(6, width)), tf.float32)
    actions = tf.constant(rng.integers(0, width, 6) if kind == "categorical" else rng.normal(size=(6, width // 2)),
                          tf.int32 if kind == "categorical" else tf.float32)
    logp, kl, entropy, *derivatives = dist_class.closed_form_terms(z, actions, old_inputs)
    for i, (term, derivative) in enumerate(zip((logp, kl, entropy), derivatives)):
        with tf.GradientTape() as tape:
            tape.watch(z)
            new, old = dist_class(z), dist_class(old_inputs)
            reference = (new.logp(actions), old.kl(new), new.entropy())[i]
            # Rows are independent: the gradient of the sum is each row's d term / dz.
            total = tf.reduce_sum(reference)
        np.testing.assert_allclose(term.numpy(), reference.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(derivative.numpy(), tape.gradient(total, z).numpy(), rtol=1e-4, atol=1e-6)
