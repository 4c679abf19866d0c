"""BaseEnv: what classic RLlib's callbacks receive as ``base_env``.

In classic RLlib every env a rollout worker stepped was wrapped into a ``BaseEnv``;
callbacks reached the user's env objects through ``base_env.get_sub_environments()``.
rlstack's :class:`~rlstack.env.VectorEnv` is the one BaseEnv a worker holds. The
``poll``/``send_actions`` protocol of classic RLlib's async envs is not offered.
"""

from __future__ import annotations

from typing import Any

__all__ = ["BaseEnv"]


class BaseEnv:
    """The envs one rollout worker steps together."""

    def get_sub_environments(self) -> list[Any]:
        """The sub-env objects (the user's ``gym.Env`` instances), by vector index."""
        return []

    def get_unwrapped(self) -> list[Any]:
        """Classic RLlib's older name of :meth:`get_sub_environments`."""
        return self.get_sub_environments()
