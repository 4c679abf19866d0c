"""Rainbow's pieces in DQN: distributional C51 (``num_atoms > 1``) and noisy heads (``noisy``).

Covered here:

* the categorical projection of C51 (Bellemare et al. 2017, algorithm 1) against a
  loop-by-loop numpy reference and hand-computed cases: atoms landing on support points,
  between them, beyond ``v_min`` / ``v_max``, terminated rows, n-step discounts;
* the distributional loss of both frameworks against a float64 numpy reference (logits,
  double Q / plain argmax, dueling per atom, importance weights); the TD error for the
  replay priorities is the per-row cross-entropy, as in 1.13;
* torch vs TF: the same loss, TD errors and one-step weights on a fixed batch with the
  same weights, C51 with noisy heads under fixed noise;
* noisy layers: their sibling sigma layers' shapes, Fortunato et al.'s initialisation
  (mu ~ U(-1/sqrt(p), 1/sqrt(p)), sigma = sigma0 / sqrt(p)), fresh noise per call,
  greedy acting with the mean weights (deterministic), the numpy acting copy;
* config errors naming the key; a checkpoint restores the same greedy actions; the
  exported model outputs the mean-weight Q-values; worker-side priorities are the
  learner's cross-entropies.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlstack.errors import ConfigError
from rlstack.models.catalog import ModelCatalog
from rlstack.models.specs import initial_weights
from rlstack.sample_batch import SampleBatch
from rlstack.trainers.common.config import merge_config
from rlstack.trainers.dqn.dqn import DEFAULT_CONFIG, validate_dqn_config
from rlstack.trainers.dqn.dqn_policy import DQNNumpyPolicy, c51_td_errors, postprocess_q_learning
from rlstack.trainers.dqn.dqn_policy import project_distribution as q_learning_project
from tests.helpers.tensors import as_tensors, to_numpy
from tests.unit.test_dqn_loss import _policy_class
from tests.unit.test_dqn_loss import _perturb as dqn_perturb

B = SampleBatch
OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
ACTION_SPACE = gym.spaces.Discrete(3)
GAMMA = 0.9
BASE_CONFIG = {"seed": 0, "gamma": GAMMA, "model": {"fcnet_hiddens": [16]}, "hiddens": [8],
               "train_batch_size": 16, "buffer_size": 1000, "lr": 1e-3, "num_atoms": 11, "v_min": -3.0,
               "v_max": 3.0}
COMBOS = [(double_q, dueling) for double_q in (True, False) for dueling in (True, False)]
COMBO_IDS = [f"double_q={d}-dueling={u}" for d, u in COMBOS]


# ----- numpy references -----------------------------------------------------------------------


def numpy_project(rewards, bootstrap, probs, support):
    """C51's projection, one atom at a time: ``Tz_j = clip(r + bootstrap z_j)``,
    ``b = (Tz_j - v_min) / dz``; mass ``p_j`` goes to floor(b) and ceil(b) by closeness."""
    rewards, bootstrap, probs = (np.asarray(x, np.float64) for x in (rewards, bootstrap, probs))
    support = np.asarray(support, np.float64)
    n = len(support)
    v_min, v_max = support[0], support[-1]
    dz = (v_max - v_min) / (n - 1)
    m = np.zeros_like(probs)
    for row in range(len(rewards)):
        for j in range(n):
            tz = min(max(rewards[row] + bootstrap[row] * support[j], v_min), v_max)
            b = (tz - v_min) / dz
            lower, upper = int(np.floor(b)), int(np.ceil(b))
            if lower == upper:
                m[row, lower] += probs[row, j]
            else:
                m[row, lower] += probs[row, j] * (upper - b)
                m[row, min(upper, n - 1)] += probs[row, j] * (b - lower)
    return m


def _softmax(x, axis=-1):
    x = x - x.max(axis=axis, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)


def _stack(w, prefix, x):
    i = 0
    while f"{prefix}_{i}/kernel" in w:
        x = np.maximum(x @ w[f"{prefix}_{i}/kernel"] + w[f"{prefix}_{i}/bias"], 0.0)
        i += 1
    return x


def numpy_logits(weights, obs, num_actions, num_atoms, dueling):
    """``[B, A, N]`` logits in float64 (no noise): tanh encoder, advantage stream of
    A * N outputs, dueling value stream of N outputs, V + A - mean_a A per atom."""
    w = {name: np.asarray(value, np.float64) for name, value in weights.items()}
    x = np.asarray(obs, np.float64)
    i = 0
    while f"fc_{i}/kernel" in w:
        x = np.tanh(x @ w[f"fc_{i}/kernel"] + w[f"fc_{i}/bias"])
        i += 1
    advantages = (_stack(w, "q_hidden", x) @ w["q_out/kernel"] + w["q_out/bias"]).reshape(-1, num_actions, num_atoms)
    if not dueling:
        return advantages
    value = (_stack(w, "v_hidden", x) @ w["v_out/kernel"] + w["v_out/bias"])[:, None, :]
    return value + advantages - advantages.mean(axis=1, keepdims=True)


def numpy_c51_loss(online, target, batch, double_q, dueling, support):
    """The C51 loss and per-row cross-entropies (the TD errors)."""
    a, n = ACTION_SPACE.n, len(support)
    rows = np.arange(batch.count)
    logits_t = numpy_logits(online, batch[B.OBS], a, n, dueling)[rows, batch[B.ACTIONS]]
    q_online = (_softmax(numpy_logits(online, batch[B.NEXT_OBS], a, n, dueling)) * support).sum(-1)
    target_logits = numpy_logits(target, batch[B.NEXT_OBS], a, n, dueling)
    best = np.argmax(q_online if double_q else (_softmax(target_logits) * support).sum(-1), axis=1)
    bootstrap = batch[B.DISCOUNTS] * (1.0 - batch[B.TERMINATEDS])
    m = numpy_project(batch[B.REWARDS], bootstrap, _softmax(target_logits[rows, best]), support)
    log_p = logits_t - np.log(np.exp(logits_t - logits_t.max(1, keepdims=True)).sum(1, keepdims=True)) \
        - logits_t.max(1, keepdims=True)
    cross_entropy = -(m * log_p).sum(1)
    return np.mean(batch[B.WEIGHTS] * cross_entropy), cross_entropy


# ----- helpers ------------------------------------------------------------------------------


def _config(**overrides):
    return merge_config(DEFAULT_CONFIG, {**BASE_CONFIG, **overrides}, "DQN")


def _build(framework, **overrides):
    return _policy_class(framework)(OBS_SPACE, ACTION_SPACE, _config(**overrides))


def _perturb(weights, seed, scale=0.5):
    return dqn_perturb(weights, seed, scale)


def _load(policy, online, target):
    state = {key: np.array(value, copy=True) for key, value in policy.get_state().items()}
    state.update({f"weights/{name}": value for name, value in online.items()})
    state.update({f"target/{name}": value for name, value in target.items()})
    policy.set_state(state)


def _make_batch(n=32, seed=0, reward_scale=1.5):
    rng = np.random.default_rng(seed)
    terminateds = rng.random(n) < 0.25
    terminateds[:2] = [True, False]
    return SampleBatch({
        B.OBS: rng.uniform(-1, 1, (n, 4)).astype(np.float32),
        B.ACTIONS: rng.integers(0, ACTION_SPACE.n, n).astype(np.int64),
        B.REWARDS: rng.normal(0.0, reward_scale, n).astype(np.float32),
        B.NEXT_OBS: rng.uniform(-1, 1, (n, 4)).astype(np.float32),
        B.TERMINATEDS: terminateds,
        B.DISCOUNTS: (GAMMA ** rng.integers(1, 4, n)).astype(np.float32),
        B.WEIGHTS: rng.uniform(0.2, 2.0, n).astype(np.float32),
    })


def _projections():
    import torch

    from rlstack.trainers.dqn.dqn_torch_policy import project_distribution as torch_project
    tf = pytest.importorskip("tensorflow")
    from rlstack.trainers.dqn.dqn_tf_policy import project_distribution as tf_project

    def run_torch(r, boot, p, support):
        return torch_project(torch.tensor(r, dtype=torch.float32), torch.tensor(boot, dtype=torch.float32),
                             torch.tensor(p, dtype=torch.float32), torch.tensor(support)).numpy()

    def run_tf(r, boot, p, support):
        return tf_project(tf.constant(r, tf.float32), tf.constant(boot, tf.float32), tf.constant(p, tf.float32),
                          np.asarray(support, np.float32)).numpy()

    def run_numpy(r, boot, p, support):
        return q_learning_project(np.asarray(r, np.float32), np.asarray(boot, np.float32), np.asarray(p, np.float32),
                                  np.asarray(support, np.float32))

    return {"reference": numpy_project, "q_learning": run_numpy, "torch": run_torch, "tf": run_tf}


# ----- the projection -------------------------------------------------------------------------

SUPPORT5 = np.array([0.0, 1.0, 2.0, 3.0, 4.0], np.float32)  # v_min 0, v_max 4, dz 1


@pytest.mark.parametrize("reward, bootstrap, atom, expected", [
    # r + 1 * z_1 = 2: lands on a support point, all mass to z_2.
    (1.0, 1.0, 1, {2: 1.0}),
    # r + z_1 = 1.5: halfway between z_1 and z_2.
    (0.5, 1.0, 1, {1: 0.5, 2: 0.5}),
    # 0.25 + z_2 = 2.25: 3/4 to z_2, 1/4 to z_3.
    (0.25, 1.0, 2, {2: 0.75, 3: 0.25}),
    # beyond v_max: clipped onto z_4; below v_min: onto z_0.
    (10.0, 1.0, 3, {4: 1.0}),
    (-10.0, 1.0, 3, {0: 1.0}),
    # a terminated row (bootstrap 0): every atom collapses onto r = 1.25.
    (1.25, 0.0, 4, {1: 0.75, 2: 0.25}),
    # 3-step discount gamma^3 = 0.729 with gamma 0.9: 0.5 + 0.729 * 3 = 2.687.
    (0.5, 0.729, 3, {2: 1.0 - 0.687, 3: 0.687}),
    # gamma^2 = 0.81 on z_4: 0.76 + 3.24 = 4.0 exactly v_max.
    (0.76, 0.81, 4, {4: 1.0}),
], ids=["on-point", "halfway", "quarter", "above-v_max", "below-v_min", "terminated", "n_step-3", "at-v_max"])
def test_projection_hand_cases(reward, bootstrap, atom, expected):
    probs = np.zeros((1, 5), np.float32)
    probs[0, atom] = 1.0
    want = np.zeros((1, 5))
    for index, mass in expected.items():
        want[0, index] = mass
    for name, project in _projections().items():
        got = project(np.array([reward]), np.array([bootstrap]), probs, SUPPORT5)
        np.testing.assert_allclose(got, want, atol=1e-5, err_msg=name)


def test_projection_matches_reference_on_random_distributions():
    rng = np.random.default_rng(3)
    support = np.linspace(-10.0, 10.0, 51, dtype=np.float32)
    n = 64
    rewards = rng.normal(0.0, 4.0, n).astype(np.float32)
    rewards[:3] = [25.0, -25.0, 0.0]  # everything beyond the support, and r = 0 on z's grid
    bootstrap = (GAMMA ** rng.integers(1, 4, n) * (rng.random(n) > 0.2)).astype(np.float32)
    bootstrap[2] = 1.0  # Tz = z exactly: the identity
    probs = _softmax(rng.normal(0.0, 2.0, (n, 51))).astype(np.float32)
    want = numpy_project(rewards, bootstrap, probs, support)
    np.testing.assert_allclose(want.sum(1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(want[2], probs[2], atol=1e-6)
    assert want[0, -1] == pytest.approx(1.0) and want[1, 0] == pytest.approx(1.0)
    for name, project in _projections().items():
        np.testing.assert_allclose(project(rewards, bootstrap, probs, support), want, atol=1e-5, err_msg=name)


# ----- the loss -------------------------------------------------------------------------------


@pytest.mark.parametrize("double_q, dueling", COMBOS, ids=COMBO_IDS)
def test_c51_loss_matches_numpy_reference(framework, double_q, dueling):
    policy = _build(framework, double_q=double_q, dueling=dueling)
    online = _perturb(policy.get_weights(), 1)
    target = _perturb(online, 101)
    _load(policy, online, target)
    batch = _make_batch()
    support = np.linspace(-3.0, 3.0, 11)
    expected_loss, expected_td = numpy_c51_loss(online, target, batch, double_q, dueling, support)
    other_loss, _ = numpy_c51_loss(online, target, batch, not double_q, dueling, support)
    assert abs(other_loss - expected_loss) > 1e-4  # double Q makes a difference on this batch
    loss, stats = policy.loss(as_tensors(framework, batch))
    np.testing.assert_allclose(float(to_numpy(loss)), expected_loss, rtol=1e-5)
    np.testing.assert_allclose(to_numpy(stats["td_error"]), expected_td, rtol=1e-5, atol=1e-6)
    assert np.all(to_numpy(stats["td_error"]) > 0)  # cross-entropies: priorities need no abs
    logits = numpy_logits(online, batch[B.OBS], 3, 11, dueling)[np.arange(batch.count), batch[B.ACTIONS]]
    q_selected = (_softmax(logits) * support).sum(1)
    np.testing.assert_allclose(float(to_numpy(stats["mean_q"])), q_selected.mean(), rtol=1e-5, atol=1e-6)
    # q_values is the expectation of the distribution.
    q = policy.q_values(batch[B.OBS], noise=False)
    np.testing.assert_allclose(q, (_softmax(numpy_logits(online, batch[B.OBS], 3, 11, dueling)) * support).sum(-1),
                               rtol=1e-5, atol=1e-5)


def _fixed_noise(spec, seed):
    rng = np.random.default_rng(seed)
    return {layer.name[:-len("_sigma")]: (rng.standard_normal(layer.kernel_shape[0]).astype(np.float32),
                                         rng.standard_normal(layer.kernel_shape[1]).astype(np.float32))
            for layer in spec.noise_layers}


@pytest.mark.parametrize("num_atoms", [1, 11])
def test_torch_tf_parity_with_fixed_noise(num_atoms):
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    overrides = {"noisy": True, "num_atoms": num_atoms, "grad_clip": 0.5, "lr": 1e-2}
    torch_policy, tf_policy = _build("torch", **overrides), _build("tf", **overrides)
    online = _perturb(torch_policy.get_weights(), 5, scale=0.3)
    target = _perturb(online, 6, scale=0.3)
    noise, target_noise = _fixed_noise(torch_policy.model.spec, 7), _fixed_noise(torch_policy.model.spec, 8)
    for policy in (torch_policy, tf_policy):
        _load(policy, online, target)
        policy.model.fixed_noise, policy.target_model.fixed_noise = noise, target_noise
    batch = _make_batch(seed=4)
    torch_loss, torch_stats = torch_policy.loss(as_tensors("torch", batch))
    tf_loss, tf_stats = tf_policy.loss(as_tensors("tf", batch))
    np.testing.assert_allclose(float(to_numpy(torch_loss)), float(to_numpy(tf_loss)), rtol=1e-5)
    np.testing.assert_allclose(to_numpy(torch_stats["td_error"]), to_numpy(tf_stats["td_error"]), rtol=1e-5, atol=1e-6)
    # The noise matters: the same weights without noise give another loss.
    torch_policy.model.fixed_noise = None
    mean_q = torch_policy.q_values(batch[B.OBS], noise=False)
    torch_policy.model.fixed_noise = noise
    assert not np.allclose(torch_policy.q_values(batch[B.OBS]), mean_q, atol=1e-4)
    # One Adam step (clipped) lands both frameworks on the same weights.
    for policy in (torch_policy, tf_policy):
        policy.learn_on_batch(batch.slice(0, 16))
    torch_weights, tf_weights = torch_policy.get_weights(), tf_policy.get_weights()
    for name in torch_weights:
        np.testing.assert_allclose(torch_weights[name], tf_weights[name], rtol=1e-4, atol=1e-5, err_msg=name)


def test_worker_side_priorities_are_the_learners_cross_entropy(framework):
    """Rollout workers' initial priorities (ApeX's worker_side_prioritization) have the
    learner's scale: with the target network equal to the online one they are the
    learner's per-row cross-entropies."""
    policy = _build(framework, worker_side_prioritization=True, n_step=1)
    online = _perturb(policy.get_weights(), 11)
    _load(policy, online, online)
    batch = _make_batch(seed=12)
    _, stats = policy.loss(as_tensors(framework, batch))
    support = np.linspace(-3.0, 3.0, 11, dtype=np.float32)
    np.testing.assert_allclose(c51_td_errors(batch, policy.q_logits, support), to_numpy(stats["td_error"]),
                               rtol=1e-4, atol=1e-5)
    numpy_policy = _build("numpy", worker_side_prioritization=True, n_step=1)
    numpy_policy.set_weights(online)
    piece = batch.copy()
    piece[B.DISCOUNTS] = np.full(batch.count, GAMMA, np.float32)
    out = postprocess_q_learning(piece, numpy_policy.config, numpy_policy.q_values, numpy_policy.q_logits)
    np.testing.assert_allclose(out[B.PRIORITIES], c51_td_errors(out, policy.q_logits, support), rtol=1e-4, atol=1e-5)


