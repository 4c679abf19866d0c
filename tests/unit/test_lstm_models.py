"""The built-in LSTM (``model.use_lstm``): torch, TF and numpy give the same outputs and
the same PPO loss on padded sequences with equal weights; numpy acting step by step
matches the frameworks' sequence pass; padding never reaches the loss; the 1.13 keys,
their errors, and acting with state (``compute_single_action``)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlstack.errors import ConfigError
from rlstack.policies.numpy_policy import NumpyPolicy
from rlstack.policies.rnn_sequencing import SEQ_MASK, pad_batch_to_sequences
from rlstack.sample_batch import SampleBatch
from rlstack.trainers.common.config import merge_config
from rlstack.trainers.ppo import DEFAULT_CONFIG
from tests.unit.test_ppo_loss import numpy_ppo_loss
from tests.helpers.tensors import as_tensors, to_numpy

B = SampleBatch
OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
ACTION_SPACE = gym.spaces.Discrete(3)
CELL = 6
MODEL = {"use_lstm": True, "lstm_cell_size": CELL, "max_seq_len": 4, "fcnet_hiddens": [8]}
CONFIG = {"seed": 0, "entropy_coeff": 0.01, "clip_param": 0.2, "vf_clip_param": 5.0, "sgd_minibatch_size": 16,
          "num_sgd_iter": 1, "model": MODEL}
# Episodes of 6, 3 and 5 steps: with max_seq_len 4, sequences of 4, 2, 3, 4 and 1 steps.
EPISODE_LENGTHS = (6, 3, 5)


def _policy(framework, **overrides):
    config = merge_config(DEFAULT_CONFIG, {**CONFIG, **overrides}, "PPO")
    if framework == "torch":
        pytest.importorskip("torch")
        from rlstack.trainers.ppo.ppo_torch_policy import PPOTorchPolicy

        return PPOTorchPolicy(OBS_SPACE, ACTION_SPACE, config)
    if framework == "tf":
        pytest.importorskip("tensorflow")
        from rlstack.trainers.ppo.ppo_tf_policy import PPOTFPolicy

        return PPOTFPolicy(OBS_SPACE, ACTION_SPACE, config)
    return NumpyPolicy(OBS_SPACE, ACTION_SPACE, config)


def random_action(policy, rng):
    """One action of ``policy``'s action space in its form (category indices from 0)."""
    space = policy.action_space
    if isinstance(space, gym.spaces.Discrete):
        return np.array([rng.integers(space.n)])
    if isinstance(space, gym.spaces.MultiDiscrete):
        return rng.integers(0, space.nvec)[None]
    return rng.normal(0, 1, (1, *space.shape)).astype(np.float32)


def rollout(policy, seed=0, obs_size=3):
    """Steps through hand-made episodes (EPISODE_LENGTHS) with ``policy`` as a worker does:
    the state starts at the initial state for each episode and follows state_out; a model
    that reads previous actions / rewards gets them (zeros at each episode's start, then
    random actions and rewards, recorded as prev_actions / prev_rewards). Returns the rows
    with PPO's columns (an "old" policy that differs from the current one, spread
    targets). Shared with the attention and previous-input tests."""
    rng = np.random.default_rng(seed)
    rows = []
    spec = policy.prev_inputs
    for eps_id, length in enumerate(EPISODE_LENGTHS):
        state = policy.initial_state_batch(1)
        prev = spec.zeros(1) if spec is not None else {}
        for _ in range(length):
            obs = rng.uniform(-1, 1, (1, obs_size)).astype(np.float32)
            actions, extras = policy.compute_actions(obs, explore=False, state_batches=state,
                                                     prev_action_batch=prev.get(B.PREV_ACTIONS),
                                                     prev_reward_batch=prev.get(B.PREV_REWARDS))
            row = {B.OBS: obs[0], B.EPS_ID: eps_id, B.ACTION_DIST_INPUTS: extras[B.ACTION_DIST_INPUTS][0],
                   B.VF_PREDS: extras[B.VF_PREDS][0]}
            row.update({f"state_in_{i}": value[0] for i, value in enumerate(state)})
            row.update({key: value[0].copy() for key, value in prev.items()})
            rows.append(row)
            state = [extras[f"state_out_{i}"] for i in range(len(state))]
            if spec is not None:
                spec.push(prev, random_action(policy, rng), rng.normal(0, 1, 1))
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


