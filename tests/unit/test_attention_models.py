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
from rlstack.sample_batch import SampleBatch
from rlstack.trainers.common.config import merge_config
from rlstack.trainers.ppo import DEFAULT_CONFIG
from tests.unit.test_lstm_models import assert_ppo_loss_on_sequences, rollout

B = SampleBatch
OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
ACTION_SPACE = gym.spaces.Discrete(3)
MODEL = {"use_attention": True, "max_seq_len": 4, "fcnet_hiddens": [8], "attention_dim": 12,
         "attention_num_transformer_units": 2, "attention_num_heads": 2, "attention_head_dim": 5,
         "attention_memory_inference": 3, "attention_memory_training": 3, "attention_position_wise_mlp_dim": 7}
CONFIG = {"seed": 0, "entropy_coeff": 0.01, "clip_param": 0.2, "vf_clip_param": 5.0, "sgd_minibatch_size": 16,
          "num_sgd_iter": 1, "model": MODEL}


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


@pytest.fixture(scope="module")
def acted():
    """The torch policy's perturbed weights, a batch it acted step by step, and the
    distribution inputs and values it acted with."""
    policy = _policy("torch")
    weights = _perturbed(policy)
    batch = rollout(policy)
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
    assert_ppo_loss_on_sequences(policy, framework, batch, dist_inputs, values)


def gradients_by_name(policy, batch):
    """``compute_gradients`` of a GTrXL policy under the weights' canonical names (the
    frameworks order and name their variables differently)."""
    grads, _ = policy.compute_gradients(batch)
    names = list(policy.model.canonical_weights())
    if policy.framework == "torch":
        order = [name.removeprefix("gtrxl_weights.").replace("__", "/") for name, _ in policy.model.named_parameters()]
    else:
        by_tf_name = {name.replace("/", "_") + ":0": name for name in names}
        order = [by_tf_name[name] for name in policy.variable_names]
    return dict(zip(order, grads))


def assert_same_gradients(policies, batch):
    """Torch and TF compute the same gradients of the loss on ``batch`` (sequences). The
    gradients rather than the weights after an Adam step: Adam's first steps are about
    lr * sign(g), so an element whose gradient is ~0 moves by float rounding."""
    grads = {framework: gradients_by_name(policy, batch) for framework, policy in policies.items()}
    assert set(grads["torch"]) == set(grads["tf"]) == set(policies["torch"].model.canonical_weights())
    scale = max(float(np.abs(g).max()) for g in grads["torch"].values())
    for key, value in grads["torch"].items():
        np.testing.assert_allclose(value, grads["tf"][key], rtol=1e-3, atol=1e-5 * scale, err_msg=key)
    assert np.abs(grads["torch"]["unit0/query"]).max() > 1e-3 * scale  # the attention itself learns


def test_torch_and_tf_start_equal_and_learn_the_same_step(acted):
    _, batch, _, _ = acted
    pytest.importorskip("tensorflow")
    policies = {framework: _policy(framework) for framework in ("torch", "tf")}
    start = {f: p.model.canonical_weights() for f, p in policies.items()}
    for key in start["torch"]:  # the seed's weights, whatever the framework's own generator holds
        np.testing.assert_array_equal(start["torch"][key], start["tf"][key], err_msg=key)
    weights = _perturbed(policies["torch"])
    policies["tf"].model.load_canonical_weights(weights)
    assert_same_gradients(policies, batch)
    for policy in policies.values():
        policy.learn_on_batch(batch)
        assert not np.allclose(policy.model.canonical_weights()["unit0/query"], weights["unit0/query"])


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
    stats = policy.learn_on_batch(rollout(policy))
    assert np.isfinite(stats["learner_stats"]["total_loss"] if "learner_stats" in stats else stats["total_loss"])


def test_unequal_memories_act_on_the_shorter_and_keep_the_longer():
    spec = GTrXLSpec(3, 2, memory_inference=2, memory_training=5)
    assert spec.memory == 5 and [v.shape for v in spec.initial_state()] == [(5, 64)]


@pytest.mark.parametrize(("model", "fragment"), [
    ({"attention_dim": 0}, "attention_dim must be an integer >= 1"),
    ({"attention_num_heads": 1.5}, "attention_num_heads must be an integer"),
    ({"attention_use_n_prev_actions": -1}, "attention_use_n_prev_actions must be an integer >= 0"),
    ({"attention_use_n_prev_rewards": 1.0}, "attention_use_n_prev_rewards must be an integer >= 0"),
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