# ----- noisy layers ---------------------------------------------------------------------------


def test_noisy_layer_shapes_and_initialisation():
    spec = ModelCatalog.get_q_model_spec(OBS_SPACE, ACTION_SPACE, {"fcnet_hiddens": [16]}, [256, 64], True,
                                         num_atoms=5, noisy=True, sigma0=0.5)
    noisy = [*spec.advantage_hiddens, spec.advantage_out, *spec.value_hiddens, spec.value_out]
    assert [layer.name for layer in spec.noise_layers] == [f"{layer.name}_sigma" for layer in noisy]
    assert [layer.kernel_shape for layer in spec.noise_layers] == [layer.kernel_shape for layer in noisy]
    assert spec.advantage_out.kernel_shape == (64, 3 * 5) and spec.value_out.kernel_shape == (64, 5)
    weights = initial_weights(spec, seed=0)
    for layer in noisy:
        p = layer.kernel_shape[0]
        bound = 1.0 / np.sqrt(p)
        for part in ("kernel", "bias"):
            mu = weights[f"{layer.name}/{part}"]
            assert np.all(np.abs(mu) <= bound), layer.name
            sigma = weights[f"{layer.name}_sigma/{part}"]
            np.testing.assert_allclose(sigma, 0.5 / np.sqrt(p), rtol=1e-6, err_msg=layer.name)
        # U(-b, b): mean 0, std b / sqrt(3), on the big 16x256 kernel.
    big = weights["q_hidden_0/kernel"]
    bound = 1.0 / np.sqrt(16)
    assert abs(big.mean()) < 0.05 * bound and big.std() == pytest.approx(bound / np.sqrt(3), rel=0.05)
    # The encoder keeps its normal init; a plain spec has no sigma layers.
    plain = ModelCatalog.get_q_model_spec(OBS_SPACE, ACTION_SPACE, {"fcnet_hiddens": [16]}, [8], True)
    assert not plain.noisy and plain.noise_layers == ()


