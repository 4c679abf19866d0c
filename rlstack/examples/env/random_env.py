"""RandomEnv: 1.13's ``ray.rllib.examples.env.random_env``, an env of any spaces for tests.

Observations and rewards are samples of their spaces, and an episode ends at each step
with probability ``p_done`` or after ``max_episode_len`` steps, whatever the actions.
Config keys (all optional): ``action_space`` (default ``Discrete(2)``),
``observation_space`` (``Discrete(2)``), ``reward_space`` (a scalar ``Box(-1, 1)``),
``p_done`` (0.1), ``max_episode_len`` (None: no limit), ``check_action_bounds`` (False:
True raises on an action outside the action space), ``static_samples`` (False: True
gives the same observation and reward at every step). ``RandomLargeObsSpaceEnv`` and
``RandomLargeObsSpaceEnvContActions`` are 1.13's fixed-space variants (a 5000-wide Box
observation; Box(-1, 1, (5,)) actions for the second), which tuned examples and
benchmarks name by path.
"""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np

from rlstack.env.multi_agent_env import make_multi_agent


class RandomEnv(gym.Env):
    """An env whose observations, rewards and episode ends are random draws.

    Args:
        config: The keys listed in the module docstring (an EnvContext or a dict).
    """

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        config = config or {}
        self.action_space = config.get("action_space", gym.spaces.Discrete(2))
        self.observation_space = config.get("observation_space", gym.spaces.Discrete(2))
        self.reward_space = config.get("reward_space", gym.spaces.Box(-1.0, 1.0, (), np.float32))
        self.p_done = float(config.get("p_done", 0.1))
        self.max_episode_len = config.get("max_episode_len")
        self.check_action_bounds = bool(config.get("check_action_bounds", False))
        self.static_samples = bool(config.get("static_samples", False))
        self._static: tuple[Any, Any] | None = None
        self.steps = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        if seed is not None:
            # The spaces draw the samples: seed them from the env's generator.
            for i, space in enumerate((self.observation_space, self.reward_space, self.action_space)):
                space.seed(int(self.np_random.integers(2**31)) + i)
        self.steps = 0
        return self._observation(), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        if self.check_action_bounds and not self.action_space.contains(action):
            raise ValueError(f"Illegal action for {self.action_space}: {action!r}")
        if isinstance(self.action_space, gym.spaces.Tuple) and len(action) != len(self.action_space.spaces):
            raise ValueError(f"Illegal action for {self.action_space}: {action!r}")
        self.steps += 1
        truncated = bool(self.max_episode_len) and self.steps >= self.max_episode_len
        terminated = not truncated and self.p_done > 0.0 and bool(self.np_random.random() < self.p_done)
        obs = self._observation()
        reward = self._static[1] if self.static_samples else self.reward_space.sample()
        return obs, float(reward), terminated, truncated, {}

    def _observation(self) -> Any:
        if not self.static_samples:
            return self.observation_space.sample()
        if self._static is None:
            self._static = (self.observation_space.sample(), self.reward_space.sample())
        return copy.deepcopy(self._static[0])


# 1.13's multi-agent version: config["num_agents"] copies of RandomEnv.
RandomMultiAgentEnv = make_multi_agent(lambda config: RandomEnv(config))


# A flat Box of this width: 1.13's "large observation space" envs (for throughput tests).
LARGE_OBSERVATION_SPACE = gym.spaces.Box(-1.0, 1.0, (5000,), np.float32)


class RandomLargeObsSpaceEnv(RandomEnv):
    """:class:`RandomEnv` with 5000-wide Box observations (the config's other keys apply).

    Args:
        config: RandomEnv's keys; ``observation_space`` is replaced.
    """

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        super().__init__({**(config or {}), "observation_space": LARGE_OBSERVATION_SPACE})


class RandomLargeObsSpaceEnvContActions(RandomEnv):
    """:class:`RandomEnv` with 5000-wide Box observations and ``Box(-1, 1, (5,))`` actions.

    Args:
        config: RandomEnv's keys; ``observation_space`` and ``action_space`` are replaced.
    """

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        super().__init__({**(config or {}), "observation_space": LARGE_OBSERVATION_SPACE,
                          "action_space": gym.spaces.Box(-1.0, 1.0, (5,), np.float32)})
