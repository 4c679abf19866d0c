"""DDPG's and TD3's losses against a numpy reference written from the papers, plus
framework parity, acting, exploration in the policies and the config checks.

Covered here:

* a float64 numpy reference of both losses: the deterministic policy gradient's actor
  loss ``-mean Q_1(s, mu(s))`` (Lillicrap et al. 2016), the critics' squared (or Huber)
  TD errors against ``r + gamma^n (1 - terminated) Q'(s', a')`` with TD3's clipped double
  Q and target policy smoothing from a fixed noise draw (Fujimoto et al. 2018), n-step
  discounts, importance weights, and 1.13's L2 term ``l2_reg * sum(w^2) / 2`` over
  kernels only; its own forward pass of the canonical weights;
* the torch and TF ``loss()`` against it (with target networks that differ from the
  online ones), and their gradients against each other and against central finite
  differences of the reference;
* the target-noise draw (clipped Gaussian), polyak target updates, the optimizer step
  mask of ``policy_delay``;
* acting: numpy, torch and TF act alike with and without exploration noise, actions
  are mapped onto the Box bounds; worker-side priorities;
* the config checks and the action-space errors;
* the learner loop and the trainer: ``policy_delay`` leaves the actor alone between its
  steps, per-row TD errors, a two-iteration smoke test per framework, and a checkpoint
  that restores weights, targets, optimizers and every worker's exploration noise.

Each framework is skipped on its own when it is not installed.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlstack.errors import ConfigError
from rlstack.sample_batch import SampleBatch
from rlstack.trainers.common.config import merge_config
from rlstack.trainers.ddpg.ddpg import DEFAULT_CONFIG, validate_ddpg_config
from rlstack.trainers.ddpg.ddpg_policy import DDPGNumpyPolicy, postprocess_ddpg
from tests.helpers.tensors import as_tensors

B = SampleBatch
OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
ACTION_SPACE = gym.spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([2.0, 4.0], np.float32))
N = 16
BASE_CONFIG = {"seed": 0, "gamma": 0.9, "actor_hiddens": [8, 6], "critic_hiddens": [7, 5], "train_batch_size": N,
               "buffer_size": 1000, "l2_reg": 0.01, "target_noise": 0.2, "target_noise_clip": 0.3}
# (twin_q, smooth_target_policy, use_huber)
COMBOS = [(False, False, False), (True, True, False), (True, False, True), (False, True, True)]
COMBO_IDS = [f"twin_q={t}-smooth={s}-huber={h}" for t, s, h in COMBOS]
# A fixed standard-normal draw for target smoothing, with entries beyond the clip
# (0.3 / 0.2 = 1.5 standard deviations).
NOISE = np.random.default_rng(5).standard_normal((N, 2)) * 1.5


def make_config(**overrides):
    return merge_config(DEFAULT_CONFIG, {**BASE_CONFIG, **overrides}, "DDPG")


def make_policy(framework, **overrides):
    config = make_config(framework=framework, **overrides)
    if framework == "torch":
        pytest.importorskip("torch")
        from rlstack.trainers.ddpg.ddpg_torch_policy import DDPGTorchPolicy as cls
    elif framework == "tf":
        pytest.importorskip("tensorflow")
        from rlstack.trainers.ddpg.ddpg_tf_policy import DDPGTFPolicy as cls
    else:
        cls = DDPGNumpyPolicy
    return cls(OBS_SPACE, ACTION_SPACE, config, sampling_seed=3)


def make_batch(seed=0):
    rng = np.random.default_rng(seed)
    return {
        B.OBS: rng.uniform(-1, 1, (N, 3)).astype(np.float32),
        B.ACTIONS: rng.uniform(-1, 1, (N, 2)).astype(np.float32),
        B.REWARDS: rng.normal(size=N).astype(np.float32),
        B.NEXT_OBS: rng.uniform(-1, 1, (N, 3)).astype(np.float32),
        B.TERMINATEDS: rng.random(N) < 0.3,
        B.DISCOUNTS: np.where(rng.random(N) < 0.5, 0.9, 0.81).astype(np.float32),
        B.WEIGHTS: rng.uniform(0.5, 1.5, N).astype(np.float32),
    }


def perturbed(weights, seed):
    # Sorted: the frameworks list their weights in different orders.
    rng = np.random.default_rng(seed)
    return {k: (weights[k] + 0.1 * rng.standard_normal(weights[k].shape)).astype(np.float32) for k in sorted(weights)}


# ----- numpy reference ------------------------------------------------------------------


def _mlp(w, prefix, x):
    i = 0
    while f"{prefix}/fc_{i}/kernel" in w:
        x = np.maximum(x @ w[f"{prefix}/fc_{i}/kernel"] + w[f"{prefix}/fc_{i}/bias"], 0.0)
        i += 1
    return x @ w[f"{prefix}/out/kernel"] + w[f"{prefix}/out/bias"]


def numpy_actor(w, obs):
    """mu(s) = tanh(actor MLP(s)) in float64."""
    return np.tanh(_mlp(w, "actor", obs))


def numpy_q(w, name, obs, actions):
    """Q(s, a) of critic ``name`` (``q`` / ``twin_q``): MLP over concat(obs, a)."""
    return _mlp(w, name, np.concatenate([obs, actions], axis=1))[:, 0]


def reference(weights, target_weights, batch, config, noise=NOISE):
    """(actor_loss, critic_loss, td_error) in float64."""
    w = {k: np.asarray(v, np.float64) for k, v in weights.items()}
    tw = {k: np.asarray(v, np.float64) for k, v in target_weights.items()}
    obs, actions = batch[B.OBS].astype(np.float64), batch[B.ACTIONS].astype(np.float64)
    next_obs = batch[B.NEXT_OBS].astype(np.float64)
    critics = ["q", "twin_q"] if config["twin_q"] else ["q"]
    actor_loss = -numpy_q(w, "q", obs, numpy_actor(w, obs)).mean()
    a_tp1 = numpy_actor(tw, next_obs)
    if config["smooth_target_policy"]:
        clip = config["target_noise_clip"]
        a_tp1 = np.clip(a_tp1 + np.clip(noise * config["target_noise"], -clip, clip), -1.0, 1.0)
    q_tp1 = np.min([numpy_q(tw, name, next_obs, a_tp1) for name in critics], axis=0)
    y = batch[B.REWARDS] + batch[B.DISCOUNTS] * (1.0 - batch[B.TERMINATEDS]) * q_tp1
    td = np.stack([numpy_q(w, name, obs, actions) - y for name in critics])
    if config["use_huber"]:
        d = config["huber_threshold"]
        errors = np.where(np.abs(td) < d, 0.5 * td**2, d * (np.abs(td) - 0.5 * d))
    else:
        errors = 0.5 * td**2
    critic_loss = np.mean(batch[B.WEIGHTS] * errors.sum(axis=0))
    kernels = [name for name in w if name.endswith("/kernel")]
    actor_loss += config["l2_reg"] * sum(np.sum(w[k] ** 2) / 2 for k in kernels if k.startswith("actor/"))
    critic_loss += config["l2_reg"] * sum(np.sum(w[k] ** 2) / 2 for k in kernels if not k.startswith("actor/"))
    return actor_loss, critic_loss, td.sum(axis=0)


def test_reference_forward_matches_numpy_acting_policy():
    policy = make_policy("numpy", twin_q=True)
    obs = make_batch()[B.OBS]
    np.testing.assert_allclose(policy.actor_actions(obs), numpy_actor(policy.get_weights(), obs), rtol=1e-5,
                               atol=1e-6)
    actions = make_batch()[B.ACTIONS]
    q = policy.model.critic_values(obs, actions)
    for j, name in enumerate(["q", "twin_q"]):
        np.testing.assert_allclose(q[j], numpy_q(policy.get_weights(), name, obs, actions), rtol=1e-5, atol=1e-6)


# ----- the framework losses ---------------------------------------------------------------


def _setup(framework, twin_q, smooth, huber):
    """A policy with distinct target weights and the fixed smoothing draw injected."""
    policy = make_policy(framework, twin_q=twin_q, smooth_target_policy=smooth, use_huber=huber,
                         huber_threshold=0.5)
    online = perturbed(policy.get_weights(), 1)
    target = perturbed(online, 2)
    policy.set_weights(online)
    policy.target_model.set_canonical_weights(target)
    if framework == "torch":
        import torch

        policy.draw_target_noise = lambda actions: torch.from_numpy(NOISE.astype(np.float32))
    else:
        import tensorflow as tf

        policy.draw_target_noise = lambda actions: tf.constant(NOISE, tf.float32)
    return policy, online, target


def _num(value):
    return float(value.detach()) if hasattr(value, "detach") else float(value)


@pytest.mark.parametrize(("twin_q", "smooth", "huber"), COMBOS, ids=COMBO_IDS)
def test_loss_matches_numpy_reference(framework, twin_q, smooth, huber):
    policy, online, target = _setup(framework, twin_q, smooth, huber)
    batch = make_batch()
    (actor_loss, critic_loss), stats = policy.loss(as_tensors(framework, batch))
    ref_actor, ref_critic, ref_td = reference(online, target, batch, policy.config)
    assert _num(actor_loss) == pytest.approx(ref_actor, rel=1e-5, abs=1e-6)
    assert _num(critic_loss) == pytest.approx(ref_critic, rel=1e-5, abs=1e-6)
    np.testing.assert_allclose(np.asarray(stats["td_error"]), ref_td, rtol=1e-4, atol=1e-5)
    assert _num(stats["mean_td_error"]) == pytest.approx(ref_td.mean(), rel=1e-4, abs=1e-5)
    q_t = numpy_q(online, "q", batch[B.OBS].astype(np.float64), batch[B.ACTIONS].astype(np.float64))
    for key, value in (("mean_q", q_t.mean()), ("max_q", q_t.max()), ("min_q", q_t.min())):
        assert _num(stats[key]) == pytest.approx(value, rel=1e-5, abs=1e-6)


def _canonical_grads(framework, policy, batch):
    """d actor_loss / d actor weights and d critic_loss / d critic weights, canonical layout."""
    if framework == "torch":
        import torch

        from rlstack.models.torch.blocks import TorchActorCritic

        (actor_loss, critic_loss), _ = policy.loss(as_tensors(framework, batch))
        actor_params, critic_params = policy.model.actor_parameters(), policy.model.critic_parameters()
        grads = torch.autograd.grad(actor_loss, actor_params) + torch.autograd.grad(critic_loss, critic_params)
        scratch = TorchActorCritic(policy.model.spec)
        with torch.no_grad():
            for param, grad in zip(scratch.parameters(), grads):
                param.copy_(grad)
        return scratch.get_canonical_weights()
    import tensorflow as tf

    from rlstack.models.tf.blocks import TFActorCritic

    with tf.GradientTape(persistent=True) as tape:
        (actor_loss, critic_loss), _ = policy.loss(as_tensors(framework, batch))
    grads = tape.gradient(actor_loss, policy.model.actor_variables) + \
        tape.gradient(critic_loss, policy.model.critic_variables)
    scratch = TFActorCritic(policy.model.spec)
    for var, grad in zip(scratch.variables_list, grads):
        var.assign(grad)
    return scratch.get_canonical_weights()


@pytest.mark.parametrize(("twin_q", "smooth", "huber"), COMBOS, ids=COMBO_IDS)
def test_gradients_agree_across_frameworks_and_with_finite_differences(twin_q, smooth, huber):
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    batch = make_batch(1)
    grads = {}
    for framework in ("torch", "tf"):
        policy, online, target = _setup(framework, twin_q, smooth, huber)
        grads[framework] = _canonical_grads(framework, policy, batch)
    assert grads["torch"].keys() == grads["tf"].keys() == online.keys()
    for name in online:
        np.testing.assert_allclose(grads["tf"][name], grads["torch"][name], rtol=2e-4, atol=2e-6, err_msg=name)
    # Central differences of the float64 reference for a few weights of each network:
    # the actor's through the actor loss, the critics' through the critic loss.
    probes = [("actor/fc_0/kernel", (0, 1), 0), ("actor/out/bias", (1,), 0), ("q/fc_1/kernel", (2, 3), 1),
              ("q/out/kernel", (4, 0), 1), ("q/fc_0/bias", (3,), 1)]
    if twin_q:
        probes += [("twin_q/fc_0/kernel", (4, 2), 1), ("twin_q/out/bias", (0,), 1)]
    config = make_config(twin_q=twin_q, smooth_target_policy=smooth, use_huber=huber, huber_threshold=0.5)
    for name, index, which in probes:
        eps = 1e-6
        plus = {k: np.asarray(v, np.float64).copy() for k, v in online.items()}
        minus = {k: v.copy() for k, v in plus.items()}
        plus[name][index] += eps
        minus[name][index] -= eps
        numeric = (reference(plus, target, batch, config)[which]
                   - reference(minus, target, batch, config)[which]) / (2 * eps)
        assert grads["torch"][name][index] == pytest.approx(numeric, rel=1e-3, abs=1e-5), name


def test_actor_and_critic_gradients_stay_in_their_networks(framework):
    # The actor loss moves only the actor, the critic loss only the critics: the
    # critics are frozen for the actor's gradient, the target actor has no gradient.
    policy, _, _ = _setup(framework, True, True, False)
    grads = _canonical_grads(framework, policy, make_batch())
    assert set(grads) == set(policy.get_weights())  # every weight has a gradient of its own loss
    assert any(np.abs(grads[k]).sum() > 0 for k in grads if k.startswith("actor/"))
    assert any(np.abs(grads[k]).sum() > 0 for k in grads if k.startswith("twin_q/"))


def test_target_noise_is_a_clipped_gaussian(framework):
    policy = make_policy(framework, target_noise=0.2, target_noise_clip=0.3)
    if framework == "torch":
        import torch

        noise = policy.target_policy_noise(torch.zeros(20000, 2)).numpy()
    else:
        import tensorflow as tf

        noise = policy.target_policy_noise(tf.zeros([20000, 2])).numpy()
    assert noise.min() == pytest.approx(-0.3) and noise.max() == pytest.approx(0.3)
    inside = noise[np.abs(noise) < 0.3]
    # N(0, 0.2^2) truncated at a = 1.5 sigma: 86.6% of the draws inside, with std
    # 0.2 * sqrt(1 - 2 a phi(a) / (2 Phi(a) - 1)) = 0.2 * 0.7427 there.
    assert inside.size / noise.size == pytest.approx(0.866, abs=0.01)
    assert inside.std() == pytest.approx(0.2 * 0.7427, rel=0.03)


def test_update_target_is_polyak_averaging(framework):
    policy = make_policy(framework, tau=0.25)
    online, target = perturbed(policy.get_weights(), 3), perturbed(policy.get_weights(), 4)
    policy.set_weights(online)
    policy.target_model.set_canonical_weights(target)
    policy.update_target()
    state = policy.get_state()
    for name in online:
        np.testing.assert_allclose(state[f"target/{name}"], 0.25 * online[name] + 0.75 * target[name],
                                   rtol=1e-5, atol=1e-6)
    policy.update_target(tau=1.0)
    for name in online:
        np.testing.assert_array_equal(policy.get_state()[f"target/{name}"], online[name])


def test_policy_delay_step_mask(framework):
    policy = make_policy(framework, policy_delay=3)
    if framework == "tf":
        import tensorflow as tf

        def mask(p, step):
            return tuple(bool(m) for m in p.optimizer_step_mask(tf.constant(step, tf.int64)))
    else:
        def mask(p, step):
            return p.optimizer_step_mask(step)

    # The actor steps on gradient steps 0, 3, 6, ...; the critics on every step.
    expected = [(True, True), (False, True), (False, True)] * 2 + [(True, True)]
    assert [mask(policy, step) for step in range(7)] == expected
    assert all(mask(make_policy(framework), step) == (True, True) for step in range(3))  # DDPG: policy_delay 1


# ----- acting ------------------------------------------------------------------------------


@pytest.mark.parametrize("framework_name", ["torch", "tf"])
def test_numpy_acting_equals_framework_acting(framework_name):
    policy = make_policy(framework_name, twin_q=True, exploration_config={"type": "GaussianNoise",
                                                                         "random_timesteps": 0})
    numpy_policy = make_policy("numpy", twin_q=True, exploration_config={"type": "GaussianNoise",
                                                                        "random_timesteps": 0})
    weights = perturbed(policy.get_weights(), 7)
    policy.set_weights(weights)
    numpy_policy.set_weights(weights)
    obs = make_batch()[B.OBS]
    greedy, extras = policy.compute_actions(obs, explore=False)
    numpy_greedy, _ = numpy_policy.compute_actions(obs, explore=False)
    np.testing.assert_allclose(greedy, numpy_greedy, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(greedy, numpy_actor(weights, obs), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(extras[B.ACTION_DIST_INPUTS], greedy)
    np.testing.assert_allclose(policy.compute_values(obs), numpy_policy.compute_values(obs), rtol=1e-5, atol=1e-6)
    # One seed, one noise stream: the copies explore alike.
    noisy, _ = policy.compute_actions(obs, explore=True)
    np.testing.assert_allclose(noisy, numpy_policy.compute_actions(obs, explore=True)[0], rtol=1e-5, atol=1e-6)
    assert not np.allclose(noisy, greedy)
    # explore=None follows config["explore"].
    policy.config["explore"] = False
    np.testing.assert_array_equal(policy.compute_actions(obs)[0], greedy)


@pytest.mark.parametrize("worker_side_prioritization", [False, True])
def test_the_tf_learner_refreshes_its_numpy_actor_with_what_it_reads(worker_side_prioritization):
    # The actor's weights alone after each update, every weight where the acting copy
    # also computes replay priorities from the critics.
    learner = make_policy("tf", twin_q=True, worker_side_prioritization=worker_side_prioritization)
    acting = make_policy("numpy", twin_q=True, worker_side_prioritization=worker_side_prioritization)
    acting.set_weights(learner.get_weights())
    learner.set_weights(perturbed(learner.get_weights(), 8))
    sent = learner.acting_weights()
    everything = learner.get_weights()
    assert (sorted(sent) == sorted(everything)) == worker_side_prioritization
    acting.set_acting_weights(sent)
    obs = make_batch()[B.OBS]
    np.testing.assert_allclose(acting.compute_actions(obs, explore=False)[0],
                               learner.compute_actions(obs, explore=False)[0], rtol=1e-5, atol=1e-6)
    same_critics = np.allclose(acting.compute_values(obs), learner.compute_values(obs), rtol=1e-5, atol=1e-6)
    assert same_critics == worker_side_prioritization


def test_random_phase_then_noise_follow_the_global_timestep():
    policy = make_policy("numpy", exploration_config={"type": "GaussianNoise", "random_timesteps": 100,
                                                      "stddev": 0.1, "initial_scale": 1.0, "final_scale": 1.0})
    obs = np.zeros((4000, 3), np.float32)
    mu = policy.actor_actions(obs)
    random_actions, _ = policy.compute_actions(obs)
    assert random_actions.std() == pytest.approx(1 / np.sqrt(3), rel=0.05)  # uniform in [-1, 1]
    policy.on_global_var_update(100)
    noisy, _ = policy.compute_actions(obs)
    assert (noisy - mu).std() == pytest.approx(0.1, rel=0.05)


def test_actions_are_mapped_onto_the_box_bounds():
    for normalize_actions in (True, False):
        policy = make_policy("numpy", normalize_actions=normalize_actions)
        env_actions = policy.unsquash_actions(np.array([[-1.0, -1.0], [1.0, 1.0], [0.0, 0.5]], np.float32))
        np.testing.assert_allclose(env_actions, [[-2.0, 0.0], [2.0, 4.0], [0.0, 3.0]])


def test_worker_side_priorities_are_summed_td_errors_of_the_acting_networks():
    config = make_config(twin_q=True, worker_side_prioritization=True, n_step=1)
    policy = DDPGNumpyPolicy(OBS_SPACE, ACTION_SPACE, config, sampling_seed=0)
    policy.set_weights(perturbed(policy.get_weights(), 9))
    data = make_batch(4)

    def piece():
        batch = SampleBatch({key: data[key] for key in (B.OBS, B.ACTIONS, B.REWARDS, B.NEXT_OBS, B.TERMINATEDS)})
        batch[B.TRUNCATEDS] = np.zeros(N, bool)
        batch[B.EPS_ID] = np.zeros(N, np.int64)
        return batch

    out = policy.postprocess_trajectory(piece())
    weights = policy.get_weights()
    _, _, td = reference(weights, weights, {**out, B.WEIGHTS: np.ones(N)}, {**config, "l2_reg": 0.0})
    np.testing.assert_allclose(out[B.PRIORITIES], np.abs(td), rtol=1e-4, atol=1e-5)
    assert B.PRIORITIES not in postprocess_ddpg(piece(), make_config(n_step=1))


# ----- config and spaces ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "space, message",
    [
        (gym.spaces.Discrete(3), r"need a continuous Box action space.*SAC \(discrete\) or DQN"),
        (gym.spaces.MultiDiscrete([2, 3]), r"need a continuous Box action space.*use PPO"),
        (gym.spaces.Box(-np.inf, np.inf, (2,), np.float32), r"need finite action bounds.*RescaleAction"),
        (gym.spaces.Box(np.array([-1.0, 0.0], np.float32), np.array([1.0, np.inf], np.float32)),
         "need finite action bounds"),
    ],
)
def test_action_spaces_a_deterministic_actor_cannot_act_in(space, message):
    with pytest.raises(ConfigError, match=message):
        DDPGNumpyPolicy(OBS_SPACE, space, make_config(), sampling_seed=0)


@pytest.mark.parametrize(
    "overrides, named",
    [
        ({"policy_delay": 0}, "policy_delay"),
        ({"policy_delay": 1.5}, "policy_delay"),
        ({"twin_q": 1}, "twin_q"),
        ({"target_noise": -0.1}, "target_noise"),
        ({"target_noise_clip": "0.5"}, "target_noise_clip"),
        ({"actor_hiddens": [400, 0]}, "actor_hiddens"),
        ({"critic_hiddens": 400}, "critic_hiddens"),
        ({"actor_hidden_activation": "gelu"}, "actor_hidden_activation"),
        ({"critic_lr": 0}, "critic_lr"),
        ({"actor_lr": float("nan")}, "actor_lr"),
        ({"tau": 0.0}, "tau"),
        ({"tau": 1.5}, "tau"),
        ({"l2_reg": -1e-6}, "l2_reg"),
        ({"grad_clip": 0.0}, "grad_clip"),
        ({"huber_threshold": 0}, "huber_threshold"),
        ({"lr_schedule": [[0, 1e-3], [100, 1e-4]]}, "lr_schedule is not used"),
        ({"model": {"custom_model": "mine"}}, "custom_model"),
        ({"exploration_config": {"type": "EpsilonGreedy"}}, "EpsilonGreedy"),
        ({"exploration_config": {"ou_sigma": -1.0}}, "ou_sigma"),
        ({"exploration_config": {"stddev": 0.1}}, "stddev"),  # not an OU key
        ({"buffer_size": 100, "train_batch_size": 256}, "train_batch_size"),
        ({"replay_buffer_config": {"capacity": 0}}, "buffer_size"),
    ],
)
def test_config_errors_name_the_key(overrides, named):
    config = merge_config(DEFAULT_CONFIG, overrides, "DDPG")
    with pytest.raises(ConfigError, match=named):
        validate_ddpg_config(config)


def test_unknown_key_is_refused_with_a_suggestion():
    with pytest.raises(ConfigError, match="did you mean 'actor_hiddens'"):
        merge_config(DEFAULT_CONFIG, {"actor_hidden": [64]}, "DDPG")


def test_default_config_is_classic_rllib_1_13():
    expected = {"twin_q": False, "policy_delay": 1, "smooth_target_policy": False, "target_noise": 0.2,
                "target_noise_clip": 0.5, "use_state_preprocessor": False, "actor_hiddens": [400, 300],
                "actor_hidden_activation": "relu", "critic_hiddens": [400, 300], "critic_hidden_activation": "relu",
                "n_step": 1, "buffer_size": 50000, "prioritized_replay": True, "prioritized_replay_alpha": 0.6,
                "prioritized_replay_beta": 0.4, "prioritized_replay_eps": 1e-6, "critic_lr": 1e-3,
                "actor_lr": 1e-3, "target_network_update_freq": 0, "tau": 0.002, "use_huber": False,
                "huber_threshold": 1.0, "l2_reg": 1e-6, "grad_clip": None, "learning_starts": 1500,
                "rollout_fragment_length": 1, "train_batch_size": 256, "num_workers": 0,
                "worker_side_prioritization": False, "training_intensity": None, "compress_observations": False,
                "min_sample_timesteps_per_reporting": 1000, "evaluation_config": {"explore": False}}
    assert {key: DEFAULT_CONFIG[key] for key in expected} == expected
    assert DEFAULT_CONFIG["exploration_config"] == {
        "type": "OrnsteinUhlenbeckNoise", "random_timesteps": 1000, "ou_base_scale": 0.1, "ou_theta": 0.15,
        "ou_sigma": 0.2, "initial_scale": 1.0, "final_scale": 0.02, "scale_timesteps": 10000}
    # 1.13's replay_buffer_config form maps onto the flat keys.
    config = merge_config(DEFAULT_CONFIG, {"replay_buffer_config": {
        "type": "MultiAgentReplayBuffer", "capacity": 1000, "learning_starts": 10}}, "DDPG")
    validate_ddpg_config(config)
    assert (config["buffer_size"], config["prioritized_replay"], config["learning_starts"]) == (1000, False, 10)


# ----- the learner loop and the trainer --------------------------------------------------------


def _replayed(n, seed=0):
    rows = [make_batch(seed + i) for i in range(n)]
    return SampleBatch({key: np.concatenate([row[key] for row in rows]) for key in rows[0]})


def test_policy_delay_skips_actor_updates(framework):
    # Two gradient steps with policy_delay 2: the actor steps on the first only, the
    # critics on both.
    delayed = make_policy(framework, policy_delay=2)
    stats = delayed.learn_on_batch(_replayed(2))
    once = make_policy(framework, policy_delay=1)
    once.learn_on_batch(_replayed(1))
    start = make_policy(framework).get_weights()
    after_delayed, after_once = delayed.get_weights(), once.get_weights()
    for name in start:
        if name.startswith("actor/"):
            np.testing.assert_allclose(after_delayed[name], after_once[name], rtol=1e-6, atol=1e-7, err_msg=name)
            assert not np.allclose(after_delayed[name], start[name]), name
        else:
            assert not np.allclose(after_delayed[name], after_once[name]), name
    # One TD error per replayed row, in order (the replay priorities).
    assert stats["td_error"].shape == (2 * N,)


def _tiny(framework, **overrides):
    return {"framework": framework, "seed": 0, "num_workers": 0, "learning_starts": 60, "train_batch_size": 16,
            "min_sample_timesteps_per_reporting": 100, "actor_hiddens": [16], "critic_hiddens": [16],
            "exploration_config": {"random_timesteps": 50}, **overrides}


def test_two_iterations(framework):
    from rlstack.trainers.ddpg import DDPGTrainer

    trainer = DDPGTrainer(_tiny(framework), "Pendulum-v1")
    try:
        results = [trainer.train(), trainer.train()]
    finally:
        trainer.stop()
    last = results[-1]
    assert last["timesteps_total"] == 200 and last["num_env_steps_trained"] == (200 - 60 + 1) * 16
    stats = last["info"]["learner"]["default_policy"]["learner_stats"]
    assert {"actor_loss", "critic_loss", "mean_q", "max_q", "min_q", "mean_td_error", "cur_lr"} <= set(stats)
    assert "td_error" not in stats  # popped for the replay priorities
    assert np.isfinite(stats["critic_loss"]) and last["num_target_updates"] == 200
    assert last["replay_buffer"]["num_entries"] == 200


def test_checkpoint_restores_weights_targets_optimizers_and_exploration(framework, tmp_path):
    from rlstack.trainers.ddpg import DDPGTrainer

    trainer = DDPGTrainer(_tiny(framework, twin_q=True), "Pendulum-v1")
    restored = None
    try:
        trainer.train()
        path = trainer.save(str(tmp_path / "checkpoint"))
        obs = np.array([0.3, -0.9, 0.5], np.float32)
        greedy = trainer.compute_single_action(obs, explore=False)
        state = trainer.get_policy().get_state()
        sampling = trainer.workers.local_worker().sampling_policy
        noisy_next = [sampling.compute_actions(obs[None], explore=True)[0] for _ in range(3)]
        restored = DDPGTrainer(_tiny(framework, twin_q=True), "Pendulum-v1")
        restored.restore(path)
        np.testing.assert_allclose(restored.compute_single_action(obs, explore=False), greedy, rtol=1e-6)
        restored_state = restored.get_policy().get_state()
        for key in ("weights/actor/out/kernel", "target/q/fc_0/kernel", "target/twin_q/out/bias",
                    "optimizer/", "num_grad_steps", "target_noise_rng"):
            matches = [k for k in state if k.startswith(key)]
            assert matches, key
            for k in matches:
                np.testing.assert_array_equal(restored_state[k], state[k], err_msg=k)
        # The acting copy's OU process and generator come back: the same next noisy actions.
        restored_sampling = restored.workers.local_worker().sampling_policy
        np.testing.assert_array_equal(
            [restored_sampling.compute_actions(obs[None], explore=True)[0] for _ in range(3)], noisy_next)
    finally:
        trainer.stop()
        if restored is not None:
            restored.stop()


@pytest.mark.parametrize("twin_q", [True, False], ids=["td3", "ddpg"])
def test_one_backward_pass_gives_each_optimizer_its_own_losss_gradient(twin_q):
    # losses_are_separate: the learner loop's one backward pass over the summed losses
    # puts into each network exactly the gradient of its own loss (the actor's loss
    # reads the critics through frozen weights).
    torch = pytest.importorskip("torch")
    policy, _, _ = _setup("torch", twin_q, twin_q, False)
    assert policy.losses_are_separate
    tensors = as_tensors("torch", make_batch(3))
    (actor_loss, critic_loss), _ = policy.loss(tensors)
    actor_params, critic_params = policy.model.actor_parameters(), policy.model.critic_parameters()
    leaks = torch.autograd.grad(actor_loss, critic_params, retain_graph=True, allow_unused=True) + \
        torch.autograd.grad(critic_loss, actor_params, retain_graph=True, allow_unused=True)
    assert all(g is None or not g.abs().sum() for g in leaks)
    expected = torch.autograd.grad(actor_loss, actor_params, retain_graph=True) + \
        torch.autograd.grad(critic_loss, critic_params, retain_graph=True)
    policy.backward((actor_loss, critic_loss))
    for param, grad in zip([*actor_params, *critic_params], expected):
        torch.testing.assert_close(param.grad, grad)