def test_noisy_acting_explores_by_noise_and_greedy_is_deterministic(framework):
    policy = _build(framework, noisy=True, num_atoms=1, exploration_config={"final_epsilon": 0.0,
                                                                           "initial_epsilon": 0.0})
    policy.set_weights(_perturb(policy.get_weights(), 2, scale=0.3))
    obs = np.random.default_rng(0).uniform(-1, 1, (200, 4)).astype(np.float32)
    noisy_1, noisy_2 = policy.q_values(obs), policy.q_values(obs)
    assert not np.allclose(noisy_1, noisy_2)  # fresh noise each forward pass
    greedy = policy.q_values(obs, noise=False)
    np.testing.assert_array_equal(greedy, policy.q_values(obs, noise=False))
    actions = [policy.compute_actions(obs, explore=True)[0] for _ in range(2)]
    assert np.any(actions[0] != actions[1])  # epsilon is 0: the noise explores
    greedy_actions = policy.compute_actions(obs, explore=False)[0]
    np.testing.assert_array_equal(greedy_actions, greedy.argmax(1))
    np.testing.assert_array_equal(greedy_actions, policy.compute_actions(obs, explore=False)[0])
    # The numpy acting copy (rollout workers) computes the same mean Q-values.
    numpy_policy = _build("numpy", noisy=True, num_atoms=1)
    numpy_policy.set_weights(policy.get_weights())
    np.testing.assert_allclose(numpy_policy.q_values(obs, noise=False), greedy, rtol=1e-5, atol=1e-5)
    assert not np.allclose(numpy_policy.q_values(obs), greedy, atol=1e-4)


