"""SAC's losses against a numpy reference written from the papers, plus framework parity.

Covered here:

* the actor-critic blocks: torch, TF and numpy forward passes of one set of canonical
  weights agree (one critic and stacked twins, Q(s, a) and Q(s, .)), and a float64
  reference forward pass written here agrees with them;
* the squashed Gaussian in every framework: its log-density against the change-of-variables
  formula, a density that integrates to 1, finite values far in the tails, log-std
  clipping, and the bounds mapping;
* a float64 numpy reference of SAC's three losses and per-row TD errors -- continuous
  (Haarnoja et al. 2018: reparameterised squashed-Gaussian actions, twin critics with the
  Huber loss, targets min_j Q'_j(s', a') - alpha log pi(a'|s'), n-step discounts,
  importance weights) and discrete (Christodoulou 2019: expectations over actions) --
  against both frameworks' ``loss()``, with fixed noise, target critics that differ from
  the critics and alpha != 1; their gradients against each other (each loss w.r.t. its
  own optimizer's parameters) and against finite differences of the reference;
* the entropy target, the polyak target update, acting (numpy ==
  torch == TF for ``explore=False``; actions mapped onto the bounds), and the config and
  action-space errors.

Each framework is skipped on its own when it is not installed.
"""

from __future__ import annotations

import copy
import math

import gymnasium as gym
import numpy as np
import pytest

from rlstack.errors import ConfigError
from rlstack.models.blocks import actor_critic_spec
from rlstack.models.numpy.blocks import NumpyActorCritic
from rlstack.models.numpy.distributions import SquashedGaussian as NumpySquashedGaussian
from rlstack.models.specs import initial_weights
from rlstack.sample_batch import SampleBatch
from rlstack.trainers.common.config import merge_config
from rlstack.trainers.sac.sac import DEFAULT_CONFIG, validate_sac_config
from rlstack.trainers.sac.sac_policy import SACNumpyPolicy, postprocess_sac, target_entropy

B = SampleBatch
OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
BOX = gym.spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32))
DISCRETE = gym.spaces.Discrete(4)
GAMMA = 0.9
N = 12


def _config(**overrides) -> dict:
    config = merge_config(DEFAULT_CONFIG, {"seed": 0, "gamma": GAMMA, "train_batch_size": N,
                                           "Q_model": {"fcnet_hiddens": [8, 6]},
                                           "policy_model": {"fcnet_hiddens": [7]}, **overrides}, "SAC")
    validate_sac_config(config)
    return config


def _policy_class(framework):
    if framework == "torch":
        pytest.importorskip("torch")
        from rlstack.trainers.sac.sac_torch_policy import SACTorchPolicy

        return SACTorchPolicy
    if framework == "tf":
        pytest.importorskip("tensorflow")
        from rlstack.trainers.sac.sac_tf_policy import SACTFPolicy

        return SACTFPolicy
    return SACNumpyPolicy


def _policy(framework, action_space, **overrides):
    return _policy_class(framework)(OBS_SPACE, action_space, _config(**overrides))


# ----- numpy reference ------------------------------------------------------------------


def ref_net(w, prefix, x):
    """A ReLU MLP of canonical weights ``<prefix>/fc_i`` and a linear ``<prefix>/out``, float64."""
    x = np.asarray(x, np.float64)
    i = 0
    while f"{prefix}/fc_{i}/kernel" in w:
        x = np.maximum(x @ w[f"{prefix}/fc_{i}/kernel"] + w[f"{prefix}/fc_{i}/bias"], 0.0)
        i += 1
    return x @ w[f"{prefix}/out/kernel"] + w[f"{prefix}/out/bias"]


def ref_q(w, name, obs, actions=None):
    """Q(s, a) ``[n]`` (``concat(s, a)`` in) or Q(s, .) ``[n, num_actions]``."""
    x = obs if actions is None else np.concatenate([obs, actions], axis=1)
    q = ref_net(w, name, x)
    return q if actions is None else q[:, 0]


def ref_squashed(dist_inputs, noise):
    """``(tanh(u), log p)`` for ``u = mean + std * noise``, by the change of variables
    ``log p(a) = log N(u; mean, std) - sum log(1 - tanh(u)^2)`` written naively (fine in
    float64 for moderate u)."""
    mean, log_std = np.split(np.asarray(dist_inputs, np.float64), 2, axis=-1)
    log_std = np.clip(log_std, -20.0, 2.0)
    std = np.exp(log_std)
    u = mean + std * noise
    gaussian = (-0.5 * ((u - mean) / std) ** 2 - log_std - 0.5 * np.log(2 * np.pi)).sum(-1)
    return np.tanh(u), gaussian - np.log(1.0 - np.tanh(u) ** 2).sum(-1)


def _huber(x):
    return np.where(np.abs(x) < 1.0, 0.5 * x**2, np.abs(x) - 0.5)


