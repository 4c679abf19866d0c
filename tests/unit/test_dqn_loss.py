"""DQN's loss against a numpy reference written from the papers, plus framework parity.

Covered here:

* a float64 numpy reference of the loss: Mnih et al. 2015 (target network, Huber loss
  with delta 1), van Hasselt et al. 2016 (double Q: the online network picks a*, the
  target network rates it), Wang et al. 2016 (dueling heads, Q = V + A - mean(A)),
  n-step targets through the ``discounts`` column (gamma ** k) and Schaul et al. 2016
  (importance weights through the ``weights`` column), with its own forward pass of
  the canonical weights (checked against :class:`NumpyQModel`);
* the torch and TF policies' ``loss()`` against that reference for double_q x dueling,
  with a target network that differs from the online one;
* torch vs TF: same weights and batch give the same loss and TD errors, and one
  ``learn_on_batch`` of three gradient steps (with grad clipping) the same weights;
* ``learn_on_batch`` takes its steps in row order with the target network fixed;
  ``update_target``; the ``get_state`` / ``set_state`` round trip (online weights, target
  weights, optimizer state);
* greedy acting on ``q_values`` and the numpy acting policy's parity;
* worker-side priorities from ``postprocess_q_learning``;
* the DQN config checks (``validate_dqn_config``) and the catalog's Discrete-only rule.

Each framework is skipped on its own when it is not installed.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlstack.errors import ConfigError
from rlstack.models.catalog import ModelCatalog
from rlstack.sample_batch import SampleBatch
from rlstack.trainers.common.config import merge_config
from rlstack.trainers.dqn.dqn import DEFAULT_CONFIG, validate_dqn_config
from rlstack.trainers.dqn.dqn_policy import DQNNumpyPolicy, postprocess_q_learning, td_errors
from tests.helpers.tensors import as_tensors, to_numpy

B = SampleBatch
OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
ACTION_SPACE = gym.spaces.Discrete(3)
GAMMA = 0.9
BASE_CONFIG = {"seed": 0, "gamma": GAMMA, "model": {"fcnet_hiddens": [16]}, "hiddens": [8],
               "train_batch_size": 16, "buffer_size": 1000, "lr": 1e-3}
COMBOS = [(double_q, dueling) for double_q in (True, False) for dueling in (True, False)]
COMBO_IDS = [f"double_q={d}-dueling={u}" for d, u in COMBOS]


# ----- numpy reference ------------------------------------------------------------------


def _relu(x):
    return np.maximum(x, 0.0)


def _dense_stack(w, prefix, x, activation):
    i = 0
    while f"{prefix}_{i}/kernel" in w:
        x = activation(x @ w[f"{prefix}_{i}/kernel"] + w[f"{prefix}_{i}/bias"])
        i += 1
    return x


def numpy_q(weights, obs, dueling):
    """Q(s, .) in float64 from canonical weights: a tanh MLP encoder (``fc_i``), an
    advantage stream (``q_hidden_i`` ReLU, ``q_out``) and, when dueling, a value stream
    (``v_hidden_i`` ReLU, ``v_out``) combined as Q = V + A - mean_a A."""
    w = {name: np.asarray(value, np.float64) for name, value in weights.items()}
    x = _dense_stack(w, "fc", np.asarray(obs, np.float64), np.tanh)
    advantages = _dense_stack(w, "q_hidden", x, _relu) @ w["q_out/kernel"] + w["q_out/bias"]
    if not dueling:
        assert "v_out/kernel" not in w
        return advantages
    value = _dense_stack(w, "v_hidden", x, _relu) @ w["v_out/kernel"] + w["v_out/bias"]
    return value + advantages - advantages.mean(axis=1, keepdims=True)


def _huber(x):
    return np.where(np.abs(x) < 1.0, 0.5 * x**2, np.abs(x) - 0.5)


def numpy_dqn_loss(q_t, q_tp1_online, q_tp1_target, batch, double_q):
    """DQN's loss and TD errors in float64 from precomputed Q-tables.

    y = r + discount * (1 - terminated) * Q_target(s', a*), with
    a* = argmax Q_online(s') (double Q) or argmax Q_target(s');
    td = Q(s, a) - y; loss = mean(weights * huber(td)).
    """
    rows = np.arange(len(q_t))
    q_selected = q_t[rows, np.asarray(batch[B.ACTIONS], np.int64)]
    best = np.argmax(q_tp1_online if double_q else q_tp1_target, axis=1)
    not_done = 1.0 - np.asarray(batch[B.TERMINATEDS], np.float64)
    target = (np.asarray(batch[B.REWARDS], np.float64)
              + np.asarray(batch[B.DISCOUNTS], np.float64) * not_done * q_tp1_target[rows, best])
    td = q_selected - target
    loss = np.mean(np.asarray(batch[B.WEIGHTS], np.float64) * _huber(td))
    return loss, td


def reference(online, target, batch, double_q, dueling):
    """The reference loss and TD errors for online / target weights on ``batch``."""
    return numpy_dqn_loss(numpy_q(online, batch[B.OBS], dueling), numpy_q(online, batch[B.NEXT_OBS], dueling),
                          numpy_q(target, batch[B.NEXT_OBS], dueling), batch, double_q)


# ----- helpers ------------------------------------------------------------------------------


def _policy_class(framework):
    if framework == "torch":
        pytest.importorskip("torch")
        from rlstack.trainers.dqn.dqn_torch_policy import DQNTorchPolicy

        return DQNTorchPolicy
    if framework == "tf":
        pytest.importorskip("tensorflow")
        from rlstack.trainers.dqn.dqn_tf_policy import DQNTFPolicy

        return DQNTFPolicy
    return DQNNumpyPolicy


def _config(**overrides):
    return merge_config(DEFAULT_CONFIG, {**BASE_CONFIG, **overrides}, "DQN")


def _build(framework, **overrides):
    return _policy_class(framework)(OBS_SPACE, ACTION_SPACE, _config(**overrides))


def _perturb(weights, seed, scale=0.3):
    """Weights of the same shapes, moved far enough from the init (whose Q head starts
    near 0) that Q-values are O(1) and argmaxes differ between differently perturbed
    networks."""
    rng = np.random.default_rng(seed)
    return {name: (value + rng.normal(0.0, scale, value.shape)).astype(np.float32) for name, value in weights.items()}


def _nets(policy, seed=1):
    """(online, target): two distinct weight sets for ``policy``'s network."""
    online = _perturb(policy.get_weights(), seed)
    return online, _perturb(online, seed + 100)


def _copy(arrays):
    return {key: np.array(value, copy=True) for key, value in arrays.items()}


# The tests hold weights and states across learning steps, so they take copies: the
# torch policy's get_weights() / get_state() return a live view of one kernel (see
# test_weights_and_state_are_snapshots).


def _weights(policy):
    return _copy(policy.get_weights())


def _state(policy):
    return _copy(policy.get_state())


def _target_weights(policy):
    return {key[len("target/"):]: value for key, value in _state(policy).items() if key.startswith("target/")}


def _load(policy, online, target):
    """Loads online and target weights through set_state's ``target/`` entries."""
    state = _state(policy)
    state.update({f"weights/{name}": value for name, value in online.items()})
    state.update({f"target/{name}": value for name, value in target.items()})
    policy.set_state(state)


def _make_batch(n=32, seed=0):
    """A fixed replayed batch: some terminated rows, n-step discounts gamma ** k for
    k in {1, 2, 3}, non-uniform importance weights, rewards wide enough to hit both
    branches of the Huber loss."""
    rng = np.random.default_rng(seed)
    terminateds = rng.random(n) < 0.25
    terminateds[:2] = [True, False]
    return SampleBatch({
        B.OBS: rng.uniform(-1, 1, (n, OBS_SPACE.shape[0])).astype(np.float32),
        B.ACTIONS: rng.integers(0, ACTION_SPACE.n, n).astype(np.int64),
        B.REWARDS: rng.normal(0.0, 1.5, n).astype(np.float32),
        B.NEXT_OBS: rng.uniform(-1, 1, (n, OBS_SPACE.shape[0])).astype(np.float32),
        B.TERMINATEDS: terminateds,
        B.DISCOUNTS: (GAMMA ** rng.integers(1, 4, n)).astype(np.float32),
        B.WEIGHTS: rng.uniform(0.2, 2.0, n).astype(np.float32),
    })


def _assert_weights_close(actual, expected, rtol=1e-5, atol=1e-6):
    assert actual.keys() == expected.keys()
    for name in expected:
        np.testing.assert_allclose(actual[name], expected[name], rtol=rtol, atol=atol, err_msg=name)


def _assert_weights_equal(actual, expected):
    assert actual.keys() == expected.keys()
    for name in expected:
        np.testing.assert_array_equal(actual[name], expected[name], err_msg=name)


# ----- the reference itself -------------------------------------------------------------------


@pytest.mark.parametrize("dueling", [True, False])
def test_reference_forward_matches_numpy_q_model(dueling):
    policy = _build("numpy", dueling=dueling)
    weights = _perturb(_weights(policy), 7)
    policy.set_weights(weights)
    assert ("v_out/kernel" in weights) == dueling
    obs = _make_batch()[B.OBS]
    np.testing.assert_allclose(policy.q_values(obs), numpy_q(weights, obs, dueling), rtol=1e-5, atol=1e-6)


def test_reference_loss_by_hand():
    # Two rows, two actions.
    # Row 0: a=1, Q(s)=[0, 2]; online Q(s')=[1, 0] picks a*=0, target Q'(s')=[3, 5].
    #   double:     y = 1 + 0.5 * 3 = 2.5,  td = 2 - 2.5 = -0.5, huber 0.125
    #   not double: y = 1 + 0.5 * 5 = 3.5,  td = 2 - 3.5 = -1.5, huber 1.0
    # Row 1 (terminated): a=0, Q(s)=[4, 0], r=1: y = 1, td = 3, huber 2.5 either way.
    q_t = np.array([[0.0, 2.0], [4.0, 0.0]])
    q_online = np.array([[1.0, 0.0], [0.0, 9.0]])
    q_target = np.array([[3.0, 5.0], [7.0, 8.0]])
    batch = {B.ACTIONS: np.array([1, 0]), B.REWARDS: np.array([1.0, 1.0]), B.TERMINATEDS: np.array([False, True]),
             B.DISCOUNTS: np.array([0.5, 0.5]), B.WEIGHTS: np.array([2.0, 1.0])}
    loss, td = numpy_dqn_loss(q_t, q_online, q_target, batch, double_q=True)
    np.testing.assert_allclose(td, [-0.5, 3.0])
    assert loss == pytest.approx((2.0 * 0.125 + 2.5) / 2)
    loss, td = numpy_dqn_loss(q_t, q_online, q_target, batch, double_q=False)
    np.testing.assert_allclose(td, [-1.5, 3.0])
    assert loss == pytest.approx((2.0 * 1.0 + 2.5) / 2)


# ----- the loss against the reference -------------------------------------------------------


@pytest.mark.parametrize("double_q, dueling", COMBOS, ids=COMBO_IDS)
def test_loss_matches_numpy_reference(framework, double_q, dueling):
    policy = _build(framework, double_q=double_q, dueling=dueling)
    online, target = _nets(policy)
    _load(policy, online, target)
    _assert_weights_equal(_weights(policy), online)
    _assert_weights_equal(_target_weights(policy), target)
    batch = _make_batch()
    expected_loss, expected_td = reference(online, target, batch, double_q, dueling)

    # The batch exercises what it is meant to: both Huber branches, terminated rows,
    # the weights, and online / target networks that disagree on a* for some rows.
    assert np.any(np.abs(expected_td) < 1.0) and np.any(np.abs(expected_td) > 1.0)
    assert 0 < batch[B.TERMINATEDS].sum() < batch.count
    assert len(np.unique(batch[B.DISCOUNTS])) == 3
    next_online, next_target = numpy_q(online, batch[B.NEXT_OBS], dueling), numpy_q(target, batch[B.NEXT_OBS], dueling)
    assert np.any(next_online.argmax(axis=1) != next_target.argmax(axis=1))
    other_loss, _ = reference(online, target, batch, not double_q, dueling)
    assert abs(other_loss - expected_loss) > 1e-3
    unweighted = numpy_dqn_loss(numpy_q(online, batch[B.OBS], dueling), next_online, next_target,
                                {**batch, B.WEIGHTS: np.ones(batch.count)}, double_q)[0]
    assert abs(unweighted - expected_loss) > 1e-3

    loss, stats = policy.loss(as_tensors(framework, batch))
    np.testing.assert_allclose(float(to_numpy(loss)), expected_loss, rtol=1e-5)
    np.testing.assert_allclose(to_numpy(stats["td_error"]), expected_td, rtol=1e-5, atol=1e-6)
    q_selected = numpy_q(online, batch[B.OBS], dueling)[np.arange(batch.count), batch[B.ACTIONS]]
    np.testing.assert_allclose(float(to_numpy(stats["mean_q"])), q_selected.mean(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(float(to_numpy(stats["mean_td_error"])), expected_td.mean(), rtol=1e-5, atol=1e-6)


# ----- torch vs TF ----------------------------------------------------------------------------


def _both(**overrides):
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    return _build("torch", **overrides), _build("tf", **overrides)


@pytest.mark.parametrize("double_q, dueling", COMBOS, ids=COMBO_IDS)
def test_torch_tf_loss_parity(double_q, dueling):
    torch_policy, tf_policy = _both(double_q=double_q, dueling=dueling)
    # Same seed, same canonical initial weights.
    _assert_weights_equal(_weights(torch_policy), _weights(tf_policy))
    online, target = _nets(torch_policy, seed=3)
    for policy in (torch_policy, tf_policy):
        # The other route to a distinct target network: set_weights + update_target.
        policy.set_weights(target)
        policy.update_target()
        policy.set_weights(online)
        _assert_weights_equal(_target_weights(policy), target)
    batch = _make_batch(seed=4)
    torch_loss, torch_stats = torch_policy.loss(as_tensors("torch", batch))
    tf_loss, tf_stats = tf_policy.loss(as_tensors("tf", batch))
    np.testing.assert_allclose(float(to_numpy(torch_loss)), float(to_numpy(tf_loss)), rtol=1e-5)
    np.testing.assert_allclose(to_numpy(torch_stats["td_error"]), to_numpy(tf_stats["td_error"]), rtol=1e-5, atol=1e-6)
    for key in ("mean_q", "min_q", "max_q", "mean_td_error"):
        np.testing.assert_allclose(float(to_numpy(torch_stats[key])), float(to_numpy(tf_stats[key])), rtol=1e-5,
                                   atol=1e-6, err_msg=key)


def test_torch_tf_learn_on_batch_parity():
    """Three Adam steps (3 * train_batch_size rows, clipped gradients) move both
    frameworks to the same weights; td_error has one entry per row."""
    grad_clip = 0.3
    torch_policy, tf_policy = _both(grad_clip=grad_clip, lr=1e-2)
    online, target = _nets(torch_policy, seed=5)
    for policy in (torch_policy, tf_policy):
        _load(policy, online, target)
    n = 3 * BASE_CONFIG["train_batch_size"]
    batch = _make_batch(n=n, seed=6)
    torch_stats = torch_policy.learn_on_batch(batch)
    tf_stats = tf_policy.learn_on_batch(batch)

    for stats in (torch_stats, tf_stats):
        assert stats["td_error"].shape == (n,)
        # The clip is active (the mean pre-clip norm is above it).
        assert stats["grad_gnorm"] > grad_clip
    torch_weights, tf_weights = _weights(torch_policy), _weights(tf_policy)
    _assert_weights_close(torch_weights, tf_weights, rtol=1e-4, atol=1e-6)
    assert any(not np.allclose(torch_weights[k], online[k]) for k in online)
    # The target networks did not move.
    _assert_weights_equal(_target_weights(torch_policy), target)
    _assert_weights_equal(_target_weights(tf_policy), target)
    np.testing.assert_allclose(torch_stats["td_error"], tf_stats["td_error"], rtol=1e-4, atol=1e-5)
    for key in ("loss", "mean_q", "grad_gnorm", "cur_lr"):
        assert torch_stats[key] == pytest.approx(tf_stats[key], rel=1e-4, abs=1e-6), key


# ----- learn_on_batch, update_target, state -----------------------------------------------------


@pytest.mark.parametrize("double_q", [True, False])
def test_learn_on_batch_steps_in_order_with_fixed_target(framework, double_q):
    """Rows [0, 16) feed the first step, [16, 32) the second, with the target network
    unchanged in between: td_error of the second chunk equals the reference under the
    weights one step on [0, 16) leaves, and the first chunk's under the initial ones."""
    size = BASE_CONFIG["train_batch_size"]
    config = dict(double_q=double_q, grad_clip=10.0, lr=1e-2)
    two_steps, one_step = _build(framework, **config), _build(framework, **config)
    online, target = _nets(two_steps, seed=8)
    _load(two_steps, online, target)
    _load(one_step, online, target)
    batch = _make_batch(n=2 * size, seed=9)
    td = two_steps.learn_on_batch(batch)["td_error"]
    one_step.learn_on_batch(batch.slice(0, size))
    after_one = _weights(one_step)

    _, expected_first = reference(online, target, batch.slice(0, size), double_q, True)
    _, expected_second = reference(after_one, target, batch.slice(size, 2 * size), double_q, True)
    np.testing.assert_allclose(td[:size], expected_first, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(td[size:], expected_second, rtol=1e-4, atol=1e-5)
    _, stale = reference(online, target, batch.slice(size, 2 * size), double_q, True)
    assert not np.allclose(td[size:], stale, rtol=1e-4, atol=1e-5)


def test_update_target_copies_online_weights(framework):
    policy = _build(framework, lr=1e-2)
    initial = _weights(policy)
    # Built with target == online.
    _assert_weights_equal(_target_weights(policy), initial)
    batch = _make_batch(seed=10)
    policy.learn_on_batch(batch)
    learned = _weights(policy)
    # The learn step moved the online network only.
    assert any(not np.array_equal(learned[k], initial[k]) for k in initial)
    _assert_weights_equal(_target_weights(policy), initial)
    policy.update_target()
    _assert_weights_equal(_target_weights(policy), learned)
    _assert_weights_equal(_weights(policy), learned)
    # And the loss now uses the new target: it equals the reference with target == online.
    expected_loss, expected_td = reference(learned, learned, batch, True, True)
    loss, stats = policy.loss(as_tensors(framework, batch))
    np.testing.assert_allclose(float(to_numpy(loss)), expected_loss, rtol=1e-5)
    np.testing.assert_allclose(to_numpy(stats["td_error"]), expected_td, rtol=1e-5, atol=1e-6)


def test_state_round_trip_resumes_learning_identically(framework):
    config = dict(grad_clip=1.0, lr=1e-2)
    policy = _build(framework, **config)
    online, target = _nets(policy, seed=11)
    _load(policy, online, target)
    policy.learn_on_batch(_make_batch(seed=12))  # non-trivial Adam moments and step
    state = _state(policy)
    assert any(key.startswith("optimizer/") for key in state)
    saved_target = {k[len("target/"):]: v.copy() for k, v in state.items() if k.startswith("target/")}
    saved_online = {k[len("weights/"):]: v.copy() for k, v in state.items() if k.startswith("weights/")}
    # The saved target is not just a copy of the online network.
    assert any(not np.allclose(saved_target[k], saved_online[k]) for k in saved_online)

    batch = _make_batch(n=32, seed=13)
    expected = policy.learn_on_batch(batch)
    expected_weights, expected_target = _weights(policy), _target_weights(policy)

    restored = _build(framework, **dict(config, seed=99))  # different initial weights
    assert any(not np.array_equal(_weights(restored)[k], saved_online[k]) for k in saved_online)
    restored.set_state(state)
    _assert_weights_equal(_weights(restored), saved_online)
    _assert_weights_equal(_target_weights(restored), saved_target)
    stats = restored.learn_on_batch(batch)
    _assert_weights_equal(_weights(restored), expected_weights)
    _assert_weights_equal(_target_weights(restored), expected_target)
    np.testing.assert_array_equal(stats["td_error"], expected["td_error"])
    assert {k: v for k, v in stats.items() if k != "td_error"} == {k: v for k, v in expected.items() if k != "td_error"}

    # Control: the same weights without the optimizer state give a different update.
    fresh = _build(framework, **config)
    fresh.set_state({**{f"weights/{k}": v for k, v in saved_online.items()},
                     **{f"target/{k}": v for k, v in saved_target.items()}})
    fresh.learn_on_batch(batch)
    assert any(not np.allclose(_weights(fresh)[k], expected_weights[k], rtol=1e-6, atol=0) for k in expected_weights)


def test_weights_and_state_are_snapshots(framework):
    """get_weights() / get_state() return copies: learning or update_target() afterwards
    must not change a dict already handed out (a checkpoint, ApeX's weights for the
    object store, a user's "best weights")."""
    policy = _build(framework, lr=1e-2)
    weights, state = policy.get_weights(), policy.get_state()
    weights_copy, state_copy = _copy(weights), _copy(state)
    policy.learn_on_batch(_make_batch(seed=18))
    policy.update_target()
    for name in weights_copy:
        np.testing.assert_array_equal(weights[name], weights_copy[name], err_msg=name)
    for key in state_copy:
        np.testing.assert_array_equal(state[key], state_copy[key], err_msg=key)


# ----- acting -------------------------------------------------------------------------------------


def test_greedy_actions_and_numpy_policy_parity(framework):
    policy = _build(framework)
    policy.set_weights(_perturb(_weights(policy), 14))
    obs = _make_batch(n=64, seed=15)[B.OBS]
    q = policy.q_values(obs)
    assert q.shape == (64, ACTION_SPACE.n) and q.dtype == np.float32
    actions, extras = policy.compute_actions(obs, explore=False)
    np.testing.assert_array_equal(actions, q.argmax(axis=1))
    np.testing.assert_array_equal(extras["q_values"], q)
    assert len(np.unique(actions)) > 1  # not a degenerate argmax
    np.testing.assert_allclose(policy.compute_values(obs), q.max(axis=1), rtol=1e-6)

    numpy_policy = _build("numpy")
    numpy_policy.set_weights(_weights(policy))
    np.testing.assert_allclose(numpy_policy.q_values(obs), q, rtol=1e-5, atol=1e-6)
    numpy_actions, _ = numpy_policy.compute_actions(obs, explore=False)
    np.testing.assert_array_equal(numpy_actions, actions)

    # With epsilon 0, exploring acts greedily too.
    greedy = _build(framework, exploration_config={"initial_epsilon": 0.0, "final_epsilon": 0.0})
    greedy.set_weights(_weights(policy))
    np.testing.assert_array_equal(greedy.compute_actions(obs, explore=True)[0], actions)


# ----- worker-side priorities ------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["numpy", "torch", "tf"])
@pytest.mark.parametrize("double_q", [True, False])
def test_postprocess_worker_side_priorities(kind, double_q):
    n_step, T = 3, 7
    policy = _build(kind, n_step=n_step, double_q=double_q, worker_side_prioritization=True)
    weights = _perturb(_weights(policy), 16)
    policy.set_weights(weights)
    rng = np.random.default_rng(17)
    obs_seq = rng.uniform(-1, 1, (T + 1, OBS_SPACE.shape[0])).astype(np.float32)
    terminateds = np.zeros(T, dtype=bool)
    terminateds[-1] = True  # the episode ends in this piece
    piece = SampleBatch({
        B.OBS: obs_seq[:-1],
        B.ACTIONS: rng.integers(0, ACTION_SPACE.n, T).astype(np.int64),
        B.REWARDS: rng.normal(0, 1, T).astype(np.float32),
        B.NEXT_OBS: obs_seq[1:],
        B.TERMINATEDS: terminateds,
    })
    out = policy.postprocess_trajectory(piece.copy())
    assert B.PRIORITIES in out and out[B.PRIORITIES].shape == (T,)

    # By hand: k = min(n, T - t) steps, R = sum_j gamma^j r_{t+j}, bootstrapping from
    # the observation after step t + k - 1 with the policy's own network as target.
    q_s = numpy_q(weights, piece[B.OBS], True)
    q_next = numpy_q(weights, piece[B.NEXT_OBS], True)
    expected = np.empty(T)
    for t in range(T):
        k = min(n_step, T - t)
        ret = sum(GAMMA**j * float(piece[B.REWARDS][t + j]) for j in range(k))
        last = t + k - 1
        bootstrap = 0.0 if terminateds[last] else GAMMA**k * q_next[last].max()
        expected[t] = abs(q_s[t, piece[B.ACTIONS][t]] - (ret + bootstrap))
    np.testing.assert_allclose(out[B.PRIORITIES], expected, rtol=1e-5, atol=1e-6)
    # ...and the same as td_errors on the n-step batch with no target network.
    np.testing.assert_allclose(out[B.PRIORITIES], td_errors(out, policy.q_values, double_q), rtol=1e-6)

    # Without worker_side_prioritization there is no priorities column.
    policy.config["worker_side_prioritization"] = False
    assert B.PRIORITIES not in postprocess_q_learning(piece.copy(), policy.config, policy.q_values)


# ----- config errors --------------------------------------------------------------------------------


@pytest.mark.parametrize("overrides, key", [
    ({"num_atoms": 0}, "num_atoms"),
    ({"sigma0": -1.0}, "sigma0"),
    ({"n_step": 0}, "n_step"),
    ({"training_intensity": -1}, "training_intensity"),
    ({"train_batch_size": 64, "buffer_size": 32}, "train_batch_size"),
    ({"exploration_config": {"type": "Bogus"}}, "exploration_config"),
], ids=lambda value: value if isinstance(value, str) else None)
def test_validate_dqn_config_rejects(overrides, key):
    config = merge_config(DEFAULT_CONFIG, overrides, "DQN")
    with pytest.raises(ConfigError) as info:
        validate_dqn_config(config)
    assert key in str(info.value)


def test_validate_dqn_config_accepts_defaults_and_test_config():
    validate_dqn_config(merge_config(DEFAULT_CONFIG, None, "DQN"))
    validate_dqn_config(_config())


def test_q_model_spec_needs_discrete_actions():
    box = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    with pytest.raises(ConfigError, match="Discrete"):
        ModelCatalog.get_q_model_spec(OBS_SPACE, box, {"fcnet_hiddens": [16]}, [8], True)
    with pytest.raises(ConfigError, match="Discrete"):
        DQNNumpyPolicy(OBS_SPACE, box, _config())


def test_non_finite_gradients_raise_the_same_error_in_both_frameworks(framework):
    # A NaN reward makes the TD targets and so the gradients NaN: the update is not
    # applied, and TF's in-graph assertion surfaces as the error torch raises.
    from rlstack.errors import NonFiniteError

    policy = _build(framework)
    batch = _make_batch()
    batch[B.REWARDS][3] = np.nan
    before = _weights(policy)
    with pytest.raises(NonFiniteError, match="(?i)non-finite"):
        policy.learn_on_batch(batch)
    _assert_weights_equal(_weights(policy), before)
