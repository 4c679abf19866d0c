"""StatelessCartPole: CartPole-v1 without the velocities in the observation.

1.13's ``ray.rllib.examples.env.stateless_cartpole``: the observation keeps the cart's
position and the pole's angle and drops both velocities, so the env is only partially
observed. A feed-forward policy cannot tell which way the pole is moving; a policy with
memory (``model.use_lstm``) can infer it from consecutive observations. Registered as
``env: StatelessCartPole`` (no import needed in a YAML file).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

# CartPole-v1's time limit.
MAX_EPISODE_STEPS = 500


class StatelessCartPole(CartPoleEnv):
    """CartPole-v1's dynamics, rewards and 500-step time limit; observations
    ``[cart position, pole angle]``.

    Args:
        config: Unused (an ``env_config`` / EnvContext is accepted, as for any env).
    """

    def __init__(self, config: Any = None, render_mode: str | None = None) -> None:
        super().__init__(render_mode=render_mode)
        high = np.array([self.x_threshold * 2, self.theta_threshold_radians * 2], dtype=np.float32)
        self.observation_space = gym.spaces.Box(-high, high, dtype=np.float32)
        self._steps = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        obs, info = super().reset(seed=seed, options=options)
        self._steps = 0
        return obs[[0, 2]].astype(np.float32), info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        obs, reward, terminated, truncated, info = super().step(action)
        self._steps += 1
        truncated = bool(truncated or self._steps >= MAX_EPISODE_STEPS)
        return obs[[0, 2]].astype(np.float32), float(reward), bool(terminated), truncated, info