def assert_ppo_loss_on_sequences(policy, framework, batch, dist_inputs, values):
    """PPO's loss on ``batch`` padded into sequences equals the numpy reference on the
    real steps with the outputs the policy acted with, whatever the padding holds.
    Shared with the attention tests."""
    expected = numpy_ppo_loss(dist_inputs, values, batch, policy.config, 0.2, 0.01)
    seqs = pad_batch_to_sequences(batch, policy.max_seq_len())
    assert seqs[B.SEQ_LENS].tolist() == [4, 2, 3, 4, 1]
    loss, stats = policy.loss(as_tensors(framework, seqs))
    np.testing.assert_allclose(float(to_numpy(loss)), expected["total_loss"], rtol=1e-4)
    for key in ("policy_loss", "vf_loss", "kl", "entropy"):
        np.testing.assert_allclose(float(to_numpy(stats[key])), expected[key], rtol=1e-4, atol=1e-6, err_msg=key)
    noisy = SampleBatch({key: value.copy() for key, value in seqs.items()})
    pad = ~seqs[SEQ_MASK].astype(bool)
    for key in (B.OBS, B.ADVANTAGES, B.VALUE_TARGETS, B.ACTION_LOGP):
        noisy[key][pad] = 7.0
    np.testing.assert_allclose(float(to_numpy(policy.loss(as_tensors(framework, noisy))[0])), float(to_numpy(loss)),
                               rtol=1e-6)


@pytest.fixture(scope="module")
def stepped():
    """A numpy policy with non-trivial weights, and its step-by-step outputs per row."""
    policy = _policy("numpy")
    rng = np.random.default_rng(1)
    weights = {key: (value + rng.normal(0, 0.3, value.shape)).astype(np.float32)
               for key, value in policy.get_weights().items()}
    policy.set_weights(weights)
    batch = rollout(policy)
    _, extras = policy.compute_actions(batch[B.OBS], explore=False,
                                       state_batches=[batch["state_in_0"], batch["state_in_1"]])
    return weights, batch, extras[B.ACTION_DIST_INPUTS], extras[B.VF_PREDS]


def test_the_spec_keeps_one_weight_layout_with_the_lstm_between_encoder_and_heads():
    weights = _policy("numpy").get_weights()
    assert weights["lstm/kernel"].shape == (8, 4 * CELL)
    assert weights["lstm/recurrent_kernel"].shape == (CELL, 4 * CELL)
    assert weights["lstm/bias"].shape == (4 * CELL,)
    # The forget gate starts open (1.0), the other biases at zero.
    assert weights["lstm/bias"][CELL : 2 * CELL].tolist() == [1.0] * CELL
    assert weights["logits/kernel"].shape == (CELL, 3) and weights["value_out/kernel"].shape == (CELL, 1)
    assert not any(key.startswith("vf_") for key in weights)  # both heads read the LSTM


