"""ActionMaskEnv: a random env whose observations say which actions are allowed.

The shape of classic RLlib's action-masking example env: the observation is a Dict of
``"action_mask"`` (1.0 for an allowed action, 0.0 otherwise) and ``"observations"``; a
step with a masked action raises, so a run that finishes proves the policy never chose
one. Pair it with the masking models in ``rlstack.examples.models.action_mask_model``.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class ActionMaskEnv(gym.Env):
    """Random observations and rewards with a fresh random action mask every step.

    Args:
        config: ``action_space`` (a Discrete space; default ``Discrete(2)``),
            ``observation_space`` (what ``"observations"`` holds; default
            ``Box(-1, 1, (5,))``), ``p_terminated`` (chance each step ends the episode;
            default 0.1; classic RLlib's ``p_done`` is read too) and
            ``max_episode_len`` (a time limit; default None).

    Raises:
        ValueError: From ``step`` when the action is masked out, and from the
            constructor when the action space is not Discrete.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, config: dict | None = None) -> None:
        config = dict(config or {})
        action_space = config.get("action_space", gym.spaces.Discrete(2))
        if not isinstance(action_space, gym.spaces.Discrete):
            raise ValueError(f"ActionMaskEnv needs a Discrete action_space, got {action_space}.")
        self.action_space = action_space
        inner = config.get("observation_space", gym.spaces.Box(-1.0, 1.0, (5,), np.float32))
        self.observation_space = gym.spaces.Dict({
            "action_mask": gym.spaces.Box(0.0, 1.0, (int(action_space.n),), np.float32),
            "observations": inner,
        })
        self.p_terminated = float(config.get("p_terminated", config.get("p_done", 0.1)))
        self.max_episode_len = config.get("max_episode_len")
        self.valid_actions = np.ones(int(action_space.n), dtype=np.float32)
        self._steps = 0

    def _observe(self) -> dict[str, np.ndarray]:
        n = int(self.action_space.n)
        mask = (self.np_random.random(n) < 0.5).astype(np.float32)
        mask[self.np_random.integers(n)] = 1.0  # at least one action is allowed
        self.valid_actions = mask
        return {"action_mask": mask.copy(), "observations": self.observation_space["observations"].sample()}

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        if seed is not None:
            self.observation_space["observations"].seed(int(self.np_random.integers(2**31)))
        self._steps = 0
        return self._observe(), {}

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        index = int(action) - int(self.action_space.start)
        if not (0 <= index < len(self.valid_actions)) or not self.valid_actions[index]:
            raise ValueError(
                f"Invalid action sent to env: {action} is masked out; allowed actions are "
                f"{np.flatnonzero(self.valid_actions).tolist()}.")
        self._steps += 1
        terminated = bool(self.np_random.random() < self.p_terminated)
        truncated = self.max_episode_len is not None and self._steps >= int(self.max_episode_len)
        reward = float(self.np_random.uniform(-1.0, 1.0))
        return self._observe(), reward, terminated, bool(truncated), {}