def ref_sac_loss(w, target_w, log_alpha, batch, noise, critics, entropy_target, discrete):
    """SAC's ``(actor_loss, critic_loss, alpha_loss, td_error)`` in float64 (see the module
    docstring for the papers)."""
    obs, next_obs = np.asarray(batch[B.OBS], np.float64), np.asarray(batch[B.NEXT_OBS], np.float64)
    n = len(obs)
    alpha = math.exp(log_alpha)
    not_done = 1.0 - np.asarray(batch[B.TERMINATEDS], np.float64)
    rewards, discounts = np.asarray(batch[B.REWARDS], np.float64), np.asarray(batch[B.DISCOUNTS], np.float64)
    weights = np.asarray(batch[B.WEIGHTS], np.float64)
    out = ref_net(w, "actor", np.concatenate([obs, next_obs]))
    if discrete:
        logits = out - out.max(axis=1, keepdims=True)
        log_pi = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
        pi = np.exp(log_pi)
        rows = np.arange(n)
        actions = np.asarray(batch[B.ACTIONS], np.int64)
        q_all = np.stack([ref_q(w, name, obs) for name in critics])
        q_t = q_all[:, rows, actions]
        q_tp1 = np.min([ref_q(target_w, name, next_obs) for name in critics], axis=0)
        v_tp1 = (pi[n:] * (q_tp1 - alpha * log_pi[n:])).sum(-1)
        y = rewards + discounts * not_done * v_tp1
        actor = np.mean((pi[:n] * (alpha * log_pi[:n] - q_all.min(axis=0))).sum(-1))
        alpha_loss = -np.mean(log_alpha * (pi[:n] * (log_pi[:n] + entropy_target)).sum(-1))
    else:
        actions_pi, log_pi = ref_squashed(out, noise)
        actions = np.asarray(batch[B.ACTIONS], np.float64)
        q_t = np.stack([ref_q(w, name, obs, actions) for name in critics])
        q_pi = np.min([ref_q(w, name, obs, actions_pi[:n]) for name in critics], axis=0)
        q_tp1 = np.min([ref_q(target_w, name, next_obs, actions_pi[n:]) for name in critics], axis=0)
        y = rewards + discounts * not_done * (q_tp1 - alpha * log_pi[n:])
        actor = np.mean(alpha * log_pi[:n] - q_pi)
        alpha_loss = -np.mean(log_alpha * (log_pi[:n] + entropy_target))
    td = q_t - y
    critic = sum(np.mean(weights * _huber(td_j)) for td_j in td)
    return actor, critic, alpha_loss, np.abs(td).mean(axis=0)


# ----- helpers ------------------------------------------------------------------------------


def _batch(action_space, seed=1):
    rng = np.random.default_rng(seed)
    if isinstance(action_space, gym.spaces.Discrete):
        actions = rng.integers(0, action_space.n, N)
    else:
        actions = rng.uniform(-0.95, 0.95, (N, 2)).astype(np.float32)
    return SampleBatch({
        B.OBS: rng.uniform(-1, 1, (N, 3)).astype(np.float32),
        B.ACTIONS: actions,
        B.REWARDS: rng.normal(size=N).astype(np.float32),
        B.NEXT_OBS: rng.uniform(-1, 1, (N, 3)).astype(np.float32),
        B.TERMINATEDS: np.arange(N) % 4 == 0,
        B.DISCOUNTS: np.where(np.arange(N) % 3 == 0, GAMMA, GAMMA**2).astype(np.float32),
        B.WEIGHTS: rng.uniform(0.5, 1.5, N).astype(np.float32),
    })


def _random_weights(policy, seed, scale=0.6):
    """Weights of the policy's shapes drawn at a scale where every unit matters."""
    rng = np.random.default_rng(seed)
    shapes = {name: value.shape for name, value in policy.get_weights().items() if name != "log_alpha"}
    return {name: (rng.normal(size=shapes[name]) * scale).astype(np.float32) for name in sorted(shapes)}


def _prepared(framework, action_space, twin_q=True, **overrides):
    """A policy with random weights, log_alpha = log 0.5 and target critics of their own,
    plus those weights for the reference."""
    policy = _policy(framework, action_space, twin_q=twin_q, **overrides)
    weights = _random_weights(policy, 0)
    target = _random_weights(policy, 1)
    policy.set_weights({**weights, "log_alpha": np.float32(math.log(0.5))})
    policy.target_critics.set_canonical_weights(target)
    return policy, weights, target


def _noise(seed=2):
    return np.random.default_rng(seed).normal(size=(2 * N, 2)).astype(np.float32)


def _run_loss(policy, framework, batch, noise):
    """``policy.loss`` on ``batch`` with the loss's noise fixed, as numpy."""
    if framework == "torch":
        import torch

        policy.loss_noise = lambda shape: torch.from_numpy(noise)
        tensors = {key: torch.from_numpy(np.asarray(batch[key])) for key in policy.loss_columns}
    else:
        from rlstack.models.tf.framework import tf

        policy.loss_noise = lambda shape: tf.constant(noise)
        tensors = {key: tf.convert_to_tensor(batch[key]) for key in policy.loss_columns}
    losses, stats = policy.loss(tensors)
    as_numpy = {key: np.asarray(as_numpy_scalar(value)) for key, value in stats.items()}
    return [float(np.asarray(as_numpy_scalar(loss))) for loss in losses], as_numpy, losses, tensors


def as_numpy_scalar(value):
    return value.detach().numpy() if hasattr(value, "detach") else value.numpy()


def _critic_names(twin_q):
    return ("q", "twin_q") if twin_q else ("q",)


