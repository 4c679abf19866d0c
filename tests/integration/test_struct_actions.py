"""PPO on a Dict action space (a Discrete and a Box leaf): it learns, acts with nested
actions the env accepts, and a custom distribution that samples a tuple of parts
(1.13's autoregressive example) trains too."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlstack.models.catalog import ModelCatalog
from rlstack.trainers.ppo import PPOTrainer


class PickAndLevel(gym.Env):
    """A bandit: reward 1 for picking the observed bit (picks start at 1), minus the squared
    distance of the level to 1."""

    def __init__(self, config=None):
        self.observation_space = gym.spaces.Discrete(2)
        self.action_space = gym.spaces.Dict({"pick": gym.spaces.Discrete(2, start=1),
                                             "level": gym.spaces.Box(-2.0, 2.0, (1,), np.float32)})

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.bit = int(self.np_random.integers(2))
        return self.bit, {}

    def step(self, action):
        assert self.action_space.contains(action), action
        reward = float(action["pick"] - 1 == self.bit) - float((action["level"][0] - 1.0) ** 2)
        return self.bit, reward, True, False, {}


def test_ppo_learns_a_dict_action_space(framework):
    trainer = PPOTrainer({"env": PickAndLevel, "framework": framework, "num_workers": 0, "train_batch_size": 1000,
                          "sgd_minibatch_size": 250, "num_sgd_iter": 8, "lr": 3e-3, "gamma": 0.0, "seed": 1,
                          "model": {"fcnet_hiddens": [32]}})
    try:
        for _ in range(12):
            result = trainer.train()
        assert result["episode_reward_mean"] > 0.6  # a random policy gets about -0.4
        for bit in (0, 1):
            action = trainer.compute_single_action(bit, explore=False)
            assert PickAndLevel().action_space.contains(action)
            assert action["pick"] == bit + 1 and abs(float(action["level"][0]) - 1.0) < 0.35
    finally:
        trainer.stop()


class TwoStepAutoregressive:
    """A torch distribution over Tuple(Discrete(2), Discrete(2)) that draws a1 and then a2
    from logits shifted by a1, and returns the tuple (a1, a2) as 1.13's did."""

    def __init__(self, inputs, model):
        import torch

        self.inputs, self.torch = inputs, torch

    def _second(self, a1):
        logits = self.inputs[:, 2:] + 2.0 * self.torch.nn.functional.one_hot(a1.long(), 2)
        return self.torch.distributions.Categorical(logits=logits)

    def sample(self):
        a1 = self.torch.distributions.Categorical(logits=self.inputs[:, :2]).sample()
        return a1, self._second(a1).sample()

    def deterministic_sample(self):
        a1 = self.inputs[:, :2].argmax(-1)
        return a1, self._second(a1).logits.argmax(-1)

    def logp(self, actions):
        a1, a2 = actions[:, 0], actions[:, 1]
        first = self.torch.distributions.Categorical(logits=self.inputs[:, :2]).log_prob(a1)
        return first + self._second(a1).log_prob(a2)

    def entropy(self):
        return self.torch.distributions.Categorical(logits=self.inputs[:, :2]).entropy()

    def kl(self, other):
        first = self.torch.distributions.Categorical(logits=self.inputs[:, :2])
        return self.torch.distributions.kl_divergence(first, self.torch.distributions.Categorical(
            logits=other.inputs[:, :2]))

    @staticmethod
    def required_model_output_shape(action_space, model_config):
        return 4


class SameTwice(gym.Env):
    """Reward 1 when both parts of the action are equal."""

    observation_space = gym.spaces.Box(0.0, 1.0, (1,))
    action_space = gym.spaces.Tuple([gym.spaces.Discrete(2), gym.spaces.Discrete(2)])

    def __init__(self, config=None):
        pass

    def reset(self, *, seed=None, options=None):
        return np.zeros(1, np.float32), {}

    def step(self, action):
        assert isinstance(action, tuple) and self.action_space.contains(action), action
        return np.zeros(1, np.float32), float(action[0] == action[1]), True, False, {}


def test_a_custom_distribution_sampling_tuples_trains():
    pytest.importorskip("torch")
    ModelCatalog.register_custom_action_dist("two_step_autoregressive", TwoStepAutoregressive)
    trainer = PPOTrainer({"env": SameTwice, "framework": "torch", "num_workers": 0, "train_batch_size": 400,
                          "sgd_minibatch_size": 100, "num_sgd_iter": 4, "lr": 3e-3, "seed": 2,
                          "model": {"custom_action_dist": "two_step_autoregressive", "fcnet_hiddens": [16]}})
    try:
        result = trainer.train()
        assert result["timesteps_total"] == 400 and result["info"]["learner"]["default_policy"]["learner_stats"]
        batch = trainer.workers.local_worker().sample()
        assert batch["actions"].shape == (batch.count, 2) and batch["actions"].dtype == np.int64
        action = trainer.compute_single_action(np.zeros(1, np.float32))
        assert isinstance(action, tuple) and SameTwice.action_space.contains(action)
    finally:
        trainer.stop()
