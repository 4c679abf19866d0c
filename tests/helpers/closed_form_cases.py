"""Models and batches shared by the closed-form PPO gradient tests (torch and TF).

Each case is a model shape the closed form takes; each batch reaches every branch of the
loss: ratios clipped on both sides of the advantage, value errors beyond vf_clip_param.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from rlstack.sample_batch import SampleBatch
from rlstack.trainers.common.config import merge_config
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
    # Box actions: a diagonal Gaussian over [means, log stds].
    "box actions, defaults": {"_box": True},
    "box actions, shared relu trunk, entropy, KL, grad_clip": {
        "_box": True, "model": {"fcnet_hiddens": [32, 16], "fcnet_activation": "relu", "vf_share_layers": True},
        "entropy_coeff": 0.05, "kl_coeff": 0.7, "grad_clip": 0.05},
}
BOX_SPACE = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)


def make_policy(policy_class, overrides, num_actions=3, seed=0, **kwargs):
    """A PPO policy of ``policy_class`` on OBS_SPACE with minibatches of 32 rows (Box
    actions where ``overrides`` has ``"_box": True``)."""
    overrides = dict(overrides)
    action_space = BOX_SPACE if overrides.pop("_box", False) else gym.spaces.Discrete(num_actions)
    config = merge_config(DEFAULT_CONFIG, {"seed": seed, "train_batch_size": 96, "sgd_minibatch_size": 32,
                                           "num_sgd_iter": 3, **overrides}, "PPO")
    return policy_class(OBS_SPACE, action_space, config, **kwargs)


def logp(dist_inputs, actions, box):
    """Log-probabilities of ``actions`` under categorical logits or Gaussian
    ``[means, log stds]`` (float64 numpy)."""
    dist_inputs = np.asarray(dist_inputs, np.float64)
    if box:
        mean, log_std = np.split(dist_inputs, 2, axis=1)
        z = (np.asarray(actions, np.float64) - mean) / np.exp(log_std)
        return (-0.5 * z * z - log_std - 0.5 * np.log(2 * np.pi)).sum(1)
    shifted = dist_inputs - dist_inputs.max(1, keepdims=True)
    logp_all = shifted - np.log(np.exp(shifted).sum(1, keepdims=True))
    return logp_all[np.arange(len(actions)), actions]


def ppo_batch(policy, n=96, seed=0):
    """A batch whose old distribution inputs are far enough from the policy's current
    ones that ratios leave the clip range on both sides, with value targets spread beyond
    vf_clip_param."""
    rng = np.random.default_rng(seed)
    box = isinstance(policy.action_space, gym.spaces.Box)
    obs = rng.uniform(-1, 1, (n, OBS_SPACE.shape[0])).astype(np.float32)
    _, extras = policy.compute_actions(obs, explore=False)
    shape = extras[B.ACTION_DIST_INPUTS].shape
    old_inputs = (extras[B.ACTION_DIST_INPUTS] + rng.normal(0, 0.5 if box else 1.0, shape)).astype(np.float32)
    if box:
        mean, log_std = np.split(old_inputs, 2, axis=1)
        actions = (mean + np.exp(log_std) * rng.normal(size=mean.shape)).astype(np.float32)
    else:
        actions = rng.integers(0, old_inputs.shape[1], n)
    return SampleBatch({
        B.OBS: obs, B.ACTIONS: actions, B.ACTION_LOGP: logp(old_inputs, actions, box).astype(np.float32),
        B.ACTION_DIST_INPUTS: old_inputs,
        B.ADVANTAGES: rng.normal(0, 1, n).astype(np.float32),
        B.VALUE_TARGETS: rng.normal(0, 3, n).astype(np.float32),
    })


def check_every_branch_is_hit(policy, dist_inputs, values, batch):
    """The batch reaches every branch of the loss for the policy's current outputs
    (numpy ``dist_inputs`` and ``values``): ratios clipped on both sides, value errors
    beyond the clip."""
    box = isinstance(policy.action_space, gym.spaces.Box)
    ratio = np.exp(logp(dist_inputs, batch[B.ACTIONS], box) - batch[B.ACTION_LOGP])
    eps = policy.config["clip_param"]
    assert (ratio > 1 + eps).any() and (ratio < 1 - eps).any()
    assert ((np.asarray(values) - batch[B.VALUE_TARGETS]) ** 2 > policy.config["vf_clip_param"]).any()


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


def check_closed_form_learning_matches_autograd(policy_class, overrides, **kwargs):
    """Three batches of learning (with a set_weights between the first and second)
    give the same statistics, weights and optimizer state with ``use_closed_form`` on as
    with it off (autograd / the GradientTape)."""
    import pytest

    closed_form, reference = make_policy(policy_class, overrides, **kwargs), make_policy(policy_class, overrides, **kwargs)
    reference.use_closed_form = False
    for seed in range(3):
        if seed == 1:
            # Loading weights writes into torch's stacked twin-network tensors in place.
            weights = make_policy(policy_class, overrides, seed=7).get_weights()
            closed_form.set_weights(weights)
            reference.set_weights(weights)
        batch = ppo_batch(closed_form, seed=seed)
        closed_form_stats, reference_stats = closed_form.learn_on_batch(batch), reference.learn_on_batch(batch)
        for key in reference_stats:
            assert closed_form_stats[key] == pytest.approx(reference_stats[key], rel=1e-4, abs=1e-6), key
    closed_form_weights, reference_weights = closed_form.get_weights(), reference.get_weights()
    for name in reference_weights:
        np.testing.assert_allclose(closed_form_weights[name], reference_weights[name], rtol=1e-4, atol=1e-6, err_msg=name)
    closed_form_state, reference_state = closed_form.get_state(), reference.get_state()
    for key in reference_state:
        if key.startswith("optimizer/"):
            np.testing.assert_allclose(closed_form_state[key], reference_state[key], rtol=1e-3, atol=1e-7, err_msg=key)
