"""Models and batches shared by the closed-form PPO gradient tests (torch and TF).

Each case is a model shape the fused path takes; each batch reaches every branch of the
loss: ratios clipped on both sides of the advantage, value errors beyond vf_clip_param.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from rlstack.sample_batch import SampleBatch
from rlstack.trainers.config import merge_config
from rlstack.trainers.ppo import DEFAULT_CONFIG

B = SampleBatch
OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (5,), np.float32)

CASES = {
    "defaults (separate 256x256 tanh value net)": {},
    "shared relu trunk, entropy, tight clips": {
        "model": {"fcnet_hiddens": [32, 16], "fcnet_activation": "relu", "vf_share_layers": True},
        "entropy_coeff": 0.05, "clip_param": 0.05, "vf_clip_param": 0.5},
    "linear layers, post_fcnet, grad_clip": {
        "model": {"fcnet_hiddens": [16], "fcnet_activation": "linear", "post_fcnet_hiddens": [8]},
        "grad_clip": 0.01},
    "no hidden layers, shared": {"model": {"fcnet_hiddens": [], "vf_share_layers": True}},
}


def make_policy(policy_class, overrides, num_actions=3, seed=0, **kwargs):
    """A PPO policy of ``policy_class`` on OBS_SPACE with minibatches of 32 rows."""
    config = merge_config(DEFAULT_CONFIG, {"seed": seed, "train_batch_size": 96, "sgd_minibatch_size": 32,
                                           "num_sgd_iter": 3, **overrides}, "PPO")
    return policy_class(OBS_SPACE, gym.spaces.Discrete(num_actions), config, **kwargs)


def ppo_batch(policy, n=96, seed=0):
    """A batch whose old logits are far enough from the policy's current ones that
    ratios leave the clip range on both sides, with value targets spread beyond
    vf_clip_param."""
    rng = np.random.default_rng(seed)
    obs = rng.uniform(-1, 1, (n, OBS_SPACE.shape[0])).astype(np.float32)
    _, extras = policy.compute_actions(obs, explore=False)
    old_inputs = (extras[B.ACTION_DIST_INPUTS] + rng.normal(0, 1.0, extras[B.ACTION_DIST_INPUTS].shape))
    old_inputs = old_inputs.astype(np.float32)
    actions = rng.integers(0, old_inputs.shape[1], n)
    shifted = old_inputs - old_inputs.max(1, keepdims=True)
    old_logp = (shifted - np.log(np.exp(shifted).sum(1, keepdims=True)))[np.arange(n), actions]
    return SampleBatch({
        B.OBS: obs, B.ACTIONS: actions, B.ACTION_LOGP: old_logp.astype(np.float32),
        B.ACTION_DIST_INPUTS: old_inputs,
        B.ADVANTAGES: rng.normal(0, 1, n).astype(np.float32),
        B.VALUE_TARGETS: rng.normal(0, 3, n).astype(np.float32),
    })


def check_non_finite_target_stops_the_update(policy):
    """A NaN value target: learn_on_batch raises NonFiniteError naming vf_loss, and no
    weight changed."""
    import pytest

    from rlstack.errors import NonFiniteError

    batch = ppo_batch(policy)
    batch[B.VALUE_TARGETS][5] = np.nan
    before = policy.get_weights()
    with pytest.raises(NonFiniteError, match="vf_loss"):
        policy.learn_on_batch(batch)
    for name, value in policy.get_weights().items():
        np.testing.assert_array_equal(value, before[name])


def check_value_layers_stay_without_a_critic(policy):
    """One update of a ``use_critic=False`` policy changes policy layers only."""
    before = policy.get_weights()
    policy.learn_on_batch(ppo_batch(policy))
    after = policy.get_weights()
    changed = {name for name in before if not np.array_equal(before[name], after[name])}
    assert changed and all(not name.startswith(("value_", "vf_")) for name in changed), changed
    assert any(name.startswith(("value_", "vf_")) for name in before)
