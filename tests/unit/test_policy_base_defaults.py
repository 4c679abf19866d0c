"""A hand-written policy that only acts (1.13's heuristic policies define compute_actions
alone) can be built; what it lacks fails with a message that says what to do."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlstack.policies.policy import Policy
from rlstack.sample_batch import SampleBatch


class AlwaysZero(Policy):
    def compute_actions(self, obs_batch, explore=None, state_batches=None, prev_action_batch=None,
                        prev_reward_batch=None):
        return np.zeros(len(obs_batch), dtype=np.int64), {}


def _policy() -> AlwaysZero:
    return AlwaysZero(gym.spaces.Box(-1.0, 1.0, (2,), np.float32), gym.spaces.Discrete(3), {})


def test_a_policy_with_only_compute_actions_builds_and_acts():
    policy = _policy()
    actions, _ = policy.compute_actions(np.zeros((4, 2), np.float32))
    assert actions.tolist() == [0, 0, 0, 0]
    assert policy.get_weights() == {}
    policy.set_weights({})  # what a checkpoint or a weight sync of no weights hands it


def test_what_it_does_not_define_names_the_class_and_the_way_out():
    policy = _policy()
    with pytest.raises(NotImplementedError, match="AlwaysZero does not learn.*policies_to_train"):
        policy.learn_on_batch(SampleBatch({"obs": np.zeros((2, 2), np.float32)}))
    with pytest.raises(NotImplementedError, match="AlwaysZero has no weights to set.*define set_weights"):
        policy.set_weights({"w": np.zeros(2)})
