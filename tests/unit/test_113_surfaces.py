"""1.13 names that user code imports beside the trainers: each exists at its renamed path
and behaves as 1.13 documented it."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlstack.sample_batch import SampleBatch


def test_policy_at_the_package_root():
    import rlstack
    from rlstack.policies.policy import Policy

    assert rlstack.Policy is Policy and "Policy" in rlstack.__all__


def test_with_common_config_merges_sub_dicts_and_leaves_common_config_alone():
    from rlstack.trainers.trainer import COMMON_CONFIG, with_common_config

    config = with_common_config({"my_key": 3, "model": {"fcnet_hiddens": [8]}})
    assert config["my_key"] == 3 and config["model"]["fcnet_hiddens"] == [8]
    assert config["model"]["fcnet_activation"] == COMMON_CONFIG["model"]["fcnet_activation"]
    assert "my_key" not in COMMON_CONFIG and COMMON_CONFIG["model"]["fcnet_hiddens"] != [8]
    from rlstack.trainers import with_common_config as from_the_package  # 1.13's ray.rllib.agents path

    assert from_the_package is with_common_config


def test_task_settable_env_and_env_state():
    from rlstack.env.apis.task_settable_env import TaskSettableEnv
    from rlstack.env.multi_agent_env import ENV_STATE

    class Levels(TaskSettableEnv):
        def __init__(self):
            self.level = 0

        def set_task(self, task):
            self.level = task

        def get_task(self):
            return self.level

    env = Levels()
    env.set_task(2)
    assert env.get_task() == 2 and isinstance(env, gym.Env) and ENV_STATE == "state"
    with pytest.raises(NotImplementedError, match="Levels.sample_tasks"):
        env.sample_tasks(3)


def test_compute_advantages_1_13_signature_and_layout():
    from rlstack.evaluation.postprocessing import Postprocessing, compute_advantages

    rewards = np.array([1.0, 0.0, 2.0], np.float32)
    vf_preds = np.array([0.5, 0.25, 1.0], np.float32)
    gamma, lam, last_r = 0.9, 0.8, 3.0
    batch = compute_advantages(SampleBatch({"rewards": rewards, "vf_preds": vf_preds}), last_r, gamma, lam)
    values = np.append(vf_preds, last_r)
    deltas = rewards + gamma * values[1:] - values[:-1]
    expected = np.array([sum((gamma * lam) ** k * deltas[t + k] for k in range(3 - t)) for t in range(3)])
    np.testing.assert_allclose(batch[Postprocessing.ADVANTAGES], expected, rtol=1e-6)
    np.testing.assert_allclose(batch[Postprocessing.VALUE_TARGETS], expected + vf_preds, rtol=1e-6)

    plain = compute_advantages(SampleBatch({"rewards": rewards}), 0.0, 0.5, use_gae=False, use_critic=False)
    np.testing.assert_allclose(plain["advantages"], [1.5, 1.0, 2.0])
    assert plain["value_targets"].tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="use_critic=True"):
        compute_advantages(SampleBatch({"rewards": rewards}), 0.0, use_gae=True, use_critic=False)


def test_tf_one_hot_of_discrete_and_multi_discrete():
    pytest.importorskip("tensorflow")
    from rlstack.utils.tf_utils import one_hot

    assert one_hot(np.array([0, 2]), gym.spaces.Discrete(3)).numpy().tolist() == [[1, 0, 0], [0, 0, 1]]
    encoded = one_hot(np.array([[1, 0]]), gym.spaces.MultiDiscrete([2, 3])).numpy()
    assert encoded.tolist() == [[0, 1, 1, 0, 0]]
    with pytest.raises(ValueError, match="Discrete or MultiDiscrete"):
        one_hot(np.zeros(2), gym.spaces.Box(0, 1, (2,)))