@pytest.mark.parametrize("framework", ["torch", "tf", "numpy"])
def test_initial_state_is_zeros_h_and_c(framework):
    state = _policy(framework).get_initial_state()
    assert [value.shape for value in state] == [(CELL,), (CELL,)]
    assert all(not value.any() for value in state)


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_framework_sequence_pass_matches_numpy_acting_step_by_step(framework, stepped):
    weights, batch, dist_inputs, values = stepped
    policy = _policy(framework)
    policy.set_weights(weights)
    seqs = pad_batch_to_sequences(batch, policy.max_seq_len())
    rows, _ = policy.unroll(as_tensors(framework, seqs))
    out, out_values = (to_numpy(x) for x in policy.model_outputs(rows))
    real = seqs[SEQ_MASK].reshape(-1).astype(bool)
    # The sequences start from their first step's state_in: same outputs as acting.
    np.testing.assert_allclose(out[real], dist_inputs, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(out_values[real], values, rtol=1e-4, atol=1e-5)
    # Weights come back in the same canonical layout.
    for key, value in policy.get_weights().items():
        np.testing.assert_array_equal(value, weights[key], err_msg=key)


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_ppo_loss_on_padded_sequences_is_the_reference_on_the_real_steps(framework, stepped):
    weights, batch, dist_inputs, values = stepped
    policy = _policy(framework)
    policy.set_weights(weights)
    assert_ppo_loss_on_sequences(policy, framework, batch, dist_inputs, values)


def test_torch_and_tf_learn_the_same_step_on_sequences(stepped):
    weights, batch, _, _ = stepped
    policies = {framework: _policy(framework) for framework in ("torch", "tf")}
    for policy in policies.values():
        policy.set_weights(weights)
        policy.learn_on_batch(batch)
    torch_weights, tf_weights = (policies[f].get_weights() for f in ("torch", "tf"))
    assert not np.allclose(torch_weights["lstm/kernel"], weights["lstm/kernel"])
    for key in weights:
        np.testing.assert_allclose(torch_weights[key], tf_weights[key], rtol=1e-3, atol=1e-5, err_msg=key)


def test_minibatches_are_whole_sequences_sized_in_rows():
    policy = _policy("numpy", sgd_minibatch_size=40)
    # 40 rows of max_seq_len 4: 10 sequences per minibatch.
    assert policy.minibatch_plan(25) == (10, 1)


@pytest.mark.parametrize(("key", "value", "fragment"), [
    ("max_seq_len", 0, "max_seq_len must be an integer >= 1"),
    ("lstm_cell_size", -3, "lstm_cell_size must be an integer >= 1"),
    ("lstm_use_prev_action", 1, "lstm_use_prev_action must be True or False"),
    ("lstm_use_prev_reward", "yes", "lstm_use_prev_reward must be True or False"),
])
def test_bad_lstm_keys_are_config_errors(key, value, fragment):
    with pytest.raises(ConfigError, match=fragment):
        _policy("numpy", model={**MODEL, key: value})


@pytest.mark.parametrize("algorithm", ["DQN", "APEX", "SAC", "DDPG", "TD3"])
def test_use_lstm_with_an_algorithm_without_sequences_names_the_ones_with(algorithm):
    from rlstack.trainers.common.registry import get_trainer_class

    with pytest.raises(ConfigError, match=rf"use_lstm=True is not supported by {algorithm} yet.*A2C, A3C, IMPALA, PG, PPO"):
        get_trainer_class(algorithm).merge_and_validate({"model": {"use_lstm": True}})


def test_compute_single_action_carries_the_state_and_checks_it():
    policy = _policy("numpy")
    obs = np.array([0.1, -0.2, 0.3], np.float32)
    action, state_out, info = policy.compute_single_action(obs, state=policy.get_initial_state(), explore=False)
    assert [value.shape for value in state_out] == [(CELL,), (CELL,)] and state_out[0].any()
    assert "state_out_0" not in info and "vf_preds" in info
    # Feeding state_out back changes the next outputs (the model remembers).
    _, again, info2 = policy.compute_single_action(obs, state=state_out, explore=False)
    assert not np.allclose(info2[B.ACTION_DIST_INPUTS], info[B.ACTION_DIST_INPUTS])
    with pytest.raises(ValueError, match="has 1 tensors but this policy's model has 2"):
        policy.compute_single_action(obs, state=[state_out[0]])
    with pytest.raises(ValueError, match=r"tensor 1 has shape \(4,\); the model expects \(6,\)"):
        policy.compute_single_action(obs, state=[state_out[0], np.zeros(4)])
    with pytest.raises(ValueError, match="must be a list of 2 arrays"):
        policy.compute_single_action(obs, state=np.zeros(CELL))


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_get_model_v2_with_use_lstm_builds_the_lstm_model_and_fcnet_ignores_the_key(framework):
    pytest.importorskip({"torch": "torch", "tf": "tensorflow"}[framework])
    from rlstack.models.catalog import ModelCatalog

    model = ModelCatalog.get_model_v2(OBS_SPACE, ACTION_SPACE, 3, MODEL, framework=framework)
    assert [tuple(np.shape(value)) for value in model.get_initial_state()] == [(CELL,), (CELL,)]
    # A custom model that wraps the built-in FullyConnectedNetwork passes its own config
    # (use_lstm included) along; the dense network ignores the key, as in 1.13.
    if framework == "torch":
        from rlstack.models.torch.fcnet import FullyConnectedNetwork
    else:
        from rlstack.models.tf.fcnet import FullyConnectedNetwork
    dense = FullyConnectedNetwork(OBS_SPACE, ACTION_SPACE, 3, {**DEFAULT_CONFIG["model"], **MODEL}, "inner")
    assert dense.get_initial_state() == []


def test_export_model_refuses_a_recurrent_model_naming_what_to_use(tmp_path):
    policy = _policy("torch")
    with pytest.raises(NotImplementedError, match="compute_single_action"):
        policy.export_model(str(tmp_path))
    # The checkpoint export holds the LSTM's weights.
    state = dict(np.load(policy.export_checkpoint(str(tmp_path))))
    assert "weights/lstm/kernel" in state


def _a3c_policy(framework, **overrides):
    from rlstack.trainers.a3c import DEFAULT_CONFIG as A3C_DEFAULT_CONFIG

    config = merge_config(A3C_DEFAULT_CONFIG, {"seed": 0, "entropy_coeff": 0.01, "model": MODEL, **overrides}, "A3C")
    if framework == "torch":
        pytest.importorskip("torch")
        from rlstack.trainers.a3c.a3c_torch_policy import A3CTorchPolicy

        return A3CTorchPolicy(OBS_SPACE, ACTION_SPACE, config)
    pytest.importorskip("tensorflow")
    from rlstack.trainers.a3c.a3c_tf_policy import A3CTFPolicy

    return A3CTFPolicy(OBS_SPACE, ACTION_SPACE, config)


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_a3c_loss_on_padded_sequences_sums_over_the_real_steps(framework, stepped):
    weights, batch, dist_inputs, values = stepped
    policy = _a3c_policy(framework)
    policy.set_weights(weights)
    logits = np.asarray(dist_inputs, np.float64)
    logp_all = logits - logits.max(1, keepdims=True)
    logp_all -= np.log(np.exp(logp_all).sum(1, keepdims=True))
    logp = logp_all[np.arange(batch.count), batch[B.ACTIONS]]
    # L = -sum(logp A) + vf_loss_coeff 0.5 sum((V - V_target)^2) - entropy_coeff sum(H)
    pi_err = -np.sum(logp * batch[B.ADVANTAGES])
    value_err = 0.5 * np.sum((np.asarray(values, np.float64) - batch[B.VALUE_TARGETS]) ** 2)
    entropy = -np.sum(np.exp(logp_all) * logp_all)
    expected = pi_err + policy.config["vf_loss_coeff"] * value_err - 0.01 * entropy
    seqs = pad_batch_to_sequences(batch, policy.max_seq_len())
    loss, stats = policy.loss(as_tensors(framework, seqs))
    np.testing.assert_allclose(float(to_numpy(loss)), expected, rtol=1e-4)
    np.testing.assert_allclose(float(to_numpy(stats["entropy"])), entropy / batch.count, rtol=1e-4)


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_a3c_gradients_over_sequence_microbatches_equal_the_whole_batch(framework, stepped):
    weights, batch, _, _ = stepped
    whole, parts = _a3c_policy(framework), _a3c_policy(framework, microbatch_size=8)
    for policy in (whole, parts):
        policy.set_weights(weights)
    grads_whole, _ = whole.compute_gradients(batch)
    grads_parts, _ = parts.compute_gradients(batch)  # 2 sequences of max_seq_len 4 at a time
    for a, b in zip(grads_whole, grads_parts):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
