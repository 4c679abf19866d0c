"""Classic RLlib 1.x's Q-learning explorations beyond epsilon-greedy, and DQN with
``batch_mode: complete_episodes``, in the numpy acting copy, torch and TF:

* SoftQ samples actions with the frequencies of ``softmax(Q / temperature)`` and acts
  greedily with ``explore=False``; StochasticSampling is SoftQ at temperature 1;
* ParameterNoise acts on a perturbed copy of the Q-network (noise drawn per episode,
  stddev adapted toward epsilon-greedy's KL divergence) while the policy's own weights,
  which learning and ``explore=False`` use, stay clean; it sets complete_episodes, as 1.x;
* with complete_episodes DQN's replay buffer holds whole episodes only;
* 1.x's tuned-example exploration configs start a trainer.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlstack.errors import ConfigError
from rlstack.sample_batch import SampleBatch
from rlstack.trainers.common.config import merge_config
from rlstack.trainers.dqn.dqn import DEFAULT_CONFIG, validate_dqn_config
from rlstack.trainers.dqn.dqn_policy import DQNNumpyPolicy
from rlstack.utils.exploration import ParameterNoise, SoftQ, make_q_exploration

OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
ACTION_SPACE = gym.spaces.Discrete(3)
BASE = {"seed": 0, "model": {"fcnet_hiddens": [16]}, "hiddens": [8], "train_batch_size": 16, "buffer_size": 1000}
FIXED_Q = np.array([1.0, 2.0, 0.0], np.float32)
OBS = np.random.default_rng(0).uniform(-1, 1, (64, 4)).astype(np.float32)


def _policy(kind, exploration_config):
    config = merge_config(DEFAULT_CONFIG, {**BASE, "exploration_config": exploration_config}, "DQN")
    validate_dqn_config(config)
    if kind == "torch":
        pytest.importorskip("torch")
        from rlstack.trainers.dqn.dqn_torch_policy import DQNTorchPolicy

        return DQNTorchPolicy(OBS_SPACE, ACTION_SPACE, config, sampling_seed=1)
    if kind == "tf":
        pytest.importorskip("tensorflow")
        from rlstack.trainers.dqn.dqn_tf_policy import DQNTFPolicy

        return DQNTFPolicy(OBS_SPACE, ACTION_SPACE, config, sampling_seed=1)
    return DQNNumpyPolicy(OBS_SPACE, ACTION_SPACE, config, sampling_seed=1)


KINDS = ["numpy", "torch", "tf"]


def _softmax(x):
    e = np.exp(x - x.max())
    return e / e.sum()


# ----- SoftQ ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("temperature", [0.5, 2.0])
def test_softq_samples_softmax_of_q_over_temperature_and_is_greedy_without_exploring(kind, temperature):
    policy = _policy(kind, {"type": "SoftQ", "temperature": temperature})
    assert isinstance(policy.exploration, SoftQ)
    policy.q_values = lambda obs, noise=True: np.tile(FIXED_Q, (len(obs), 1))
    obs = np.zeros((40000, 4), np.float32)
    actions, extras = policy.compute_actions(obs, explore=True)
    frequencies = np.bincount(actions, minlength=3) / len(actions)
    np.testing.assert_allclose(frequencies, _softmax(FIXED_Q / temperature), atol=0.01)
    np.testing.assert_array_equal(extras["q_values"][0], FIXED_Q)
    greedy, _ = policy.compute_actions(obs[:100], explore=False)
    assert (greedy == 1).all()


def test_softq_default_temperature_random_phase_and_stochastic_sampling():
    softq = make_q_exploration({"type": "SoftQ"}, 0, 0, seed=0)
    assert softq.temperature == 1.0  # 1.13's default
    np.testing.assert_allclose(softq.probabilities(FIXED_Q[None]), _softmax(FIXED_Q)[None])
    # StochasticSampling over Q-values is 1.13's Categorical(Q): SoftQ at temperature 1.
    sampling = make_q_exploration({"type": "StochasticSampling"}, 0, 0, seed=0)
    assert isinstance(sampling, SoftQ) and sampling.temperature == 1.0
    # random_timesteps: uniform actions first, even against a large Q gap.
    early = make_q_exploration({"type": "SoftQ", "temperature": 0.01, "random_timesteps": 100}, 0, 0, seed=0)
    q = np.tile(FIXED_Q, (30000, 1))
    np.testing.assert_allclose(np.bincount(early.choose(q, 99, True), minlength=3) / len(q), [1 / 3] * 3, atol=0.01)
    assert (early.choose(q, 100, True) == 1).all()


# ----- ParameterNoise -------------------------------------------------------------------------


def _ended(count=5):
    terminated = np.zeros(count, bool)
    terminated[-1] = True
    return SampleBatch({SampleBatch.OBS: OBS[:count], SampleBatch.NEXT_OBS: OBS[1:count + 1],
                        SampleBatch.ACTIONS: np.zeros(count, np.int64), SampleBatch.REWARDS: np.ones(count, np.float32),
                        SampleBatch.TERMINATEDS: terminated, SampleBatch.TRUNCATEDS: np.zeros(count, bool),
                        SampleBatch.EPS_ID: np.zeros(count, np.int64)})


@pytest.mark.parametrize("kind", KINDS)
def test_parameter_noise_acts_on_perturbed_weights_and_keeps_the_clean_ones(kind):
    policy = _policy(kind, {"type": "ParameterNoise", "random_timesteps": 0, "initial_stddev": 0.5})
    exploration = policy.exploration
    assert isinstance(exploration, ParameterNoise)
    clean = policy.get_weights()
    clean_q = policy.q_values(OBS, False)

    policy.compute_actions(OBS, explore=True)
    # The policy's own weights (what learning and explore=False use) stay clean...
    for name, value in policy.get_weights().items():
        np.testing.assert_array_equal(value, clean[name])
    np.testing.assert_allclose(policy.q_values(OBS, False), clean_q, rtol=1e-6)
    # ...while the acting copy carries N(0, stddev^2) noise on every weight.
    noise = np.concatenate([n.ravel() for n in exploration.noise.values()])
    assert set(exploration.noise) == set(clean)
    assert noise.std() == pytest.approx(0.5, rel=0.1) and abs(noise.mean()) < 0.05
    perturbed_q = policy.perturbed_q_values(OBS)
    assert not np.allclose(perturbed_q, clean_q, atol=1e-3)
    # The sub-exploration's epsilon is 0.01 after random_timesteps + 1 steps: mostly
    # argmax of the perturbed Q-values when exploring, of the clean ones when not.
    policy.global_timestep = 10
    actions, extras = policy.compute_actions(OBS, explore=True)
    np.testing.assert_allclose(extras["q_values"], perturbed_q, rtol=1e-5, atol=1e-6)
    assert (actions == perturbed_q.argmax(axis=1)).mean() > 0.9
    greedy, extras = policy.compute_actions(OBS, explore=False)
    np.testing.assert_array_equal(greedy, clean_q.argmax(axis=1))
    np.testing.assert_allclose(extras["q_values"], clean_q, rtol=1e-6)

    # The noise stays for the episode and is drawn afresh after it ends.
    first = {name: value.copy() for name, value in exploration.noise.items()}
    policy.compute_actions(OBS, explore=True)
    assert all(np.array_equal(first[name], exploration.noise[name]) for name in first)
    policy.postprocess_trajectory(_ended())
    policy.compute_actions(OBS, explore=True)
    assert not any(np.array_equal(first[name], exploration.noise[name]) for name in first)


def test_parameter_noise_stddev_adapts_toward_epsilon_greedy_kl():
    policy = _policy("numpy", {"type": "ParameterNoise", "random_timesteps": 0, "initial_stddev": 1e-4})
    exploration = policy.exploration
    policy.global_timestep = 10  # epsilon 0.01: target KL -log(0.99 + 0.01 / 3)
    assert exploration.target_kl(10, 3) == pytest.approx(-np.log(1 - 0.01 + 0.01 / 3))
    policy.compute_actions(OBS, explore=True)
    # Tiny noise: the KL divergence is below the target, so the stddev grows by 1%.
    policy.postprocess_trajectory(_ended())
    assert exploration.stddev == pytest.approx(1e-4 * 1.01)
    # Huge noise: far above the target, it shrinks by 1%.
    exploration.stddev = 10.0
    policy.compute_actions(OBS, explore=True)
    policy.postprocess_trajectory(_ended())
    assert exploration.stddev == pytest.approx(10.0 / 1.01)
    # The default sub-exploration: random actions through random_timesteps + 1, then 1%.
    default = make_q_exploration({"type": "ParameterNoise"}, 0, 0, seed=0)
    assert (default.random_timesteps, default.stddev) == (10000, 1.0)
    assert default.epsilon(10001) == 1.0 and default.epsilon(10002) == pytest.approx(0.01)


def test_parameter_noise_sets_complete_episodes_and_refuses_noisy_nets():
    config = merge_config(DEFAULT_CONFIG, {"exploration_config": {"type": "ParameterNoise"}}, "DQN")
    assert config["batch_mode"] == "truncate_episodes"
    validate_dqn_config(config)
    assert config["batch_mode"] == "complete_episodes"  # as 1.x did, with a warning
    noisy = merge_config(DEFAULT_CONFIG, {"exploration_config": {"type": "ParameterNoise"}, "noisy": True}, "DQN")
    with pytest.raises(ConfigError, match="noisy"):
        validate_dqn_config(noisy)


# ----- trainers -------------------------------------------------------------------------------

TINY = {**BASE, "num_workers": 0, "learning_starts": 64, "min_sample_timesteps_per_reporting": 128,
        "rollout_fragment_length": 4, "target_network_update_freq": 64}


@pytest.mark.parametrize("rollout_inference", ["numpy", "framework"])
def test_dqn_complete_episodes_replays_whole_episodes_only(framework, rollout_inference):
    from rlstack.trainers.dqn import DQNTrainer

    config = {**TINY, "framework": framework, "batch_mode": "complete_episodes", "n_step": 1,
              "rollout_inference": rollout_inference, "prioritized_replay": False}
    trainer = DQNTrainer(config, "CartPole-v1")
    try:
        result = trainer.train()
        rows = trainer.replay_buffer.get_state()
        terminated = rows[f"column/{SampleBatch.TERMINATEDS}"]
        # Every row belongs to an episode that ended (CartPole's early episodes end by
        # falling): the last row ends one, and there is one terminal row per episode.
        assert len(terminated) == result["timesteps_total"] > 0
        assert terminated[-1] and terminated.sum() == result["episodes_total"]
    finally:
        trainer.stop()


def test_tuned_1x_exploration_configs_train(framework):
    from rlstack.trainers.dqn import DQNTrainer

    # rllib/tuned_examples/dqn/cartpole-dqn-softq.yaml and cartpole-dqn-param-noise.yaml.
    softq = {"exploration_config": {"type": "SoftQ", "temperature": 0.5}, "n_step": 3}
    param_noise = {"exploration_config": {"type": "ParameterNoise", "random_timesteps": 100, "initial_stddev": 1.0},
                   "batch_mode": "complete_episodes"}
    for overrides in (softq, param_noise):
        trainer = DQNTrainer({**TINY, "framework": framework, **overrides}, "CartPole-v1")
        try:
            result = trainer.train()
            assert result["timesteps_total"] >= 128 and result["num_env_steps_trained"] > 0
            if "batch_mode" in overrides:
                assert trainer.config["batch_mode"] == "complete_episodes"
                assert "cur_epsilon" in result
        finally:
            trainer.stop()
