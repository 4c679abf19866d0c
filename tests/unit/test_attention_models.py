"""Attention (GTrXL, ``model.use_attention`` and 1.13's ``GTrXLNet``): a sequence pass gives
what acting step by step gave, torch and TF compute the same outputs and learn the same
step from equal weights, PPO's loss on padded sequences is the reference on the real
steps, the 1.13 keys and their errors, and RepeatAfterMeEnv's rewards."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlstack.errors import ConfigError
from rlstack.examples.env.repeat_after_me_env import RepeatAfterMeEnv
from rlstack.models.attention import GTrXLSpec
from rlstack.policies.rnn_sequencing import SEQ_MASK, pad_batch_to_sequences
from rlstack.sample_batch import SampleBatch
from rlstack.trainers.config import merge_config
from rlstack.trainers.ppo import DEFAULT_CONFIG
from tests.unit.test_ppo_loss import numpy_ppo_loss

B = SampleBatch
OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
ACTION_SPACE = gym.spaces.Discrete(3)
MODEL = {"use_attention": True, "max_seq_len": 4, "fcnet_hiddens": [8], "attention_dim": 12,
         "attention_num_transformer_units": 2, "attention_num_heads": 2, "attention_head_dim": 5,
         "attention_memory_inference": 3, "attention_memory_training": 3, "attention_position_wise_mlp_dim": 7}
CONFIG = {"seed": 0, "entropy_coeff": 0.01, "clip_param": 0.2, "vf_clip_param": 5.0, "sgd_minibatch_size": 16,
          "num_sgd_iter": 1, "model": MODEL}
EPISODE_LENGTHS = (6, 3, 5)  # with max_seq_len 4: sequences of 4, 2, 3, 4 and 1 steps


def _policy(framework, **overrides):
    config = merge_config(DEFAULT_CONFIG, {**CONFIG, **overrides}, "PPO")
    if framework == "torch":
        pytest.importorskip("torch")
        from rlstack.trainers.ppo.ppo_torch_policy import PPOTorchPolicy

        return PPOTorchPolicy(OBS_SPACE, ACTION_SPACE, config)
    pytest.importorskip("tensorflow")
    from rlstack.trainers.ppo.ppo_tf_policy import PPOTFPolicy

    return PPOTFPolicy(OBS_SPACE, ACTION_SPACE, config)


def _perturbed(policy, seed=1):
    # Non-trivial weights (the initial heads are 0.01-scaled, biases zero).
    rng = np.random.default_rng(seed)
    weights = {key: (value + rng.normal(0, 0.3, value.shape)).astype(np.float32)
               for key, value in policy.model.canonical_weights().items()}
    policy.model.load_canonical_weights(weights)
    return weights


def _rollout(policy, seed=0):
    """Acts step by step through hand-made episodes as a worker does (state from zeros at
    each episode's start, then state_out); returns PPO's columns."""
    rng = np.random.default_rng(seed)
    rows = []
    for eps_id, length in enumerate(EPISODE_LENGTHS):
        state = policy.initial_state_batch(1)
        for _ in range(length):
            obs = rng.uniform(-1, 1, (1, 3)).astype(np.float32)
            actions, extras = policy.compute_actions(obs, explore=False, state_batches=state)
            row = {B.OBS: obs[0], B.EPS_ID: eps_id, B.ACTION_DIST_INPUTS: extras[B.ACTION_DIST_INPUTS][0],
                   B.VF_PREDS: extras[B.VF_PREDS][0]}
            row.update({f"state_in_{i}": value[0] for i, value in enumerate(state)})
            rows.append(row)
            state = [extras[f"state_out_{i}"] for i in range(len(state))]
    batch = SampleBatch({key: np.stack([row[key] for row in rows]) for key in rows[0]})
    n = batch.count
    old = batch[B.ACTION_DIST_INPUTS] + rng.normal(0, 0.5, batch[B.ACTION_DIST_INPUTS].shape).astype(np.float32)
    actions = rng.integers(0, 3, n)
    shifted = old - old.max(axis=1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    batch[B.ACTIONS] = actions
    batch[B.ACTION_DIST_INPUTS] = old.astype(np.float32)
    batch[B.ACTION_LOGP] = logp[np.arange(n), actions].astype(np.float32)
    batch[B.ADVANTAGES] = rng.normal(0, 1, n).astype(np.float32)
    batch[B.VALUE_TARGETS] = rng.normal(0, 3, n).astype(np.float32)
    return batch


def _tensors(framework, batch):
    if framework == "torch":
        import torch

        return {key: torch.from_numpy(np.ascontiguousarray(value)) for key, value in batch.items()}
    import tensorflow as tf

    return {key: tf.convert_to_tensor(value) for key, value in batch.items()}


def _numpy(value):
    return np.asarray(value.detach() if hasattr(value, "detach") else value)


@pytest.fixture(scope="module")
def acted():
    """The torch policy's perturbed weights, a batch it acted step by step, and the
    distribution inputs and values it acted with."""
    policy = _policy("torch")
    weights = _perturbed(policy)
    batch = _rollout(policy)
    states = [batch[f"state_in_{i}"] for i in range(policy.num_state_tensors())]
    _, extras = policy.compute_actions(batch[B.OBS], explore=False, state_batches=states)
    return weights, batch, extras[B.ACTION_DIST_INPUTS], extras[B.VF_PREDS]


def test_state_is_one_memory_per_unit_and_grows_step_by_step():
    policy = _policy("torch")
    initial = policy.get_initial_state()
    assert [value.shape for value in initial] == [(3, 12), (3, 12)] and not any(v.any() for v in initial)
    _, extras = policy.compute_actions(np.ones((1, 3), np.float32), state_batches=policy.initial_state_batch(1))
    memory = extras["state_out_0"][0]
    # The newest memory row is this step's input to the first unit; the older ones shift.
    assert memory[-1].any() and not memory[:-1].any()


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_ppo_loss_on_padded_sequences_is_the_reference_on_the_acted_steps(framework, acted):
    """Training's sequence pass recomputes exactly what acting produced step by step
    (memory_training == memory_inference), and padding never reaches the loss."""
    weights, batch, dist_inputs, values = acted
    policy = _policy(framework)
    policy.model.load_canonical_weights(weights)
    expected = numpy_ppo_loss(dist_inputs, values, batch, policy.config, 0.2, 0.01)
    seqs = pad_batch_to_sequences(batch, policy.max_seq_len())
    assert seqs[B.SEQ_LENS].tolist() == [4, 2, 3, 4, 1]
    loss, stats = policy.loss(_tensors(framework, seqs))
    np.testing.assert_allclose(float(_numpy(loss)), expected["total_loss"], rtol=1e-4)
    for key in ("policy_loss", "vf_loss", "kl", "entropy"):
        np.testing.assert_allclose(float(_numpy(stats[key])), expected[key], rtol=1e-4, atol=1e-6, err_msg=key)
    noisy = SampleBatch({key: value.copy() for key, value in seqs.items()})
    pad = ~seqs[SEQ_MASK].astype(bool)
    for key in (B.OBS, B.ADVANTAGES, B.VALUE_TARGETS, B.ACTION_LOGP):
        noisy[key][pad] = 7.0
    np.testing.assert_allclose(float(_numpy(policy.loss(_tensors(framework, noisy))[0])), float(_numpy(loss)),
                               rtol=1e-6)


def test_torch_and_tf_start_equal_and_learn_the_same_step(acted):
    _, batch, _, _ = acted
    pytest.importorskip("tensorflow")
    policies = {framework: _policy(framework) for framework in ("torch", "tf")}
    start = {f: p.model.canonical_weights() for f, p in policies.items()}
    for key in start["torch"]:  # the seed's weights, whatever the framework's own generator holds
        np.testing.assert_array_equal(start["torch"][key], start["tf"][key], err_msg=key)
    weights = _perturbed(policies["torch"])
    policies["tf"].model.load_canonical_weights(weights)
    for policy in policies.values():
        policy.learn_on_batch(batch)
    after = {f: p.model.canonical_weights() for f, p in policies.items()}
    assert not np.allclose(after["torch"]["unit0/query"], weights["unit0/query"])
    for key in weights:
        np.testing.assert_allclose(after["torch"][key], after["tf"][key], rtol=1e-3, atol=1e-5, err_msg=key)


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_gtrxlnet_as_a_113_custom_model(framework):
    """1.13's attention example: GTrXLNet registered as a custom model, its arguments in
    custom_model_config."""
    from rlstack.models import ModelCatalog

    if framework == "torch":
        pytest.importorskip("torch")
        from rlstack.models.torch.attention_net import GTrXLNet
    else:
        pytest.importorskip("tensorflow")
        from rlstack.models.tf.attention_net import GTrXLNet
    ModelCatalog.register_custom_model(f"attention_net_{framework}", GTrXLNet)
    model = {"custom_model": f"attention_net_{framework}", "max_seq_len": 5,
             "custom_model_config": {"num_transformer_units": 1, "attention_dim": 16, "num_heads": 2,
                                     "memory_inference": 4, "memory_training": 4, "head_dim": 8,
                                     "position_wise_mlp_dim": 16}}
    policy = _policy(framework, model=model)
    assert isinstance(policy.model, GTrXLNet) and policy.model.gtrxl_spec.num_heads == 2
    assert [value.shape for value in policy.get_initial_state()] == [(4, 16)]
    action, state, extras = policy.compute_single_action(np.zeros(3, np.float32), policy.get_initial_state())
    assert action in range(3) and [value.shape for value in state] == [(4, 16)]
    stats = policy.learn_on_batch(_rollout(policy))
    assert np.isfinite(stats["learner_stats"]["total_loss"] if "learner_stats" in stats else stats["total_loss"])


def test_unequal_memories_act_on_the_shorter_and_keep_the_longer():
    spec = GTrXLSpec(3, 2, memory_inference=2, memory_training=5)
    assert spec.memory == 5 and [v.shape for v in spec.initial_state()] == [(5, 64)]


@pytest.mark.parametrize(("model", "fragment"), [
    ({"attention_dim": 0}, "attention_dim must be an integer >= 1"),
    ({"attention_num_heads": 1.5}, "attention_num_heads must be an integer"),
    ({"attention_use_n_prev_actions": 2}, "attention_use_n_prev_actions=2 is not supported yet"),
    ({"use_lstm": True}, "choose one memory"),
])
def test_bad_attention_keys_are_config_errors(model, fragment):
    with pytest.raises(ConfigError, match=fragment):
        from rlstack.trainers.ppo import PPOTrainer

        PPOTrainer.merge_and_validate({"model": {"use_attention": True, **model}})


def test_use_attention_with_an_algorithm_without_sequences_names_the_ones_with():
    from rlstack.trainers.dqn import DQNTrainer

    with pytest.raises(ConfigError, match=r"use_attention=True is not supported by DQN yet.*PPO"):
        DQNTrainer.merge_and_validate({"model": {"use_attention": True}})


def test_repeat_after_me_rewards_the_token_of_repeat_delay_steps_ago():
    env = RepeatAfterMeEnv({"repeat_delay": 2, "episode_len": 30})
    obs, _ = env.reset(seed=3)
    seen, rewards, truncated = [obs], [], False
    while not truncated:
        # Repeat correctly except every fifth step.
        target = seen[-3] if len(seen) >= 3 else 0
        action = target if len(rewards) % 5 else 1 - target
        obs, reward, terminated, truncated, _ = env.step(action)
        assert not terminated
        seen.append(obs)
        rewards.append(reward)
    assert len(rewards) == 30 and rewards[:2] == [0.0, 0.0]
    assert rewards[2:] == [-1.0 if t % 5 == 0 else 1.0 for t in range(2, 30)]
    # Without memory (repeat the current token) a policy scores chance: ~0 per step.
    env = RepeatAfterMeEnv({"repeat_delay": 1, "episode_len": 2000})
    obs, _ = env.reset(seed=0)
    total, truncated = 0.0, False
    while not truncated:
        obs, reward, _, truncated, _ = env.step(obs)
        total += reward
    assert abs(total) < 150  # ~ +-45 for 2,000 fair coin flips; +-1999 with memory
