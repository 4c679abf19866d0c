"""A2C/A3C's actor-critic loss (Mnih et al. 2016): torch and TF agree with each other and
with a numpy reference; gradient accumulation over microbatches equals the full-batch
gradient; compute/apply gradients split the same as learn_on_batch."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlstack.sample_batch import SampleBatch
from rlstack.trainers.a3c import A2C_DEFAULT_CONFIG
from rlstack.trainers.common.config import merge_config
from tests.helpers.tensors import loss_value

B = SampleBatch
OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
ACTION_SPACE = gym.spaces.Discrete(3)


def _policy(framework: str, **overrides):
    config = merge_config(A2C_DEFAULT_CONFIG, {"seed": 2, "grad_clip": 1.0, "lr": 1e-2,
                                                "model": {"fcnet_hiddens": [16]}, **overrides}, "A2C")
    if framework == "torch":
        from rlstack.trainers.a3c.a3c_torch_policy import A3CTorchPolicy

        return A3CTorchPolicy(OBS_SPACE, ACTION_SPACE, config)
    from rlstack.trainers.a3c.a3c_tf_policy import A3CTFPolicy

    return A3CTFPolicy(OBS_SPACE, ACTION_SPACE, config)


def _batch(n: int = 24, seed: int = 0) -> SampleBatch:
    rng = np.random.default_rng(seed)
    return SampleBatch({
        B.OBS: rng.uniform(-1, 1, (n, 4)).astype(np.float32),
        B.ACTIONS: rng.integers(0, 3, n),
        B.ADVANTAGES: rng.normal(0, 1, n).astype(np.float32),
        B.VALUE_TARGETS: rng.normal(0, 2, n).astype(np.float32),
    })


def _log_softmax(x: np.ndarray) -> np.ndarray:
    x = x - x.max(axis=1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=1, keepdims=True))


def numpy_a3c_loss(policy, batch: SampleBatch, vf_loss_coeff: float, entropy_coeff: float) -> float:
    """-sum(logp A) + vf_loss_coeff 0.5 sum((V - V_target)^2) - entropy_coeff sum(H), float64."""
    from rlstack.models.numpy.model import NumpyModel

    model = NumpyModel(policy.model_spec())
    model.set_canonical_weights(policy.get_weights())
    logits, values = model(batch[B.OBS].astype(np.float64))
    logp_all = _log_softmax(logits.astype(np.float64))
    logp = logp_all[np.arange(batch.count), batch[B.ACTIONS]]
    entropy = -(np.exp(logp_all) * logp_all).sum(axis=1)
    pi_err = -(logp * batch[B.ADVANTAGES]).sum()
    value_err = 0.5 * ((values - batch[B.VALUE_TARGETS]) ** 2).sum()
    return pi_err + vf_loss_coeff * value_err - entropy_coeff * entropy.sum()


def test_loss_matches_numpy_reference(framework):
    policy = _policy(framework)
    batch = _batch()
    expected = numpy_a3c_loss(policy, batch, vf_loss_coeff=0.5, entropy_coeff=0.01)
    np.testing.assert_allclose(loss_value(policy, batch), expected, rtol=1e-5)


def test_torch_and_tf_take_the_same_step():
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    torch_policy, tf_policy = _policy("torch"), _policy("tf")
    np.testing.assert_array_equal(torch_policy.get_weights()["logits/kernel"], tf_policy.get_weights()["logits/kernel"])
    batch = _batch(n=40, seed=3)
    torch_stats = torch_policy.learn_on_batch(batch)
    tf_stats = tf_policy.learn_on_batch(batch)
    assert torch_stats["grad_gnorm"] > 1.0  # the clip is active
    np.testing.assert_allclose(torch_stats["total_loss"], tf_stats["total_loss"], rtol=1e-5)
    after_torch, after_tf = torch_policy.get_weights(), tf_policy.get_weights()
    for name in after_torch:
        np.testing.assert_allclose(after_torch[name], after_tf[name], rtol=1e-4, atol=1e-6, err_msg=name)


def test_microbatches_give_the_full_batch_gradient(framework):
    batch = _batch(n=30, seed=5)
    full, _ = _policy(framework, grad_clip=None).compute_gradients(batch)
    micro, _ = _policy(framework, grad_clip=None, microbatch_size=7).compute_gradients(batch)
    for a, b in zip(full, micro):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_apply_gradients_equals_learn_on_batch(framework):
    # A3C splits learn_on_batch: gradients on a worker, the step on the driver.
    batch = _batch(n=16, seed=7)
    worker, driver, reference = _policy(framework), _policy(framework), _policy(framework)
    grads, _ = worker.compute_gradients(batch)
    driver.apply_gradients(grads)
    reference.learn_on_batch(batch)
    for name, value in reference.get_weights().items():
        np.testing.assert_allclose(driver.get_weights()[name], value, rtol=1e-6, atol=1e-7, err_msg=name)
