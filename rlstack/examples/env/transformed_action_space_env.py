"""1.13's ``ray.rllib.examples.env.transformed_action_space_env``: an env whose Box
action space is moved to another range.

:func:`transform_action_space` turns a gymnasium id or an env creator into a creator of
that env under :class:`ActionTransform`; the creator reads ``low`` and ``high`` from its
config (the new range, default -1.0 and 1.0). ``TransformedActionPendulum`` is
Pendulum-v1 so wrapped, which tests name by path
(``"ray.rllib.examples.env.transformed_action_space_env.TransformedActionPendulum"``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["ActionTransform", "TransformedActionPendulum", "transform_action_space"]


class ActionTransform(gym.ActionWrapper):
    """Gives ``env`` a Box action space of ``[low, high]`` (same shape and dtype); each
    action is mapped linearly onto the env's own bounds before the env sees it.

    Args:
        env: An env with a Box action space.
        low: The new lower bound (a number or an array of the action's shape).
        high: The new upper bound.
    """

    def __init__(self, env: gym.Env, low: Any, high: Any) -> None:
        super().__init__(env)
        inner = env.action_space
        self._low = np.broadcast_to(np.asarray(low, dtype=inner.dtype), inner.shape)
        self._high = np.broadcast_to(np.asarray(high, dtype=inner.dtype), inner.shape)
        self.action_space = gym.spaces.Box(self._low, self._high, inner.shape, inner.dtype)

    def action(self, action: Any) -> np.ndarray:
        """``action`` in ``[low, high]`` -> the same fraction of the env's own range."""
        inner = self.env.action_space
        fraction = (np.asarray(action) - self._low) / (self._high - self._low)
        return (fraction * (inner.high - inner.low) + inner.low).astype(inner.dtype)


def transform_action_space(env_name_or_creator: str | Callable[[Any], gym.Env]) -> Callable[[dict], gym.Env]:
    """A creator of ``env_name_or_creator``'s env with its actions in ``[low, high]``.

    Args:
        env_name_or_creator: A gymnasium id (made with ``gymnasium.make``) or a creator
            called with the config.

    Returns:
        ``creator(config) -> env``: ``config["low"]`` / ``config["high"]`` (default -1.0 /
        1.0) are the new action range; a creator also gets the config.

    Examples:
        >>> make = transform_action_space("Pendulum-v1")
        >>> env = make({"low": -15.0})
        >>> env.action_space.low.tolist(), env.action_space.high.tolist()
        ([-15.0], [1.0])
    """

    def transformed_action_space_env(config: dict | None = None) -> gym.Env:
        config = config if config is not None else {}
        if isinstance(env_name_or_creator, str):
            inner = gym.make(env_name_or_creator)
        else:
            inner = env_name_or_creator(config)
        return ActionTransform(inner, config.get("low", -1.0), config.get("high", 1.0))

    return transformed_action_space_env


TransformedActionPendulum = transform_action_space("Pendulum-v1")