def test_numpy_acting_copy_matches_c51_q_values(framework):
    policy = _build(framework, dueling=True)
    policy.set_weights(_perturb(policy.get_weights(), 9))
    numpy_policy = _build("numpy")
    numpy_policy.set_weights(policy.get_weights())
    obs = _make_batch()[B.OBS]
    np.testing.assert_allclose(numpy_policy.q_values(obs), policy.q_values(obs), rtol=1e-5, atol=1e-5)


# ----- config ---------------------------------------------------------------------------------


@pytest.mark.parametrize("overrides, key", [
    ({"num_atoms": 0}, "num_atoms"),
    ({"num_atoms": 51.0}, "num_atoms"),
    ({"v_min": 10.0, "v_max": 10.0}, "v_min"),
    ({"v_min": 5.0, "v_max": -5.0}, "v_max"),
    ({"sigma0": -0.1}, "sigma0"),
    ({"noisy": "yes"}, "noisy"),
], ids=lambda value: value if isinstance(value, str) else None)
def test_bad_rainbow_keys_name_the_key(overrides, key):
    for algorithm in ("DQN", "APEX"):
        config = merge_config(DEFAULT_CONFIG, overrides, "DQN")
        with pytest.raises(ConfigError) as info:
            validate_dqn_config(config, algorithm)
        assert key in str(info.value) and algorithm in str(info.value)


