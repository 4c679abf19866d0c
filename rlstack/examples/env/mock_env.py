"""MockEnv: 1.13's ``ray.rllib.examples.env.mock_env.MockEnv``, a trivial env for tests.

Observation 0 always (``Discrete(1)``), two actions, reward 1.0 per step, terminated
after ``episode_length`` steps.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym


class MockEnv(gym.Env):
    """An episode of ``episode_length`` steps of reward 1.0 whatever the actions.

    Args:
        episode_length: Steps until the episode terminates; or the env config (an
            EnvContext, when the env is given by name as ``config["env"]``), whose
            ``"episode_length"`` (10) it then is.
        config: Unused (accepted as 1.13's).
    """

    def __init__(self, episode_length: int | Mapping[str, Any] = 10, config: Any = None) -> None:
        if isinstance(episode_length, Mapping):
            config, episode_length = episode_length, episode_length.get("episode_length", 10)
        self.episode_length = int(episode_length)
        self.config = config
        self.i = 0
        self.observation_space = gym.spaces.Discrete(1)
        self.action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[int, dict]:
        super().reset(seed=seed)
        self.i = 0
        return 0, {}

    def step(self, action: Any) -> tuple[int, float, bool, bool, dict]:
        self.i += 1
        return 0, 1.0, self.i >= self.episode_length, False, {}
