"""Sub-envs as Ray actors of their own (remote_worker_envs=True)."""

from __future__ import annotations

import gymnasium as gym
import pytest
import ray

from rlstack.env import register_env
from rlstack.env.apis.task_settable_env import TaskSettableEnv
from rlstack.errors import ConfigError
from rlstack.trainers.ppo import PPOTrainer

SMALL = {"num_workers": 0, "num_envs_per_worker": 3, "remote_worker_envs": True, "train_batch_size": 150,
         "rollout_fragment_length": 50, "sgd_minibatch_size": 50, "num_sgd_iter": 1, "seed": 3,
         "model": {"fcnet_hiddens": [8]}}


class OldApiTaskEnv(TaskSettableEnv):
    """A 1.x env: obs-only reset without seed, 4-value step, and a method of its own."""

    def __init__(self, config=None):
        self.action_space = gym.spaces.Discrete(2)
        self.observation_space = gym.spaces.Box(0.0, 1.0, (2,))
        self.task = 0
        self.steps = 0

    def reset(self):
        self.steps = 0
        return self.observation_space.sample()

    def step(self, action):
        self.steps += 1
        return self.observation_space.sample(), float(self.task), self.steps >= 5, {}

    def set_task(self, task):
        self.task = task

    def get_task(self):
        return self.task


def test_env_class_becomes_the_actor_and_its_methods_are_callable(ray_local):
    trainer = PPOTrainer({**SMALL, "env": OldApiTaskEnv})
    try:
        worker = trainer.workers.local_worker()
        handles = worker.async_env.get_sub_environments()
        assert len(handles) == 3 and all(isinstance(h, ray.actor.ActorHandle) for h in handles)
        # The actors are separate processes whose state the user's own methods change.
        ray.get([h.set_task.remote(1) for h in handles])
        assert trainer.workers.foreach_env(lambda env: ray.get(env.get_task.remote())) == [[1, 1, 1]]
        result = trainer.train()
        assert result["timesteps_total"] == 150
        # Episodes of 5 steps, each paying the task (1) per step.
        assert result["episode_len_mean"] == 5 and result["episode_reward_mean"] == 5.0
    finally:
        trainer.stop()


def test_registered_env_runs_in_a_holder_actor(ray_local):
    register_env("remote_cartpole", lambda ctx: gym.make("CartPole-v1"))
    trainer = PPOTrainer({**SMALL, "env": "remote_cartpole"})
    try:
        result = trainer.train()
        assert result["timesteps_total"] == 150 and result["episodes_this_iter"] > 0
    finally:
        trainer.stop()


def test_remote_worker_envs_needs_several_sub_envs():
    with pytest.raises(ConfigError, match="num_envs_per_worker > 1"):
        PPOTrainer({**SMALL, "num_envs_per_worker": 1, "env": OldApiTaskEnv})