# ----- blocks -----------------------------------------------------------------------------------


@pytest.mark.parametrize("action_space", [BOX, DISCRETE], ids=["box", "discrete"])
@pytest.mark.parametrize("twin_q", [True, False], ids=["twin", "single"])
def test_blocks_forward_agrees_across_frameworks_and_with_the_reference(action_space, twin_q):
    torch = pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from rlstack.models.tf.blocks import TFActorCritic
    from rlstack.models.tf.framework import tf
    from rlstack.models.torch.blocks import TorchActorCritic

    discrete = isinstance(action_space, gym.spaces.Discrete)
    kind = "categorical" if discrete else "squashed_gaussian"
    spec = actor_critic_spec(OBS_SPACE, action_space, {"fcnet_hiddens": [5], "fcnet_activation": "relu"},
                             {"fcnet_hiddens": [6, 4], "fcnet_activation": "relu"}, kind, twin_q)
    assert spec.stacked_critics == twin_q
    rng = np.random.default_rng(0)
    weights = {name: rng.normal(size=value.shape).astype(np.float32) for name, value in initial_weights(spec, 0).items()}
    obs = rng.uniform(-1, 1, (5, 3)).astype(np.float32)
    actions = None if discrete else rng.uniform(-1, 1, (5, 2)).astype(np.float32)
    names = _critic_names(twin_q)
    expected_actor = ref_net(weights, "actor", obs)
    expected_q = np.stack([ref_q(weights, name, obs, actions) for name in names])

    numpy_model = NumpyActorCritic(spec)
    numpy_model.set_canonical_weights(weights)
    outputs = {"numpy": (numpy_model.actor_outputs(obs), numpy_model.critic_values(obs, actions))}
    torch_model = TorchActorCritic(spec)
    torch_model.set_canonical_weights(weights)
    with torch.no_grad():
        t_actions = None if actions is None else torch.from_numpy(actions)
        outputs["torch"] = (torch_model.actor_outputs(torch.from_numpy(obs)).numpy(),
                            torch_model.critic_values(torch.from_numpy(obs), t_actions).numpy())
    tf_model = TFActorCritic(spec)
    tf_model.set_canonical_weights(weights)
    tf_actions = None if actions is None else tf.constant(actions)
    outputs["tf"] = (tf_model.actor_outputs(tf.constant(obs)).numpy(),
                     tf_model.critic_values(tf.constant(obs), tf_actions).numpy())
    # Weights come back in the canonical layout, whatever the internal stacking.
    for model in (torch_model, tf_model):
        got = model.get_canonical_weights()
        assert sorted(got) == sorted(weights)
        for name, value in got.items():
            np.testing.assert_array_equal(value, weights[name], err_msg=name)
    for framework, (actor, q) in outputs.items():
        np.testing.assert_allclose(actor, expected_actor, rtol=1e-5, atol=1e-5, err_msg=framework)
        assert q.shape == expected_q.shape == ((len(names), 5, 4) if discrete else (len(names), 5))
        np.testing.assert_allclose(q, expected_q, rtol=1e-5, atol=1e-5, err_msg=framework)


def test_critic_input_is_observation_and_action_and_names_are_canonical():
    spec = actor_critic_spec(OBS_SPACE, BOX, {"fcnet_hiddens": [5]}, {"fcnet_hiddens": [6]},
                             "squashed_gaussian", True)
    shapes = {layer.name: layer.kernel_shape for layer in spec.layers}
    assert shapes == {"actor/fc_0": (3, 5), "actor/out": (5, 4), "q/fc_0": (5, 6), "q/out": (6, 1),
                      "twin_q/fc_0": (5, 6), "twin_q/out": (6, 1)}
    discrete = actor_critic_spec(OBS_SPACE, DISCRETE, None, {"fcnet_hiddens": []}, "categorical", False)
    assert {layer.name: layer.kernel_shape for layer in discrete.critics[0].layers} == {"q/out": (3, 4)}


# ----- the squashed Gaussian ----------------------------------------------------------------------


