"""RLlib 1.13's ``ray.rllib.env.apis``: interfaces an env may add to the gymnasium API."""

from rlstack.env.apis.task_settable_env import TaskSettableEnv, TaskType

__all__ = ["TaskSettableEnv", "TaskType"]
