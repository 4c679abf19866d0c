"""TD3Trainer: 1.13's defaults on DDPG's policies, its config errors naming TD3, and a
two-iteration smoke test per framework (the losses, with twin_q, smoothing and
policy_delay, are checked in test_ddpg_loss.py on the same policy classes)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlstack.errors import ConfigError
from rlstack.trainers.common.config import merge_config
from rlstack.trainers.ddpg.ddpg_policy import DDPGNumpyPolicy
from rlstack.trainers.td3 import DEFAULT_CONFIG, TD3Trainer


def test_default_config_is_classic_rllib_1_13():
    expected = {"twin_q": True, "policy_delay": 2, "smooth_target_policy": True, "target_noise": 0.2,
                "target_noise_clip": 0.5, "learning_starts": 10000, "actor_hiddens": [400, 300],
                "critic_hiddens": [400, 300], "n_step": 1, "gamma": 0.99, "actor_lr": 1e-3, "critic_lr": 1e-3,
                "l2_reg": 0.0, "tau": 5e-3, "train_batch_size": 100, "use_huber": False,
                "target_network_update_freq": 0, "num_workers": 0, "worker_side_prioritization": False,
                "clip_rewards": False, "buffer_size": 1000000, "prioritized_replay": False,
                "rollout_fragment_length": 1, "evaluation_config": {"explore": False}}
    assert {key: DEFAULT_CONFIG[key] for key in expected} == expected
    # Gaussian noise replaces DDPG's OU keys entirely.
    assert DEFAULT_CONFIG["exploration_config"] == {"type": "GaussianNoise", "random_timesteps": 10000,
                                                   "stddev": 0.1, "initial_scale": 1.0, "final_scale": 1.0,
                                                   "scale_timesteps": 1}


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"exploration_config": {"type": "EpsilonGreedy"}}, r"not supported by TD3 \('EpsilonGreedy' picks"),
        ({"exploration_config": {"ou_theta": 0.1}}, "Unknown key 'ou_theta' in exploration_config of type "
                                                    "GaussianNoise for TD3"),
        ({"policy_delay": 0}, "policy_delay"),
        ({"tau": 2.0}, "tau"),
    ],
)
def test_config_errors_name_td3_and_the_key(overrides, message):
    with pytest.raises(ConfigError, match=message):
        TD3Trainer.merge_and_validate(overrides)


def test_discrete_actions_are_refused_with_what_to_use():
    config = merge_config(DEFAULT_CONFIG, {}, "TD3")
    with pytest.raises(ConfigError, match=r"TD3 need a continuous Box action space.*SAC \(discrete\) or DQN"):
        DDPGNumpyPolicy(gym.spaces.Box(-1, 1, (3,), np.float32), gym.spaces.Discrete(2), config)


def test_two_iterations(framework):
    config = {"framework": framework, "seed": 0, "learning_starts": 60, "train_batch_size": 16,
              "min_sample_timesteps_per_reporting": 100, "actor_hiddens": [16], "critic_hiddens": [16],
              "exploration_config": {"random_timesteps": 50}}
    trainer = TD3Trainer(config, "Pendulum-v1")
    try:
        results = [trainer.train(), trainer.train()]
        stats = results[-1]["info"]["learner"]["default_policy"]["learner_stats"]
        # TD3 runs on DDPG's policy classes (1.13: TD3 is DDPG with TD3's settings).
        assert type(trainer.get_policy()).__name__ == ("DDPGTorchPolicy" if framework == "torch" else "DDPGTFPolicy")
        assert trainer.get_policy().num_grad_steps == 200 - 60 + 1
        action = trainer.compute_single_action(np.zeros(3, np.float32), explore=False)
    finally:
        trainer.stop()
    assert results[-1]["timesteps_total"] == 200
    assert {"actor_loss", "critic_loss", "mean_q", "mean_td_error"} <= set(stats)
    assert np.isfinite(stats["critic_loss"])
    assert action.shape == (1,) and -2.0 <= float(action[0]) <= 2.0  # on Pendulum's bounds
