"""Action noise for deterministic actors (GaussianNoise, OrnsteinUhlenbeckNoise) and the
exploration_config checks that keep each family's types with its algorithms.

* the random phase gives uniform actions in [-1, 1]; ``explore=False`` never adds noise;
* Gaussian noise has the configured standard deviation times the scheduled scale, and
  the scale anneals over the ``scale_timesteps`` after the random phase (1.13's rule);
* the Ornstein-Uhlenbeck process has the stationary variance and lag-1 correlation of
  its AR(1) recursion, is shared by a batch's rows, and is scaled by
  ``scale * ou_base_scale * (high - low)``;
* generator and OU state round-trip through ``get_state`` / ``set_state`` (JSON);
* DQN's types are refused for DDPG-style noise and the reverse, naming what to use;
  switching the type in a config drops the default type's keys (1.13's merge rule).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from rlstack.errors import ConfigError
from rlstack.trainers.common.config import merge_config
from rlstack.trainers.dqn.dqn import DEFAULT_CONFIG as DQN_CONFIG, validate_dqn_config
from rlstack.utils.exploration import (
    NOISE_DEFAULTS,
    GaussianNoise,
    OrnsteinUhlenbeckNoise,
    make_action_noise,
    validate_exploration_config,
    validate_noise_config,
)

GAUSS = {"type": "GaussianNoise", "random_timesteps": 100, "stddev": 0.2, "initial_scale": 1.0,
         "final_scale": 0.5, "scale_timesteps": 1000}
OU = {"type": "OrnsteinUhlenbeckNoise", "random_timesteps": 0, "ou_theta": 0.15, "ou_sigma": 0.2,
      "ou_base_scale": 0.1, "initial_scale": 1.0, "final_scale": 1.0, "scale_timesteps": 1}


def test_defaults_are_classic_rllib_1_13():
    assert NOISE_DEFAULTS["GaussianNoise"] == {"type": "GaussianNoise", "random_timesteps": 1000, "stddev": 0.1,
                                               "initial_scale": 1.0, "final_scale": 0.02, "scale_timesteps": 10000}
    assert NOISE_DEFAULTS["OrnsteinUhlenbeckNoise"] == {
        "type": "OrnsteinUhlenbeckNoise", "random_timesteps": 1000, "ou_theta": 0.15, "ou_sigma": 0.2,
        "ou_base_scale": 0.1, "initial_scale": 1.0, "final_scale": 0.02, "scale_timesteps": 10000}


@pytest.mark.parametrize("config", [GAUSS, {**OU, "random_timesteps": 100}], ids=["gaussian", "ou"])
def test_random_phase_is_uniform_and_explore_false_is_deterministic(config):
    noise = make_action_noise(config, action_dim=2, seed=0)
    mu = np.full((20000, 2), 0.7, np.float32)
    random = noise.apply(mu, timestep=99, explore=True)
    assert random.dtype == np.float32 and random.shape == mu.shape
    assert random.min() >= -1.0 and random.max() <= 1.0
    assert random.mean() == pytest.approx(0.0, abs=0.02)
    assert random.var() == pytest.approx(1.0 / 3.0, abs=0.01)  # U(-1, 1)
    for timestep in (0, 99, 100, 10**6):
        np.testing.assert_array_equal(noise.apply(mu, timestep, explore=False), mu)


def test_gaussian_noise_statistics_and_clipping():
    noise = GaussianNoise(GAUSS, action_dim=3, seed=1)
    mu = np.zeros((40000, 3), np.float32)
    actions = noise.apply(mu, timestep=100, explore=True)  # scale 1.0 at the end of the random phase
    assert actions.std() == pytest.approx(0.2, rel=0.02)
    assert actions.mean() == pytest.approx(0.0, abs=0.005)
    # Noise at the scheduled scale; rows are independent.
    half = noise.apply(mu, timestep=100 + 1000, explore=True)
    assert half.std() == pytest.approx(0.2 * 0.5, rel=0.02)
    assert abs(np.corrcoef(actions[:-1, 0], actions[1:, 0])[0, 1]) < 0.02
    # Near the bounds the result is clipped to [-1, 1].
    edge = noise.apply(np.full((1000, 3), 0.95, np.float32), timestep=100, explore=True)
    assert edge.max() == 1.0 and (edge == 1.0).mean() > 0.3


def test_scale_anneals_after_the_random_phase():
    noise = GaussianNoise(GAUSS, action_dim=1)
    assert noise.scale(0) == 1.0  # (random actions then)
    assert noise.scale(100) == pytest.approx(1.0)
    assert noise.scale(100 + 500) == pytest.approx(0.75)
    assert noise.scale(100 + 1000) == pytest.approx(0.5)
    assert noise.scale(10**7) == pytest.approx(0.5)
    # TD3's 1.13 setting: scale_timesteps 1, initial = final = 1.
    td3 = GaussianNoise({"type": "GaussianNoise", "random_timesteps": 10000, "stddev": 0.1,
                         "initial_scale": 1.0, "final_scale": 1.0, "scale_timesteps": 1}, 1)
    assert td3.scale(10000) == td3.scale(10**6) == 1.0


def test_ou_process_statistics():
    theta, sigma = 0.15, 0.2
    noise = OrnsteinUhlenbeckNoise(OU, action_dim=2, seed=3)
    mu = np.zeros((4, 2), np.float32)
    states, added = [], []
    for _ in range(40000):
        step = noise.apply(mu, timestep=10, explore=True)
        # One process per policy copy: every row of a batch gets the same noise.
        np.testing.assert_array_equal(step, np.broadcast_to(step[0], step.shape))
        states.append(noise.ou_state.copy())
        added.append(step[0].astype(np.float64))
    x = np.asarray(states)[1000:]
    # x' = (1 - theta) x + sigma e: stationary variance sigma^2 / (1 - (1 - theta)^2), lag-1 correlation 1 - theta.
    assert x.var(axis=0) == pytest.approx(np.full(2, sigma**2 / (1 - (1 - theta) ** 2)), rel=0.1)
    assert np.corrcoef(x[:-1, 0], x[1:, 0])[0, 1] == pytest.approx(1 - theta, abs=0.02)
    # Added noise = scale * ou_base_scale * x * (high - low), clipped to [-1, 1] (never reached here).
    np.testing.assert_allclose(np.asarray(added)[1000:], 1.0 * 0.1 * x * 2.0, rtol=1e-6, atol=1e-7)


def test_ou_starts_at_zero_when_the_random_phase_ends():
    noise = OrnsteinUhlenbeckNoise({**OU, "random_timesteps": 5}, action_dim=1, seed=0)
    for t in range(5):
        noise.apply(np.zeros((1, 1)), t, explore=True)
    assert noise.ou_state.tolist() == [0.0]  # random actions do not move the process
    noise.apply(np.zeros((1, 1)), 5, explore=True)
    assert noise.ou_state[0] != 0.0


@pytest.mark.parametrize("config", [GAUSS, OU], ids=["gaussian", "ou"])
def test_state_round_trip_and_seeding(config):
    mu = np.zeros((3, 2), np.float32)
    noise = make_action_noise(config, 2, seed=7)
    for t in range(150):
        noise.apply(mu, t, explore=True)
    state = json.loads(json.dumps(noise.get_state()))  # JSON-able, as checkpoints store it
    expected = [noise.apply(mu, 150 + t, explore=True) for t in range(5)]
    restored = make_action_noise(config, 2, seed=123)
    restored.set_state(state)
    np.testing.assert_array_equal([restored.apply(mu, 150 + t, explore=True) for t in range(5)], expected)
    # Seeds: the same seed repeats, another (another worker) differs.
    first = [make_action_noise(config, 2, seed=1).apply(mu, 200, True) for _ in range(2)]
    np.testing.assert_array_equal(first[0], first[1])
    assert not np.array_equal(first[0], make_action_noise(config, 2, seed=2).apply(mu, 200, True))


def test_noise_types_refused_for_q_learning_and_the_reverse():
    with pytest.raises(ConfigError, match=r"'EpsilonGreedy' picks random actions among Discrete ones.*"
                                          r"GaussianNoise, OrnsteinUhlenbeckNoise"):
        validate_noise_config({"type": "EpsilonGreedy"}, "DDPG")
    with pytest.raises(ConfigError, match=r"not supported by TD3 \('StochasticSampling'"):
        validate_noise_config({"type": "StochasticSampling"}, "TD3")
    with pytest.raises(ConfigError, match=r"'GaussianNoise' adds noise to the continuous actions.*EpsilonGreedy"):
        validate_exploration_config({"type": "GaussianNoise"}, "DQN")
    config = merge_config(DQN_CONFIG, {"exploration_config": {"type": "OrnsteinUhlenbeckNoise"}}, "DQN")
    with pytest.raises(ConfigError, match="not supported by DQN"):
        validate_dqn_config(config)


@pytest.mark.parametrize(
    "config, named",
    [
        ({"type": "Gaussian"}, "Gaussian"),
        ({}, "None"),
        ({"type": "GaussianNoise", "ou_theta": 0.1}, "ou_theta"),  # another type's key
        ({"type": "OrnsteinUhlenbeckNoise", "stddev": 0.1}, "stddev"),
        ({"type": "GaussianNoise", "stdev": 0.1}, "did you mean 'stddev'"),
        ({"type": "GaussianNoise", "stddev": -0.1}, "stddev"),
        ({"type": "GaussianNoise", "stddev": "0.1"}, "stddev"),
        ({"type": "GaussianNoise", "random_timesteps": 10.5}, "random_timesteps"),
        ({"type": "OrnsteinUhlenbeckNoise", "scale_timesteps": -1}, "scale_timesteps"),
        ({"type": "OrnsteinUhlenbeckNoise", "ou_sigma": float("nan")}, "ou_sigma"),
        ({"type": "OrnsteinUhlenbeckNoise", "final_scale": True}, "final_scale"),
    ],
)
def test_validate_noise_config_names_bad_key(config, named):
    with pytest.raises(ConfigError, match=named):
        validate_noise_config(config, "DDPG")


def test_valid_noise_configs():
    validate_noise_config({"type": "GaussianNoise"}, "TD3")
    validate_noise_config(dict(NOISE_DEFAULTS["OrnsteinUhlenbeckNoise"]), "DDPG")
    validate_noise_config({**GAUSS, "random_timesteps": 0, "scale_timesteps": 0}, "TD3")


def test_changing_the_exploration_type_drops_the_default_type_keys():
    defaults = {"exploration_config": dict(NOISE_DEFAULTS["OrnsteinUhlenbeckNoise"]), "evaluation_config": {}}
    merged = merge_config(defaults, {"exploration_config": {"type": "GaussianNoise", "stddev": 0.3}}, "DDPG")
    assert merged["exploration_config"] == {"type": "GaussianNoise", "stddev": 0.3}
    same_type = merge_config(defaults, {"exploration_config": {"ou_sigma": 0.3}}, "DDPG")
    assert same_type["exploration_config"] == {**NOISE_DEFAULTS["OrnsteinUhlenbeckNoise"], "ou_sigma": 0.3}


def test_per_worker_gaussian_noise_scales_are_apex_epsilons():
    config = {**NOISE_DEFAULTS["PerWorkerGaussianNoise"], "random_timesteps": 0, "stddev": 0.5}
    validate_noise_config(config, "APEX_DDPG")
    n = 4
    scales = [make_action_noise(config, 2, seed=i, worker_index=i, num_workers=n).scale(10**6) for i in range(n + 1)]
    # The driver's copy adds nothing; worker i of N: 0.4 ** (1 + 7 (i - 1) / (N - 1)).
    assert scales == pytest.approx([0.0] + [0.4 ** (1 + 7 * (i - 1) / (n - 1)) for i in range(1, n + 1)])
    worker = make_action_noise(config, 2, seed=0, worker_index=1, num_workers=n)
    draws = np.stack([worker.noise(1, 5000)[0] for _ in range(20000)])
    assert draws.std(axis=0) == pytest.approx([0.4 * 0.5] * 2, rel=0.03)
    driver = make_action_noise(config, 2, seed=0, worker_index=0, num_workers=n)
    actions = np.full((3, 2), 0.25, np.float32)
    np.testing.assert_array_equal(driver.apply(actions, 5000, explore=True), actions)


def test_per_worker_ou_noise_scales_are_apex_epsilons():
    config = {**NOISE_DEFAULTS["PerWorkerOrnsteinUhlenbeckNoise"], "random_timesteps": 0, "ou_base_scale": 1.0}
    validate_noise_config(config, "APEX_DDPG")
    n = 4
    noises = [make_action_noise(config, 2, seed=i, worker_index=i, num_workers=n) for i in range(n + 1)]
    assert all(isinstance(noise, OrnsteinUhlenbeckNoise) for noise in noises)
    # The driver's copy adds nothing; worker i of N: 0.4 ** (1 + 7 (i - 1) / (N - 1)).
    expected = [0.0] + [0.4 ** (1 + 7 * (i - 1) / (n - 1)) for i in range(1, n + 1)]
    assert [noise.scale(t) for noise in noises for t in (0, 10**6)] == pytest.approx(
        [scale for scale in expected for _ in range(2)])
    # Worker 1's draws are its OU process times scale * ou_base_scale * (high - low).
    worker = noises[1]
    for _ in range(50):
        step = worker.noise(3, 5000)
        np.testing.assert_allclose(step, np.broadcast_to(0.4 * 1.0 * 2.0 * worker.ou_state, (3, 2)), rtol=1e-12)
    actions = np.full((3, 2), 0.25, np.float32)
    np.testing.assert_array_equal(noises[0].apply(actions, 5000, explore=True), actions)


def test_apex_ddpg_defaults_to_1x_per_worker_ou_noise_and_takes_its_ou_keys():
    from rlstack.trainers.ddpg.apex import APEX_DDPG_DEFAULT_CONFIG
    from rlstack.trainers.ddpg.ddpg import validate_ddpg_config

    assert APEX_DDPG_DEFAULT_CONFIG["exploration_config"] == {"type": "PerWorkerOrnsteinUhlenbeckNoise"}
    # rllib/tuned_examples/ddpg/mountaincarcontinuous-apex-ddpg.yaml sets ou_base_scale alone.
    config = merge_config(APEX_DDPG_DEFAULT_CONFIG, {"exploration_config": {"ou_base_scale": 1.0}}, "APEX_DDPG")
    validate_ddpg_config(config, "APEX_DDPG")
    noise = make_action_noise(config["exploration_config"], 1, seed=0, worker_index=2, num_workers=16)
    assert (noise.base_scale, noise.theta, noise.sigma) == (1.0, 0.15, 0.2)
    assert noise.scale(0) == pytest.approx(0.4 ** (1 + 7 / 15))
    with pytest.raises(ConfigError, match="stddev"):
        validate_noise_config({"type": "PerWorkerOrnsteinUhlenbeckNoise", "stddev": 0.1}, "APEX_DDPG")
