"""VectorEnv: several copies of one env stepped together, with automatic resets.

Each ``step`` returns the next observation of every sub-env; a sub-env whose episode
just ended is reset at once, and the observation that ended the episode is returned
separately in ``final_obs`` so that a truncated episode can bootstrap from it.
``terminated`` and ``truncated`` stay apart (DESIGN.md, "Episodes").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from rlstack.env.legacy import LegacyEnvAdapter
from rlstack.errors import EnvError


class VectorEnv:
    """``num_envs`` sub-envs made by ``make_one(vector_index)``.

    Args:
        make_one: Builds the sub-env with the given vector index.
        num_envs: How many sub-envs.
        seeds: Seed of each sub-env's first reset (None: unseeded).
        horizon: Truncate episodes after this many steps (None: the env's own limit).
    """

    def __init__(
        self,
        make_one: Callable[[int], gym.Env],
        num_envs: int,
        seeds: Sequence[int | None] | None = None,
        horizon: int | None = None,
    ) -> None:
        self.envs = [make_one(i) for i in range(num_envs)]
        self.num_envs = num_envs
        self.observation_space = self.envs[0].observation_space
        self.action_space = self.envs[0].action_space
        self._seeds = list(seeds) if seeds is not None else [None] * num_envs
        self.horizon = horizon
        self._steps = np.zeros(num_envs, dtype=np.int64)

    def reset(self) -> list[Any]:
        """Resets every sub-env (seeded on the first call) and returns their observations."""
        observations = []
        for i in range(self.num_envs):
            observations.append(self.reset_one(i, seed=self._seeds[i]))
        self._seeds = [None] * self.num_envs
        return observations

    def reset_one(self, index: int, seed: int | None = None) -> Any:
        """Resets sub-env ``index`` and returns its first observation."""
        self._steps[index] = 0
        result = self.envs[index].reset(seed=seed)
        if not (isinstance(result, tuple) and len(result) == 2):
            # A gymnasium.Env subclass that still has the old obs-only reset.
            self.envs[index] = LegacyEnvAdapter(self.envs[index])
            result = self.envs[index].reset(seed=seed)
        return result[0]

    def step(
        self, actions: Sequence[Any]
    ) -> tuple[list[Any], np.ndarray, np.ndarray, np.ndarray, dict[int, Any], list[dict]]:
        """Steps every sub-env once.

        Returns:
            ``(obs, rewards, terminateds, truncateds, final_obs, infos)``: ``obs`` holds
            the reset observation for sub-envs whose episode ended; ``final_obs`` maps
            their index to the observation that ended it.
        """
        n = self.num_envs
        if isinstance(actions, np.ndarray) and actions.ndim == 1 and actions.dtype.kind in "iu":
            # Discrete actions as Python ints: gymnasium's Discrete.contains (which envs
            # call every step) checks them several times faster than numpy scalars.
            actions = actions.tolist()
        observations: list[Any] = [None] * n
        rewards = np.empty(n, dtype=np.float32)
        terminateds = np.zeros(n, dtype=bool)
        truncateds = np.zeros(n, dtype=bool)
        final_obs: dict[int, Any] = {}
        infos: list[dict] = [{}] * n
        for i, env in enumerate(self.envs):
            result = env.step(actions[i])
            if len(result) != 5:
                if len(result) == 4 and not isinstance(env, LegacyEnvAdapter):
                    raise EnvError(
                        f"{type(env).__name__}.step returned 4 values (old gym API) after a "
                        "gymnasium-style reset; return (obs, reward, terminated, truncated, info) "
                        "or wrap the env in rlstack.env.LegacyEnvAdapter."
                    )
                raise EnvError(f"{type(env).__name__}.step returned {len(result)} values; expected 5.")
            obs, reward, terminated, truncated, info = result
            rewards[i] = reward
            infos[i] = info
            if self.horizon is not None:
                self._steps[i] += 1
                if self._steps[i] >= self.horizon and not terminated:
                    truncated = True
            if terminated or truncated:
                terminateds[i] = bool(terminated)
                truncateds[i] = bool(truncated) and not terminated
                final_obs[i] = obs
                obs = self.reset_one(i)
            observations[i] = obs
        return observations, rewards, terminateds, truncateds, final_obs, infos

    def close(self) -> None:
        """Closes every sub-env."""
        for env in self.envs:
            env.close()
