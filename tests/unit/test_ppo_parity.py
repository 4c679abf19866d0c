"""Framework parity: torch and TF PPO policies with equal weights act and learn alike."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("tensorflow")

from rlstack.sample_batch import SampleBatch  # noqa: E402
from rlstack.trainers.common.config import merge_config  # noqa: E402
from rlstack.trainers.ppo import DEFAULT_CONFIG  # noqa: E402
from rlstack.trainers.ppo.ppo_tf_policy import PPOTFPolicy  # noqa: E402
from rlstack.trainers.ppo.ppo_torch_policy import PPOTorchPolicy  # noqa: E402

SPACES = {
    "discrete": (gym.spaces.Box(-1, 1, (4,), np.float32), gym.spaces.Discrete(3), {}),
    "multi_discrete": (gym.spaces.Box(-1, 1, (5,), np.float32), gym.spaces.MultiDiscrete([2, 3]), {}),
    "box": (gym.spaces.Box(-1, 1, (3,), np.float32), gym.spaces.Box(-1, 1, (2,), np.float32), {}),
    "image_shared": (
        gym.spaces.Box(0, 1, (10, 10, 3), np.float32),
        gym.spaces.Discrete(2),
        {"vf_share_layers": True, "post_fcnet_hiddens": [16]},
    ),
}


def _batch(policy, rng, n=64):
    obs = rng.uniform(-1, 1, (n, policy.preprocessor.size)).astype(np.float32)
    actions, extras = policy.compute_actions(obs)
    # Perturb the "old" distribution so that ratio, KL and clipping are all exercised.
    dist_inputs = extras[SampleBatch.ACTION_DIST_INPUTS] + rng.normal(0, 0.3, extras[SampleBatch.ACTION_DIST_INPUTS].shape)
    return SampleBatch(
        {
            SampleBatch.OBS: obs,
            SampleBatch.ACTIONS: actions,
            SampleBatch.ACTION_LOGP: (extras[SampleBatch.ACTION_LOGP] + rng.normal(0, 0.2, n)).astype(np.float32),
            SampleBatch.ACTION_DIST_INPUTS: dist_inputs.astype(np.float32),
            SampleBatch.ADVANTAGES: rng.normal(0, 1, n).astype(np.float32),
            SampleBatch.VALUE_TARGETS: rng.normal(0, 3, n).astype(np.float32),
        }
    )


@pytest.mark.parametrize("case", sorted(SPACES))
def test_same_weights_same_logits_and_loss(case):
    import tensorflow as tf
    import torch

    obs_space, action_space, model = SPACES[case]
    config = merge_config(DEFAULT_CONFIG, {"seed": 11, "entropy_coeff": 0.01,
                                            "model": {"fcnet_hiddens": [32, 32], **model}}, "PPO")
    torch_policy = PPOTorchPolicy(obs_space, action_space, config)
    tf_policy = PPOTFPolicy(obs_space, action_space, config)
    # Same seed gives the same initial weights; make it explicit anyway.
    tf_policy.set_weights(torch_policy.get_weights())
    batch = _batch(torch_policy, np.random.default_rng(0))

    _, torch_extras = torch_policy.compute_actions(batch[SampleBatch.OBS], explore=False)
    _, tf_extras = tf_policy.compute_actions(batch[SampleBatch.OBS], explore=False)
    for key in (SampleBatch.ACTION_DIST_INPUTS, SampleBatch.VF_PREDS):
        np.testing.assert_allclose(torch_extras[key], tf_extras[key], rtol=1e-5, atol=1e-6)

    torch_loss, torch_stats = torch_policy.loss({k: torch.from_numpy(v) for k, v in batch.items()})
    tf_loss, tf_stats = tf_policy.loss({k: tf.convert_to_tensor(v) for k, v in batch.items()})
    np.testing.assert_allclose(float(torch_loss.detach()), float(tf_loss), rtol=1e-5)
    for key in ("policy_loss", "vf_loss", "kl", "entropy"):
        np.testing.assert_allclose(float(torch_stats[key].detach()), float(tf_stats[key]), rtol=1e-5, atol=1e-7)


def test_same_update_from_same_batch():
    """One learn_on_batch (minibatches, Adam, grad clip) moves both to the same weights."""
    obs_space, action_space, _ = SPACES["discrete"]
    config = merge_config(DEFAULT_CONFIG, {"seed": 5, "train_batch_size": 64, "sgd_minibatch_size": 16,
                                            "num_sgd_iter": 2, "lr": 1e-3, "grad_clip": 0.5,
                                            "model": {"fcnet_hiddens": [16]}}, "PPO")
    torch_policy = PPOTorchPolicy(obs_space, action_space, config)
    tf_policy = PPOTFPolicy(obs_space, action_space, config)
    batch = _batch(torch_policy, np.random.default_rng(1))
    torch_stats = torch_policy.learn_on_batch(batch)
    tf_stats = tf_policy.learn_on_batch(batch)
    torch_weights, tf_weights = torch_policy.get_weights(), tf_policy.get_weights()
    assert torch_weights.keys() == tf_weights.keys()
    for name in torch_weights:
        np.testing.assert_allclose(torch_weights[name], tf_weights[name], rtol=1e-4, atol=1e-6, err_msg=name)
    assert torch_stats["kl_coeff"] == pytest.approx(tf_stats["kl_coeff"], rel=1e-6)
    assert torch_stats["total_loss"] == pytest.approx(tf_stats["total_loss"], rel=1e-4)
