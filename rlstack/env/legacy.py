"""An adapter that gives old gym-style envs the gymnasium API.

Old envs return only ``obs`` from ``reset()`` and a 4-tuple ``(obs, reward, done, info)``
from ``step()``. gymnasium splits ``done`` into ``terminated`` (the MDP ended: do not
bootstrap) and ``truncated`` (cut short, e.g. a time limit: bootstrap). Old gym marked
time-limit cuts with ``info["TimeLimit.truncated"]``; we honour that flag.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym


class LegacyEnvAdapter(gym.Env):
    """Wraps an env with the old 4-tuple ``step`` / obs-only ``reset`` API.

    Args:
        env: The old-style env. It needs ``observation_space``, ``action_space``,
            ``reset()`` and ``step(action)``; ``seed(s)``, ``render()`` and ``close()``
            are used when present.
    """

    def __init__(self, env: Any) -> None:
        self.env = env
        self.observation_space = env.observation_space
        self.action_space = env.action_space
        self.metadata = getattr(env, "metadata", {})
        self.render_mode = getattr(env, "render_mode", None)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        """Resets the old env (seeding it through ``env.seed`` when it has one)."""
        if seed is not None and hasattr(self.env, "seed"):
            self.env.seed(seed)
        result = self.env.reset()
        # Some half-migrated envs already return (obs, info); accept both.
        if isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], dict):
            return result
        return result, {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        """Steps the old env and splits ``done`` into ``terminated`` and ``truncated``."""
        result = self.env.step(action)
        if len(result) == 5:
            return result
        obs, reward, done, info = result
        info = dict(info or {})
        truncated = bool(done and info.pop("TimeLimit.truncated", False))
        return obs, reward, bool(done) and not truncated, truncated, info

    def render(self) -> Any:
        """Renders the old env, if it can."""
        return self.env.render() if hasattr(self.env, "render") else None

    def close(self) -> None:
        """Closes the old env, if it can."""
        if hasattr(self.env, "close"):
            self.env.close()


def is_legacy_env(env: Any) -> bool:
    """True when ``env`` is not a gymnasium env but looks like an old gym one."""
    if isinstance(env, gym.Env):
        return False
    return all(hasattr(env, name) for name in ("reset", "step", "observation_space", "action_space"))
