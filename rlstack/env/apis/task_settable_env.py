"""RLlib 1.13's ``TaskSettableEnv``: an env whose task (a curriculum's level, a goal) can
be drawn and set from outside, e.g. by a callback that calls
``trainer.workers.foreach_env(lambda env: env.set_task(task))`` between iterations."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

# Whatever identifies a task: an int level, a dict of parameters, ...
TaskType = Any


class TaskSettableEnv(gym.Env):
    """A gymnasium env with tasks. Subclasses implement the three methods below (and
    ``reset`` / ``step`` as any env); the base raises ``NotImplementedError`` naming the
    class and the method."""

    def sample_tasks(self, n_tasks: int) -> list[TaskType]:
        """Draws ``n_tasks`` tasks from the env's task distribution."""
        raise NotImplementedError(f"{type(self).__name__}.sample_tasks(n_tasks) is not implemented.")

    def set_task(self, task: TaskType) -> None:
        """Makes ``task`` the env's task from its next episode on."""
        raise NotImplementedError(f"{type(self).__name__}.set_task(task) is not implemented.")

    def get_task(self) -> TaskType:
        """The env's current task."""
        raise NotImplementedError(f"{type(self).__name__}.get_task() is not implemented.")
