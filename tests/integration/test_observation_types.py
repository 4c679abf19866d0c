"""PPO trains on image, Dict, continuous and old-gym envs, in both frameworks."""

from __future__ import annotations

import numpy as np
import pytest

from rlstack.env import register_env
from rlstack.trainers.ppo import PPOTrainer
from tests.helpers.envs import ContinuousEnv, DictObsEnv, ImageEnv, OldGymCorridor

SMALL = {"num_workers": 0, "train_batch_size": 200, "sgd_minibatch_size": 50, "num_sgd_iter": 2,
         "rollout_fragment_length": 100, "seed": 0, "model": {"fcnet_hiddens": [16]}}


@pytest.mark.parametrize("env", [ImageEnv, DictObsEnv], ids=["image", "dict"])
def test_two_iterations(framework, env):
    trainer = PPOTrainer({**SMALL, "framework": framework, "num_envs_per_worker": 2}, env)
    for _ in range(2):
        result = trainer.train()
    assert result["timesteps_total"] == 400
    assert result["episodes_total"] > 0 and np.isfinite(result["episode_reward_mean"])
    stats = result["info"]["learner"]["default_policy"]["learner_stats"]
    assert np.isfinite(stats["total_loss"])
    obs, _ = env().reset(seed=1)
    assert trainer.compute_single_action(obs, explore=False) in range(trainer.get_policy().action_space.n)
    trainer.stop()


def test_old_gym_env_trains_through_adapter(framework):
    register_env("old_corridor", lambda ctx: OldGymCorridor(ctx))
    trainer = PPOTrainer({**SMALL, "framework": framework}, "old_corridor")
    result = trainer.train()
    assert result["episodes_this_iter"] > 0
    assert result["episode_len_mean"] <= 30
    trainer.stop()


def test_continuous_actions_are_mapped_to_bounds(framework):
    trainer = PPOTrainer({**SMALL, "framework": framework}, ContinuousEnv)
    trainer.train()  # the env asserts every action lies in its Box
    action = trainer.compute_single_action(np.zeros(2, np.float32))
    assert action.shape == (1,) and -2.0 <= float(action[0]) <= 2.0
    trainer.stop()


def test_bad_observation_to_compute_action():
    trainer = PPOTrainer(SMALL, "CartPole-v1")
    with pytest.raises(ValueError, match=r"shape \(3,\).*does not fit the observation space"):
        trainer.compute_single_action([0.0, 0.0, 0.0])
    trainer.stop()


def test_same_seed_same_results():
    results = []
    for _ in range(2):
        trainer = PPOTrainer({**SMALL, "seed": 42}, "CartPole-v1")
        result = trainer.train()
        results.append((result["episode_reward_mean"],
                        result["info"]["learner"]["default_policy"]["learner_stats"]["total_loss"],
                        trainer.get_weights()["default_policy"]["logits/kernel"].copy()))
        trainer.stop()
    assert results[0][0] == results[1][0]
    assert results[0][1] == results[1][1]
    np.testing.assert_array_equal(results[0][2], results[1][2])
