"""BaseEnv: what classic RLlib's callbacks receive as ``base_env``.

In classic RLlib every env a rollout worker stepped was wrapped into a ``BaseEnv``;
callbacks reached the user's env objects through ``base_env.get_sub_environments()``.
rlstack's :class:`~rlstack.env.VectorEnv` is the one BaseEnv a worker holds. The
``poll``/``send_actions`` protocol of classic RLlib's async envs is not offered.
"""

from __future__ import annotations

from typing import Any

__all__ = ["BaseEnv", "convert_to_base_env"]


class BaseEnv:
    """The envs one rollout worker steps together."""

    def get_sub_environments(self) -> list[Any]:
        """The sub-env objects (the user's ``gym.Env`` instances), by vector index."""
        return []

    def get_unwrapped(self) -> list[Any]:
        """Classic RLlib's older name of :meth:`get_sub_environments`."""
        return self.get_sub_environments()


def convert_to_base_env(
    env: Any,
    make_env: Any = None,
    num_envs: int = 1,
    remote_envs: bool = False,
    remote_env_batch_wait_ms: int = 0,
    worker: Any = None,
    restart_failed_sub_environments: bool = False,
) -> BaseEnv:
    """Classic RLlib's way to turn a user's env into the BaseEnv a rollout worker steps:
    a BaseEnv as it is, else a vector of ``num_envs`` sub-envs, ``env`` first and
    ``make_env(vector_index)`` for the rest (a MultiAgentEnv gives a multi-agent vector).

    Raises:
        NotImplementedError: For ``remote_envs`` (a rollout worker builds its remote
            sub-envs itself, from ``remote_worker_envs=True``).
    """
    if isinstance(env, BaseEnv):
        return env
    if remote_envs:
        raise NotImplementedError("rlstack builds remote sub-envs in the rollout worker only: set "
                                  "remote_worker_envs=True in the trainer's config (with num_envs_per_worker > 1).")
    if num_envs > 1 and make_env is None:
        raise TypeError(f"convert_to_base_env needs make_env (a function of the vector index) for num_envs={num_envs}.")
    from rlstack.env.multi_agent_vector_env import make_vector_env

    return make_vector_env(lambda i: env if i == 0 else make_env(i), num_envs, multi_agent=False,
                           restart_failed=restart_failed_sub_environments)
