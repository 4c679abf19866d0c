"""Previous actions and rewards as model inputs (1.13's ``lstm_use_prev_action`` /
``lstm_use_prev_reward``, ``attention_use_n_prev_actions`` / ``_rewards``): the encoding,
the weights' extra input rows, numpy / torch / TF parity of the LSTM and torch / TF
parity of the GTrXL reading them, the loss on padded sequences, the algorithms that
train on sequences, and ``compute_single_action`` with them and its errors."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlstack.models.attention import GTrXLSpec
from rlstack.models.prev_inputs import NUMPY_OPS, PrevInputsSpec, with_prev_inputs
from rlstack.policies.numpy_policy import NumpyPolicy
from rlstack.policies.rnn_sequencing import SEQ_MASK, pad_batch_to_sequences
from rlstack.sample_batch import SampleBatch
from rlstack.trainers.common.config import merge_config
from tests.helpers.tensors import as_tensors, to_numpy
from tests.unit.test_attention_models import MODEL as ATTENTION_MODEL
from tests.unit.test_attention_models import _perturbed, assert_same_gradients
from tests.unit.test_lstm_models import (CONFIG, MODEL, OBS_SPACE, assert_ppo_loss_on_sequences,
                                         rollout)

B = SampleBatch
PREV = {"lstm_use_prev_action": True, "lstm_use_prev_reward": True}
SPACES = {"discrete": gym.spaces.Discrete(3), "multi_discrete": gym.spaces.MultiDiscrete([2, 3]),
          "box": gym.spaces.Box(-1.0, 1.0, (2,), np.float32)}
ALGORITHMS = {
    "PPO": ("ppo", "ppo_torch_policy:PPOTorchPolicy", "ppo_tf_policy:PPOTFPolicy"),
    "A3C": ("a3c", "a3c_torch_policy:A3CTorchPolicy", "a3c_tf_policy:A3CTFPolicy"),
    "IMPALA": ("impala", "impala_torch_policy:ImpalaTorchPolicy", "impala_tf_policy:ImpalaTFPolicy"),
}


def _policy(framework, action_space=SPACES["discrete"], algorithm="PPO", model=None, **overrides):
    import importlib

    folder, torch_class, tf_class = ALGORITHMS[algorithm]
    defaults = importlib.import_module(f"rlstack.trainers.{folder}").DEFAULT_CONFIG
    config = {**CONFIG, "model": {**MODEL, **PREV} if model is None else model, **overrides}
    if algorithm != "PPO":
        config = {key: value for key, value in config.items()
                  if key not in ("clip_param", "vf_clip_param", "sgd_minibatch_size", "num_sgd_iter")}
    config = merge_config(defaults, {**config, "rollout_fragment_length": 7}, algorithm)
    if framework == "numpy":
        return NumpyPolicy(OBS_SPACE, action_space, config)
    pytest.importorskip({"torch": "torch", "tf": "tensorflow"}[framework])
    module, name = (torch_class if framework == "torch" else tf_class).split(":")
    return getattr(importlib.import_module(f"rlstack.trainers.{folder}.{module}"), name)(OBS_SPACE, action_space,
                                                                                           config)


def _perturb(policy, seed=1):
    rng = np.random.default_rng(seed)
    weights = {key: (value + rng.normal(0, 0.3, value.shape)).astype(np.float32)
               for key, value in policy.get_weights().items()}
    policy.set_weights(weights)
    return weights


def _act_on_rows(policy, batch):
    """Each row's outputs as the policy computes them from the row's recorded inputs."""
    _, extras = policy.compute_actions(batch[B.OBS], explore=False,
                                       state_batches=[batch["state_in_0"], batch["state_in_1"]],
                                       prev_action_batch=batch.get(B.PREV_ACTIONS),
                                       prev_reward_batch=batch.get(B.PREV_REWARDS))
    return extras[B.ACTION_DIST_INPUTS], extras[B.VF_PREDS]


def _stepped(space):
    # A numpy LSTM policy reading both, with non-trivial weights; a batch it acted step by
    # step (prev_actions / prev_rewards recorded) and its outputs per row.
    policy = _policy("numpy", SPACES[space])
    weights = _perturb(policy)
    batch = rollout(policy)
    return space, weights, batch, *_act_on_rows(policy, batch)


@pytest.fixture(scope="module", params=list(SPACES))
def stepped_any(request):
    """:func:`_stepped` for each action space."""
    return _stepped(request.param)


@pytest.fixture(scope="module")
def stepped():
    """:func:`_stepped` for Discrete actions (the numpy PPO reference is categorical)."""
    return _stepped("discrete")


def test_the_encoding_is_one_hot_per_component_then_flat_floats_then_rewards():
    features = np.ones((2, 1), np.float32)
    discrete = PrevInputsSpec.for_action_space(SPACES["discrete"], 1, 1, window=False)
    out = with_prev_inputs(discrete, features, {B.PREV_ACTIONS: np.array([2, 0]), B.PREV_REWARDS: np.array([0.5, -1])},
                           NUMPY_OPS)
    np.testing.assert_array_equal(out, [[1, 0, 0, 1, 0.5], [1, 1, 0, 0, -1]])
    multi = PrevInputsSpec.for_action_space(SPACES["multi_discrete"], 2, 0, window=True)
    # The last 2 actions, oldest first, each one-hot per component ([2] + [3] entries).
    out = with_prev_inputs(multi, features, {B.PREV_ACTIONS: np.array([[[1, 2], [0, 0]], [[0, 1], [1, 0]]])},
                           NUMPY_OPS)
    np.testing.assert_array_equal(out, [[1, 0, 1, 0, 0, 1, 1, 0, 1, 0, 0], [1, 1, 0, 0, 1, 0, 0, 1, 1, 0, 0]])
    box = PrevInputsSpec.for_action_space(SPACES["box"], 1, 2, window=True)
    out = with_prev_inputs(box, features, {B.PREV_ACTIONS: np.array([[[0.1, 0.2]], [[0.3, 0.4]]]),
                                           B.PREV_REWARDS: np.array([[1.0, 2.0], [3.0, 4.0]])}, NUMPY_OPS)
    np.testing.assert_allclose(out, [[1, 0.1, 0.2, 1, 2], [1, 0.3, 0.4, 3, 4]])
    assert (discrete.size, multi.size, box.size) == (4, 10, 4)


def test_the_window_shifts_oldest_first_and_zeros_start_each_episode():
    spec = PrevInputsSpec.for_action_space(SPACES["discrete"], 3, 2, window=True)
    prev = spec.zeros(2)
    assert prev[B.PREV_ACTIONS].shape == (2, 3) and prev[B.PREV_REWARDS].shape == (2, 2)
    spec.push(prev, np.array([1, 2]), np.array([0.5, 1.5]))
    spec.push(prev, np.array([2, 1]), np.array([-1.0, 2.0]))
    np.testing.assert_array_equal(prev[B.PREV_ACTIONS], [[0, 1, 2], [0, 2, 1]])
    np.testing.assert_array_equal(prev[B.PREV_REWARDS], [[0.5, -1.0], [1.5, 2.0]])


@pytest.mark.parametrize("space", list(SPACES))
def test_the_lstm_and_the_gtrxl_read_more_input_rows(space):
    features, cell = MODEL["fcnet_hiddens"][-1], MODEL["lstm_cell_size"]
    extra = {"discrete": 3, "multi_discrete": 5, "box": 2}[space]
    weights = _policy("numpy", SPACES[space]).get_weights()
    assert weights["lstm/kernel"].shape == (features + extra + 1, 4 * cell)  # [features, action, reward]
    gtrxl = GTrXLSpec.from_model_config(3, 4, {**ATTENTION_MODEL, "attention_use_n_prev_actions": 2,
                                               "attention_use_n_prev_rewards": 3}, SPACES[space])
    assert gtrxl.weight_shapes()["embed/kernel"] == (features + 2 * extra + 3, ATTENTION_MODEL["attention_dim"])


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_framework_sequence_pass_matches_numpy_acting_with_prev_inputs(framework, stepped_any):
    space, weights, batch, dist_inputs, values = stepped_any
    policy = _policy(framework, SPACES[space])
    policy.set_weights(weights)
    seqs = pad_batch_to_sequences(batch, policy.max_seq_len())
    assert seqs[B.PREV_ACTIONS].shape[:2] == seqs[B.OBS].shape[:2] and B.PREV_REWARDS in policy.learner_columns(seqs)
    rows, _ = policy.unroll(as_tensors(framework, seqs))
    out, out_values = (to_numpy(x) for x in policy.model_outputs(rows))
    real = seqs[SEQ_MASK].reshape(-1).astype(bool)
    np.testing.assert_allclose(out[real], dist_inputs, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(out_values[real], values, rtol=1e-4, atol=1e-5)
    # The model does read them: other previous actions / rewards give other outputs.
    shuffled = SampleBatch({**batch, B.PREV_ACTIONS: batch[B.PREV_ACTIONS][::-1].copy(),
                            B.PREV_REWARDS: batch[B.PREV_REWARDS][::-1].copy()})
    assert not np.allclose(_act_on_rows(policy, shuffled)[0], dist_inputs, atol=1e-3)


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_ppo_loss_with_prev_inputs_on_padded_sequences_is_the_reference(framework, stepped):
    _, weights, batch, dist_inputs, values = stepped
    policy = _policy(framework)
    policy.set_weights(weights)
    assert_ppo_loss_on_sequences(policy, framework, batch, dist_inputs, values)


@pytest.mark.parametrize("algorithm", list(ALGORITHMS))
def test_torch_and_tf_learn_the_same_step_and_train_the_prev_input_rows(algorithm, stepped):
    _, weights, batch, _, _ = stepped
    batch = SampleBatch(dict(batch))
    rng = np.random.default_rng(3)
    batch[B.REWARDS] = rng.normal(0, 1, batch.count).astype(np.float32)
    for key in (B.TERMINATEDS, B.TRUNCATEDS):
        batch[key] = np.zeros(batch.count, bool)
    batch[B.BOOTSTRAP_VALUE] = np.zeros(batch.count, np.float32)
    after = {}
    for framework in ("torch", "tf"):
        policy = _policy(framework, algorithm=algorithm)
        policy.set_weights(weights)
        policy.learn_on_batch(batch)
        after[framework] = policy.get_weights()["lstm/kernel"]
    # The kernel's last rows are the previous action's one-hot and the reward: they learn.
    features = MODEL["fcnet_hiddens"][-1]
    assert not np.allclose(after["torch"][features:], weights["lstm/kernel"][features:])
    np.testing.assert_allclose(after["torch"], after["tf"], rtol=1e-3, atol=1e-5)


@pytest.fixture(scope="module")
def attention_acted():
    """A torch GTrXL reading the last 2 actions and 3 rewards, perturbed; a batch it acted
    step by step with those windows, and its outputs."""
    from tests.unit.test_attention_models import _policy as attention_policy

    model = {**ATTENTION_MODEL, "attention_use_n_prev_actions": 2, "attention_use_n_prev_rewards": 3}
    policy = attention_policy("torch", model=model)
    weights = _perturbed(policy)
    batch = rollout(policy)
    states = [batch[f"state_in_{i}"] for i in range(policy.num_state_tensors())]
    _, extras = policy.compute_actions(batch[B.OBS], explore=False, state_batches=states,
                                       prev_action_batch=batch[B.PREV_ACTIONS], prev_reward_batch=batch[B.PREV_REWARDS])
    return model, weights, batch, extras[B.ACTION_DIST_INPUTS], extras[B.VF_PREDS]


def test_gtrxl_windows_torch_and_tf_give_the_acted_loss_and_the_same_gradients(attention_acted):
    from tests.unit.test_attention_models import _policy as attention_policy

    model, weights, batch, dist_inputs, values = attention_acted
    assert batch[B.PREV_ACTIONS].shape == (batch.count, 2) and batch[B.PREV_REWARDS].shape == (batch.count, 3)
    policies = {framework: attention_policy(framework, model=model) for framework in ("torch", "tf")}
    for framework, policy in policies.items():
        policy.model.load_canonical_weights(weights)
        assert_ppo_loss_on_sequences(policy, framework, batch, dist_inputs, values)
    assert_same_gradients(policies, batch)
    # Without the windows the outputs differ: the GTrXL reads them.
    _, extras = policies["tf"].compute_actions(batch[B.OBS], explore=False,
                                               state_batches=[batch[f"state_in_{i}"] for i in range(2)])
    assert not np.allclose(extras[B.ACTION_DIST_INPUTS], dist_inputs, atol=1e-3)


@pytest.mark.parametrize("framework", ["torch", "tf", "numpy"])
def test_compute_single_action_reads_prev_action_and_reward(framework):
    policy = _policy(framework)
    _perturb(policy)
    obs, state = np.array([0.1, -0.2, 0.3], np.float32), policy.get_initial_state()
    start = policy.compute_single_action(obs, state, explore=False)
    # Missing at an episode's start: zeros.
    zeros = policy.compute_single_action(obs, state, prev_action=0, prev_reward=0.0, explore=False)
    np.testing.assert_allclose(zeros[2][B.ACTION_DIST_INPUTS], start[2][B.ACTION_DIST_INPUTS], rtol=1e-6)
    other = policy.compute_single_action(obs, state, prev_action=2, prev_reward=1.0, explore=False)
    assert not np.allclose(other[2][B.ACTION_DIST_INPUTS], start[2][B.ACTION_DIST_INPUTS])
    # 1.13's input_dict form reads the same columns; a batch dimension of 1 is accepted.
    same = policy.compute_single_action(input_dict={B.OBS: obs, B.PREV_ACTIONS: [2], B.PREV_REWARDS: [1.0]},
                                        state=state, explore=False)
    np.testing.assert_allclose(same[2][B.ACTION_DIST_INPUTS], other[2][B.ACTION_DIST_INPUTS], rtol=1e-6)
    # 1.13's loop: the action and state_out of one step feed the next.
    a, state_out, r = 0, state, 0.0
    for step in range(3):
        a, state_out, _ = policy.compute_single_action(obs, state_out, prev_action=a, prev_reward=r)
        r = float(step)
    assert int(a) in range(3) and [value.shape for value in state_out] == [(6,), (6,)]


@pytest.mark.parametrize(("prev_action", "prev_reward", "fragment"), [
    ([1, 2], None, r"prev_action has shape \(2,\); the model reads the previous action, a category index in "
                   r"\[0, 3\) \(shape \(\)\)"),
    (3, None, r"prev_action 3 is not in the action space; the model reads the previous action, a category index"),
    (1.5, None, "not in the action space"),
    ("left", None, "prev_action 'left' is not numeric"),
    (None, [1.0, 2.0], r"prev_reward has shape \(2,\); the model reads the previous reward, one number"),
    (None, float("nan"), "prev_reward holds a NaN"),
])
def test_bad_prev_action_or_reward_names_the_problem(prev_action, prev_reward, fragment):
    policy = _policy("numpy")
    with pytest.raises(ValueError, match=fragment):
        policy.compute_single_action(np.zeros(3, np.float32), policy.get_initial_state(), prev_action=prev_action,
                                     prev_reward=prev_reward)


def test_a_window_of_actions_has_its_own_message():
    spec = PrevInputsSpec.for_action_space(SPACES["box"], 2, 0, window=True)
    with pytest.raises(ValueError, match=r"the last 2 actions, oldest first, each an array of floats of shape \(2,\) "
                                         r"\(shape \(2, 2\)\)"):
        spec.check({B.PREV_ACTIONS: np.zeros(2)}, 1, one=True)


def test_compute_actions_without_prev_keys_ignores_prev_batches():
    policy = _policy("numpy", model=MODEL)
    assert policy.prev_inputs is None
    obs = np.zeros((2, 3), np.float32)
    plain = policy.compute_actions(obs, explore=False)[1][B.ACTION_DIST_INPUTS]
    given = policy.compute_actions(obs, explore=False, prev_action_batch=np.ones(2), prev_reward_batch=np.ones(2))
    np.testing.assert_array_equal(given[1][B.ACTION_DIST_INPUTS], plain)