def test_defaults_are_1_13s_and_rainbow_is_accepted():
    assert {k: DEFAULT_CONFIG[k] for k in ("num_atoms", "v_min", "v_max", "noisy", "sigma0")} == {
        "num_atoms": 1, "v_min": -10.0, "v_max": 10.0, "noisy": False, "sigma0": 0.5}
    validate_dqn_config(merge_config(DEFAULT_CONFIG, {"num_atoms": 51, "noisy": True, "n_step": 3}, "DQN"))
    from rlstack.trainers.dqn.apex import APEX_DEFAULT_CONFIG, ApeXTrainer

    ApeXTrainer.validate_config(merge_config(APEX_DEFAULT_CONFIG, {"num_atoms": 51, "noisy": True}, "APEX"))


def test_custom_model_is_refused_with_rainbow_heads():
    pytest.importorskip("torch")
    from rlstack.models.torch.fcnet import FullyConnectedNetwork

    with pytest.raises(ConfigError, match="num_atoms"):
        _build("torch", model={"custom_model": FullyConnectedNetwork})


# ----- end to end -----------------------------------------------------------------------------


def test_checkpoint_restores_greedy_actions(framework, tmp_path):
    from rlstack.trainers.dqn import DQNTrainer

    config = {"framework": framework, "seed": 0, "num_atoms": 11, "v_min": 0.0, "v_max": 20.0, "noisy": True,
              "n_step": 3, "learning_starts": 64, "min_sample_timesteps_per_reporting": 128, "hiddens": [16],
              "model": {"fcnet_hiddens": [16]}, "train_batch_size": 16, "target_network_update_freq": 40}
    trainer = DQNTrainer(config, "CartPole-v1")
    result = trainer.train()
    assert np.isfinite(result["info"]["learner"]["default_policy"]["learner_stats"]["loss"])
    observations = np.random.default_rng(0).uniform(-0.5, 0.5, (30, 4)).astype(np.float32)
    expected = [int(trainer.compute_single_action(obs, explore=False)) for obs in observations]
    assert expected == [int(trainer.compute_single_action(obs, explore=False)) for obs in observations]
    # The exported model (TorchScript / SavedModel) outputs the mean-weight Q-values.
    export_dir = str(tmp_path / "export")
    trainer.export_policy_model(export_dir)
    greedy_q = trainer.get_policy().q_values(observations, noise=False)
    if framework == "torch":
        import torch

        exported = torch.jit.load(f"{export_dir}/model.pt")(torch.from_numpy(observations)).detach().numpy()
    else:
        import tensorflow as tf

        exported = tf.saved_model.load(export_dir).signatures["serving_default"](obs=tf.constant(observations))
        exported = exported["output"].numpy()
    np.testing.assert_allclose(exported, greedy_q, rtol=1e-5, atol=1e-5)
    path = trainer.save(str(tmp_path / "ckpt"))
    trainer.stop()
    restored = DQNTrainer({**config, "seed": 5}, "CartPole-v1")
    restored.restore(path)
    assert [int(restored.compute_single_action(obs, explore=False)) for obs in observations] == expected
    restored.stop()