def _squashed(framework, inputs, low=-1.0, high=1.0):
    if framework == "torch":
        import torch

        from rlstack.models.torch.torch_action_dist import TorchSquashedGaussian

        dist = TorchSquashedGaussian(torch.from_numpy(inputs), None, low, high)
        return dist, torch.from_numpy, lambda t: t.detach().numpy()
    from rlstack.models.tf.framework import tf
    from rlstack.models.tf.tf_action_dist import SquashedGaussian

    return SquashedGaussian(tf.constant(inputs), None, low, high), tf.constant, lambda t: t.numpy()


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_squashed_gaussian_log_density(framework):
    pytest.importorskip("torch" if framework == "torch" else "tensorflow")
    rng = np.random.default_rng(0)
    inputs = np.concatenate([rng.normal(size=(6, 2)), rng.uniform(-1.5, 0.5, (6, 2))], axis=1).astype(np.float32)
    noise = rng.normal(size=(6, 2)).astype(np.float32)
    dist, to_tensor, to_numpy = _squashed(framework, inputs)
    actions, logp = dist.sample_with_logp(noise=to_tensor(noise))
    expected_actions, expected_logp = ref_squashed(inputs, noise)
    np.testing.assert_allclose(to_numpy(actions), expected_actions, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(to_numpy(logp), expected_logp, rtol=1e-4, atol=1e-4)
    # logp(a) of the sampled actions recovers the same density (through atanh).
    np.testing.assert_allclose(to_numpy(dist.logp(actions)), expected_logp, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(NumpySquashedGaussian(inputs).logp(expected_actions), expected_logp, rtol=1e-4,
                               atol=1e-4)
    # The mode is tanh(mean); far in the tails the stable formula stays finite.
    np.testing.assert_allclose(to_numpy(dist.deterministic_sample()), np.tanh(inputs[:, :2]), rtol=1e-6)
    far = np.array([[30.0, -30.0, 0.0, 0.0]], np.float32)
    far_dist, to_tensor, to_numpy = _squashed(framework, far)
    _, far_logp = far_dist.sample_with_logp(noise=to_tensor(np.zeros((1, 2), np.float32)))
    # log N(30; 30, 1) - 2 log(1 - tanh(30)^2) per dimension, with log(1 - tanh(u)^2) ~ 2 log 2 - 2|u|.
    expected = 2 * (-0.5 * np.log(2 * np.pi) - (2 * np.log(2) - 60.0))
    np.testing.assert_allclose(to_numpy(far_logp), [expected], rtol=1e-5)
    # log stds are clipped to [-20, 2].
    clipped, _, to_numpy = _squashed(framework, np.array([[0.0, 50.0]], np.float32))
    np.testing.assert_allclose(to_numpy(clipped.std), [[math.exp(2.0)]], rtol=1e-6)


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_squashed_gaussian_density_integrates_to_one_and_maps_onto_bounds(framework):
    pytest.importorskip("torch" if framework == "torch" else "tensorflow")
    grid = np.linspace(-1 + 1e-7, 1 - 1e-7, 400001)
    inputs = np.repeat(np.array([[0.3, math.log(0.8)]], np.float32), len(grid), axis=0)
    dist, to_tensor, to_numpy = _squashed(framework, inputs)
    density = np.exp(to_numpy(dist.logp(to_tensor(grid[:, None].astype(np.float32)))).astype(np.float64))
    assert np.trapezoid(density, grid) == pytest.approx(1.0, abs=2e-3)
    # On [low, high] the action is low + (tanh(u) + 1) / 2 * (high - low), and logp reads it back.
    bounded, to_tensor, to_numpy = _squashed(framework, inputs[:3], low=np.float32(2.0), high=np.float32(6.0))
    noise = np.array([[-1.0], [0.0], [2.0]], np.float32)
    actions, logp = bounded.sample_with_logp(noise=to_tensor(noise))
    expected_actions, expected_logp = ref_squashed(inputs[:3], noise)
    np.testing.assert_allclose(to_numpy(actions)[:, 0], 2.0 + (expected_actions[:, 0] + 1.0) * 2.0, rtol=1e-5)
    np.testing.assert_allclose(to_numpy(bounded.logp(actions)), expected_logp, rtol=1e-3, atol=1e-3)


# ----- the losses against the reference ---------------------------------------------------------------


@pytest.mark.parametrize("framework", ["torch", "tf"])
@pytest.mark.parametrize("action_space", [BOX, DISCRETE], ids=["box", "discrete"])
@pytest.mark.parametrize("twin_q", [True, False], ids=["twin", "single"])
def test_loss_matches_numpy_reference(framework, action_space, twin_q):
    policy, weights, target = _prepared(framework, action_space, twin_q)
    batch, noise = _batch(action_space), _noise()
    losses, stats, _, _ = _run_loss(policy, framework, batch, noise)
    entropy_target = target_entropy(policy.config, action_space)
    w64 = {k: v.astype(np.float64) for k, v in weights.items()}
    t64 = {k: v.astype(np.float64) for k, v in target.items()}
    expected = ref_sac_loss(w64, t64, math.log(0.5), batch, noise, _critic_names(twin_q), entropy_target,
                            isinstance(action_space, gym.spaces.Discrete))
    np.testing.assert_allclose(losses, expected[:3], rtol=2e-4, atol=2e-5)
    np.testing.assert_allclose(stats["td_error"], expected[3], rtol=2e-4, atol=2e-5)
    assert stats["td_error"].shape == (N,)
    assert stats["alpha_value"] == pytest.approx(0.5) and stats["log_alpha_value"] == pytest.approx(math.log(0.5))
    assert stats["target_entropy"] == pytest.approx(entropy_target)
    for key in ("actor_loss", "critic_loss", "alpha_loss", "mean_q", "max_q", "min_q", "policy_t", "entropy"):
        assert np.isfinite(stats[key]), key


def test_reference_loss_by_hand():
    # One row, one critic with no hidden layers, alpha = 1: every number by hand.
    w = {"actor/out/kernel": np.zeros((1, 2)), "actor/out/bias": np.array([0.0, 0.0]),
         "q/out/kernel": np.array([[1.0], [2.0]]), "q/out/bias": np.array([0.5])}
    batch = {B.OBS: np.array([[1.0]]), B.NEXT_OBS: np.array([[2.0]]), B.ACTIONS: np.array([[0.5]]),
             B.REWARDS: np.array([1.0]), B.DISCOUNTS: np.array([0.9]), B.TERMINATEDS: np.array([False]),
             B.WEIGHTS: np.array([2.0])}
    noise = np.array([[0.0], [0.0]])  # u = 0: a = 0, log p = log N(0; 0, 1) = -0.919
    actor, critic, alpha_loss, td = ref_sac_loss(w, w, 0.0, batch, noise, ("q",), -1.0, False)
    log_n0 = -0.5 * math.log(2 * math.pi)
    q_t = 1.0 + 2.0 * 0.5 + 0.5                      # Q(1, 0.5) = 2.5
    y = 1.0 + 0.9 * ((2.0 + 0.0 + 0.5) - log_n0)     # r + gamma (Q'(2, 0) - log p)
    assert td[0] == pytest.approx(abs(q_t - y))
    assert critic == pytest.approx(2.0 * (abs(q_t - y) - 0.5))  # Huber's linear part, weight 2
    assert actor == pytest.approx(log_n0 - (1.0 + 0.5))          # log p - Q(1, 0)
    assert alpha_loss == pytest.approx(0.0)                      # log alpha = 0


@pytest.mark.parametrize("action_space", [BOX, DISCRETE], ids=["box", "discrete"])
def test_deterministic_loss_and_torch_tf_parity_without_noise(action_space):
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    batch = _batch(action_space)
    results = []
    for framework in ("torch", "tf"):
        policy, weights, target = _prepared(framework, action_space, _deterministic_loss=True)
        policy.loss_noise = None  # the deterministic loss draws no noise
        if framework == "torch":
            import torch

            tensors = {key: torch.from_numpy(np.asarray(batch[key])) for key in policy.loss_columns}
            losses, stats = policy.loss(tensors)
            results.append(([float(x.detach()) for x in losses], stats["td_error"].numpy()))
        else:
            from rlstack.models.tf.framework import tf

            losses, stats = policy.loss({key: tf.convert_to_tensor(batch[key]) for key in policy.loss_columns})
            results.append(([float(x) for x in losses], stats["td_error"].numpy()))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-5, atol=1e-6)
    if action_space is BOX:  # the mean action: the reference with zero noise
        w64 = {k: v.astype(np.float64) for k, v in weights.items()}
        t64 = {k: v.astype(np.float64) for k, v in target.items()}
        expected = ref_sac_loss(w64, t64, math.log(0.5), batch, np.zeros((2 * N, 2)), ("q", "twin_q"), -2.0, False)
        np.testing.assert_allclose(results[0][0], expected[:3], rtol=2e-4, atol=2e-5)


# ----- gradients -----------------------------------------------------------------------------------------


def _torch_grads(policy, losses):
    """Each loss's gradient w.r.t. its own optimizer's parameters, by canonical name."""
    import torch

    actor_params = policy.model.actor_parameters()
    critic_params = policy.model.critic_parameters()
    grads = {}
    for loss, params, component in ((losses[0], actor_params, "actor"), (losses[1], critic_params, "critics")):
        values = torch.autograd.grad(loss, params, retain_graph=True)
        holder = copy.deepcopy(policy.model)
        target = holder.actor if component == "actor" else holder.critics
        with torch.no_grad():
            for param, value in zip(target.parameters(), values):
                param.copy_(value)
        canonical = holder.get_canonical_weights()
        names = [n for n in canonical if n.startswith("actor/") == (component == "actor")]
        grads.update({name: canonical[name] for name in names})
    grads["log_alpha"] = torch.autograd.grad(losses[2], [policy.log_alpha])[0].numpy()
    return grads


def _tf_grads(policy, batch, noise):
    """As :func:`_torch_grads`, through a GradientTape."""
    from rlstack.models.tf.framework import tf

    policy.loss_noise = lambda shape: tf.constant(noise)
    tensors = {key: tf.convert_to_tensor(batch[key]) for key in policy.loss_columns}
    with tf.GradientTape(persistent=True) as tape:
        losses, _ = policy.loss(tensors)
    model = policy.model
    actor = dict(zip(sorted(model.actor_vars), tape.gradient(losses[0], model.actor_variables)))
    raw_names = {id(var): name for name, var in model.critics.raw_variables().items()}
    critic_grads = tape.gradient(losses[1], model.critic_variables)
    raw = {raw_names[id(var)]: grad.numpy() for var, grad in zip(model.critic_variables, critic_grads)}
    grads = {name: grad.numpy() for name, grad in actor.items()}
    grads.update(model.critics.canonical_from_raw(raw))
    grads["log_alpha"] = tape.gradient(losses[2], policy.log_alpha).numpy()
    return grads


def _finite_difference(weights, target, log_alpha, batch, noise, entropy_target, discrete, name, index, which):
    eps = 1e-6
    values = []
    for sign in (1.0, -1.0):
        w = {k: v.astype(np.float64).copy() for k, v in weights.items()}
        la = log_alpha
        if name == "log_alpha":
            la = log_alpha + sign * eps
        else:
            w[name][index] += sign * eps
        t64 = {k: v.astype(np.float64) for k, v in target.items()}
        values.append(ref_sac_loss(w, t64, la, batch, noise, ("q", "twin_q"), entropy_target, discrete)[which])
    return (values[0] - values[1]) / (2 * eps)


@pytest.mark.parametrize("action_space", [BOX, DISCRETE], ids=["box", "discrete"])
def test_gradients_agree_across_frameworks_and_with_finite_differences(action_space):
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    discrete = isinstance(action_space, gym.spaces.Discrete)
    batch, noise = _batch(action_space), _noise()
    torch_policy, weights, target = _prepared("torch", action_space)
    _, _, losses, _ = _run_loss(torch_policy, "torch", batch, noise)
    torch_grads = _torch_grads(torch_policy, losses)
    tf_policy, _, _ = _prepared("tf", action_space)
    tf_grads = _tf_grads(tf_policy, batch, noise)
    assert sorted(torch_grads) == sorted(tf_grads) == sorted([*weights, "log_alpha"])
    for name in torch_grads:
        np.testing.assert_allclose(torch_grads[name], tf_grads[name], rtol=1e-4, atol=1e-5, err_msg=name)
    # Against central differences of the float64 reference: every output unit, and a few
    # hidden weights, of each loss's own parameters.
    entropy_target = target_entropy(torch_policy.config, action_space)
    checks = [("actor/out/bias", i, 0) for i in range(weights["actor/out/bias"].size)]
    checks += [("actor/fc_0/kernel", (1, 2), 0), ("q/out/bias", 0, 1), ("twin_q/out/bias", 0, 1),
               ("q/fc_1/kernel", (3, 2), 1), ("twin_q/fc_0/kernel", (0, 4), 1), ("log_alpha", None, 2)]
    for name, index, which in checks:
        expected = _finite_difference(weights, target, math.log(0.5), batch, noise, entropy_target, discrete,
                                      name, index, which)
        got = torch_grads[name] if index is None else torch_grads[name][index]
        assert float(got) == pytest.approx(expected, rel=1e-3, abs=1e-5), (name, index)


def test_alpha_gradient_in_closed_form():
    # d J_alpha / d log(alpha) = -E[log pi + target_entropy]: alpha grows when the policy's
    # entropy (-E[log pi]) falls below the target.
    pytest.importorskip("torch")
    policy, _, _ = _prepared("torch", BOX)
    _, stats, losses, _ = _run_loss(policy, "torch", _batch(BOX), _noise())
    import torch

    grad = torch.autograd.grad(losses[2], [policy.log_alpha])[0]
    assert float(grad) == pytest.approx(-(-stats["entropy"] + stats["target_entropy"]), rel=1e-5)


# ----- learn_on_batch -------------------------------------------------------------------------------------------


def _stepped(framework, action_space, batch, **overrides):
    policy, weights, target = _prepared(framework, action_space, _deterministic_loss=True, **overrides)
    return policy, policy.learn_on_batch(batch), weights, target


@pytest.mark.parametrize("framework", ["torch", "tf"])
@pytest.mark.parametrize("action_space", [BOX, DISCRETE], ids=["box", "discrete"])
def test_learn_on_batch_takes_one_step_per_train_batch_in_row_order(framework, action_space):
    """Two steps on 2 * train_batch_size rows: the TD errors of the first rows are the
    reference's under the starting weights; the second rows' are not (the critics moved),
    and every parameter group moved, while the target critics stayed put."""
    from rlstack.sample_batch import concat_samples

    batch = concat_samples([_batch(action_space, seed=1), _batch(action_space, seed=2)])
    policy, stats, weights, target = _stepped(framework, action_space, batch)
    assert stats["td_error"].shape == (2 * N,)
    w64 = {k: v.astype(np.float64) for k, v in weights.items()}
    t64 = {k: v.astype(np.float64) for k, v in target.items()}
    discrete = isinstance(action_space, gym.spaces.Discrete)
    noise = np.zeros((2 * N, 2))
    first = ref_sac_loss(w64, t64, math.log(0.5), batch.slice(0, N), noise, ("q", "twin_q"),
                         target_entropy(policy.config, action_space), discrete)
    np.testing.assert_allclose(stats["td_error"][:N], first[3], rtol=2e-4, atol=2e-5)
    second = ref_sac_loss(w64, t64, math.log(0.5), batch.slice(N, 2 * N), noise, ("q", "twin_q"),
                          target_entropy(policy.config, action_space), discrete)
    assert not np.allclose(stats["td_error"][N:], second[3], rtol=1e-6, atol=1e-7)
    moved = policy.get_weights()
    assert not np.allclose(moved["actor/out/bias"], weights["actor/out/bias"])
    assert not np.allclose(moved["q/out/bias"], weights["q/out/bias"])
    assert moved["log_alpha"] != pytest.approx(math.log(0.5))
    state = policy.get_state()
    for name in (n for n in target if not n.startswith("actor/")):
        np.testing.assert_array_equal(state[f"target/{name}"], target[name], err_msg=name)
    for key in ("actor_loss", "critic_loss", "alpha_loss", "alpha_value", "mean_q"):
        assert np.isfinite(stats[key]), key
    assert stats["cur_lr"] == pytest.approx(3e-4)


@pytest.mark.parametrize("action_space", [BOX, DISCRETE], ids=["box", "discrete"])
def test_torch_tf_learn_on_batch_parity(action_space):
    """Three steps with the deterministic loss and clipped gradients move both frameworks
    to the same actor, critics and log_alpha."""
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from rlstack.sample_batch import concat_samples

    batch = concat_samples([_batch(action_space, seed=s) for s in (1, 2, 3)])
    overrides = {"grad_clip": 0.5, "optimization": {"actor_learning_rate": 1e-2, "critic_learning_rate": 1e-2,
                                                    "entropy_learning_rate": 1e-2}}
    torch_policy, torch_stats, _, _ = _stepped("torch", action_space, batch, **overrides)
    tf_policy, tf_stats, _, _ = _stepped("tf", action_space, batch, **overrides)
    torch_weights, tf_weights = torch_policy.get_weights(), tf_policy.get_weights()
    assert sorted(torch_weights) == sorted(tf_weights)
    for name in torch_weights:
        np.testing.assert_allclose(torch_weights[name], tf_weights[name], rtol=1e-4, atol=1e-5, err_msg=name)
    np.testing.assert_allclose(torch_stats["td_error"], tf_stats["td_error"], rtol=1e-4, atol=1e-5)
    for key in ("actor_loss", "critic_loss", "alpha_loss", "grad_gnorm", "grad_gnorm_1", "grad_gnorm_2"):
        assert torch_stats[key] == pytest.approx(tf_stats[key], rel=1e-4, abs=1e-6), key


# ----- target updates, entropy target, postprocessing ----------------------------------------------------------


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_update_target_is_polyak_averaging(framework):
    policy, weights, target = _prepared(framework, BOX, tau=0.25)
    policy.update_target()
    got = policy.get_state()
    critic_names = [name for name in target if not name.startswith("actor/")]
    assert sorted(key for key in got if key.startswith("target/")) == sorted(f"target/{n}" for n in critic_names)
    for name in critic_names:
        expected = 0.25 * weights[name] + 0.75 * target[name]
        np.testing.assert_allclose(got[f"target/{name}"], expected, rtol=1e-6, atol=1e-7, err_msg=name)
    policy.update_target(tau=1.0)
    for name, value in policy.get_state().items():
        if name.startswith("target/"):
            np.testing.assert_array_equal(value, weights[name[len("target/"):]])
    # A fresh policy starts with targets equal to its critics.
    fresh = _policy(framework, BOX).get_state()
    for name, value in fresh.items():
        if name.startswith("target/"):
            np.testing.assert_array_equal(value, fresh["weights/" + name[len("target/"):]])


def test_target_entropy():
    config = _config()
    assert target_entropy(config, gym.spaces.Box(-1, 1, (3,), np.float32)) == -3.0
    assert target_entropy(config, gym.spaces.Discrete(4)) == pytest.approx(0.98 * math.log(4))
    assert target_entropy({**config, "target_entropy": None}, BOX) == -2.0
    assert target_entropy({**config, "target_entropy": -0.5}, BOX) == -0.5


# ----- acting ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("action_space", [BOX, DISCRETE], ids=["box", "discrete"])
def test_numpy_acting_equals_framework_acting(action_space):
    obs = np.random.default_rng(3).uniform(-1, 1, (20, 3)).astype(np.float32)
    reference = _policy("numpy", action_space)
    weights = _random_weights(reference, 5)
    reference.set_weights(weights)
    expected, extras = reference.compute_actions(obs, explore=False)
    values = reference.compute_values(obs)
    for framework in ("torch", "tf"):
        pytest.importorskip("torch" if framework == "torch" else "tensorflow")
        policy = _policy(framework, action_space)
        policy.set_weights(weights)
        actions, framework_extras = policy.compute_actions(obs, explore=False)
        np.testing.assert_allclose(actions, expected, rtol=1e-5, atol=1e-6, err_msg=framework)
        np.testing.assert_allclose(framework_extras[B.ACTION_LOGP], extras[B.ACTION_LOGP], rtol=1e-3, atol=1e-3)
        np.testing.assert_allclose(policy.compute_values(obs), values, rtol=1e-4, atol=1e-5, err_msg=framework)
    # Exploring draws differ from the mean action and stay within [-1, 1].
    sampled, _ = reference.compute_actions(obs, explore=True)
    if action_space is BOX:
        assert np.abs(sampled).max() <= 1.0 and not np.allclose(sampled, expected)
    else:
        assert set(np.unique(sampled)) <= set(range(4))


def test_the_tf_learner_refreshes_its_numpy_actor_with_the_actor_weights_alone():
    # After each update the TF learner hands its numpy acting copy the actor's weights only
    # (acting_weights); the copy acts like the learner, and its critics stay as loaded.
    pytest.importorskip("tensorflow")
    obs = np.random.default_rng(4).uniform(-1, 1, (20, 3)).astype(np.float32)
    learner, acting = _policy("tf", BOX), _policy("numpy", BOX)
    acting.set_weights(learner.get_weights())
    fixed_actions = np.zeros((len(obs), 2), np.float32)
    q_values = acting.model.critic_values(obs, fixed_actions)
    learner.set_weights(_random_weights(learner, 6))
    actor_weights = learner.acting_weights()
    assert sorted(actor_weights) == sorted(f"{layer.name}/{part}" for layer in learner.model.spec.actor.layers
                                           for part in ("kernel", "bias"))
    acting.set_acting_weights(actor_weights)
    np.testing.assert_allclose(acting.compute_actions(obs, explore=False)[0],
                               learner.compute_actions(obs, explore=False)[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(acting.model.critic_values(obs, fixed_actions), q_values)
    with pytest.raises(ValueError, match="set_canonical_weights"):
        NumpyActorCritic(learner.model.spec).set_actor_weights(actor_weights)  # no critics loaded before


@pytest.mark.parametrize("normalize_actions", [True, False])
def test_box_actions_are_mapped_onto_the_bounds(normalize_actions):
    policy = _policy("numpy", BOX, normalize_actions=normalize_actions)
    actions = np.array([[-1.0, -1.0], [0.0, 0.0], [1.0, 1.0]], np.float32)
    np.testing.assert_allclose(policy.unsquash_actions(actions), [[-2.0, 0.0], [0.0, 0.5], [2.0, 1.0]])
    np.testing.assert_allclose(policy.unsquash_actions(actions, normalize=False), actions)


# ----- config and action-space errors ----------------------------------------------------------------------------


@pytest.mark.parametrize(("overrides", "match"), [
    ({"Q_model": {"fcnet_hidens": [8]}}, "Q_model.*fcnet_hidens"),
    ({"policy_model": {"custom_model": "mine"}}, "policy_model.custom_model.*not supported yet"),
    ({"model": {"custom_model": "mine"}}, "model.custom_model"),
    ({"optimization": {"actor_lr": 1e-3}}, "optimization.actor_lr.*takes actor_learning_rate"),
    ({"optimization": {"critic_learning_rate": 0}}, "optimization.critic_learning_rate"),
    ({"tau": 0.0}, "tau"),
    ({"lr_schedule": [[0, 1e-3], [1000, 1e-4]]}, "lr_schedule.*optimization.actor_learning_rate"),
    ({"initial_alpha": -1.0}, "initial_alpha"),
    ({"target_entropy": "high"}, "target_entropy"),
    ({"_use_beta_distribution": True}, "_use_beta_distribution"),
    ({"twin_q": "yes"}, "twin_q"),
    ({"replay_buffer_config": {"capacity": 0}}, "buffer_size"),
    ({"exploration_config": {"type": "EpsilonGreedy"}}, "exploration_config"),
])
def test_config_errors_name_the_key(overrides, match):
    config = merge_config(DEFAULT_CONFIG, overrides, "SAC")
    with pytest.raises(ConfigError, match=match):
        validate_sac_config(config)


def test_sub_configs_merge_key_by_key_as_in_1_13():
    config = _config(Q_model={"fcnet_hiddens": [64]}, optimization={"actor_learning_rate": 1e-3})
    assert config["Q_model"]["fcnet_hiddens"] == [64] and config["Q_model"]["fcnet_activation"] == "relu"
    assert config["optimization"] == {"actor_learning_rate": 1e-3, "critic_learning_rate": 3e-4,
                                      "entropy_learning_rate": 3e-4}
    # 1.13's name of min_sample_timesteps_per_reporting is accepted.
    assert merge_config(DEFAULT_CONFIG, {"timesteps_per_iteration": 1000}, "SAC")[
        "min_sample_timesteps_per_reporting"] == 1000


@pytest.mark.parametrize(("action_space", "match"), [
    (gym.spaces.Box(-np.inf, np.inf, (2,), np.float32), "SAC needs finite action bounds.*RescaleAction.*PPO"),
    (gym.spaces.Box(np.array([-1.0, -np.inf], np.float32), np.array([1.0, 1.0], np.float32)), "finite action bounds"),
    (gym.spaces.MultiDiscrete([2, 3]), "MultiDiscrete.*use PPO.*discretise"),
    (gym.spaces.MultiBinary(2), "Box or Discrete"),
])
def test_action_spaces_sac_cannot_act_in(action_space, match):
    with pytest.raises(ConfigError, match=match):
        SACNumpyPolicy(OBS_SPACE, action_space, _config())


@pytest.mark.parametrize("action_space", [BOX, DISCRETE], ids=["box", "discrete"])
def test_one_backward_pass_gives_each_optimizer_its_own_losss_gradient(action_space):
    # losses_are_separate: one backward pass over actor + critic + alpha loss puts into
    # each optimizer's parameters exactly the gradient of its own loss.
    torch = pytest.importorskip("torch")
    policy, _, _ = _prepared("torch", action_space)
    assert policy.losses_are_separate
    _, _, losses, _ = _run_loss(policy, "torch", _batch(action_space), _noise())
    groups = [policy.model.actor_parameters(), policy.model.critic_parameters(), [policy.log_alpha]]
    for i, loss in enumerate(losses):
        for j, params in enumerate(groups):
            grads = torch.autograd.grad(loss, params, retain_graph=True, allow_unused=True)
            if i != j:  # no loss reaches another optimizer's parameters
                assert all(g is None or not g.abs().sum() for g in grads), (i, j)
    expected = [g for loss, params in zip(losses, groups)
                for g in torch.autograd.grad(loss, params, retain_graph=True)]
    policy.backward(losses)
    for param, grad in zip([p for params in groups for p in params], expected):
        torch.testing.assert_close(param.grad, grad)
