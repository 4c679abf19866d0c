"""RepeatAfterMeEnv: a memory test, 1.13's ``ray.rllib.examples.env.repeat_after_me_env``.

Each step shows a random token (0 or 1); the reward is +1 when the action repeats the
token shown ``repeat_delay`` steps earlier and -1 otherwise (0 while the first
``repeat_delay`` steps have nothing to repeat yet), for ``episode_len`` steps. A policy
without memory cannot do better than chance (a mean return of 0); one with memory of the
last ``repeat_delay`` tokens can reach ``episode_len - repeat_delay``. Registered as
``env: RepeatAfterMeEnv`` (config keys ``repeat_delay``, default 1, and ``episode_len``,
default 100).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class RepeatAfterMeEnv(gym.Env):
    """Repeat the token seen ``repeat_delay`` steps ago.

    Args:
        config: ``{"repeat_delay": int >= 0, "episode_len": int >= 1}`` (an EnvContext too).
    """

    def __init__(self, config: dict | None = None) -> None:
        config = dict(config or {})
        self.delay = int(config.get("repeat_delay", 1))
        self.episode_len = int(config.get("episode_len", 100))
        if self.delay < 0 or self.episode_len < 1:
            raise ValueError(f"RepeatAfterMeEnv needs repeat_delay >= 0 and episode_len >= 1; got {config!r}.")
        self.observation_space = gym.spaces.Discrete(2)
        self.action_space = gym.spaces.Discrete(2)
        self._tokens: list[int] = []

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[int, dict]:
        super().reset(seed=seed)
        self._tokens = [self._token()]
        return self._tokens[-1], {}

    def step(self, action: Any) -> tuple[int, float, bool, bool, dict]:
        steps = len(self._tokens)  # tokens shown so far, the current one included
        reward = 0.0
        if steps > self.delay:
            reward = 1.0 if int(action) == self._tokens[-1 - self.delay] else -1.0
        self._tokens.append(self._token())
        return self._tokens[-1], reward, False, steps >= self.episode_len, {}

    def _token(self) -> int:
        return int(self.np_random.integers(2))
