"""Small deterministic envs for tests: image, Dict and old-gym-API observations."""

from __future__ import annotations

import gymnasium as gym
import numpy as np


class ImageEnv(gym.Env):
    """10x10x3 images; reward 1 when the action matches the brighter half. 20 steps."""

    observation_space = gym.spaces.Box(0.0, 1.0, (10, 10, 3), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config=None):
        self._rng = np.random.default_rng(0)
        self._t = 0

    def _obs(self):
        self._side = int(self._rng.integers(2))
        img = self._rng.uniform(0, 0.5, (10, 10, 3)).astype(np.float32)
        img[:, 5 * self._side : 5 * self._side + 5] += 0.5
        return img

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._t = 0
        return self._obs(), {}

    def step(self, action):
        reward = float(action == self._side)
        self._t += 1
        return self._obs(), reward, False, self._t >= 20, {}


class DictObsEnv(gym.Env):
    """Dict observations (image + vector + Discrete); reward 1 when the action equals the
    Discrete entry. Episodes end after 15 steps (terminated)."""

    observation_space = gym.spaces.Dict(
        {
            "image": gym.spaces.Box(0.0, 1.0, (8, 8, 1), np.float32),
            "vector": gym.spaces.Box(-1.0, 1.0, (3,), np.float32),
            "choice": gym.spaces.Discrete(3),
        }
    )
    action_space = gym.spaces.Discrete(3)

    def __init__(self, config=None):
        self._rng = np.random.default_rng(0)
        self._t = 0

    def _obs(self):
        self._choice = int(self._rng.integers(3))
        return {
            "image": self._rng.uniform(0, 1, (8, 8, 1)).astype(np.float32),
            "vector": self._rng.uniform(-1, 1, 3).astype(np.float32),
            "choice": self._choice,
        }

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._t = 0
        return self._obs(), {}

    def step(self, action):
        reward = float(action == self._choice)
        self._t += 1
        return self._obs(), reward, self._t >= 15, False, {}


class OldGymCorridor:
    """An old gym-style env (no gymnasium base class): ``reset()`` returns only obs and
    ``step()`` returns ``(obs, reward, done, info)``. Walk right to the end of a corridor
    of length 5; a time limit of 30 steps is flagged with ``TimeLimit.truncated``."""

    def __init__(self, config=None):
        self.observation_space = gym.spaces.Box(0.0, 5.0, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.pos = 0
        self.t = 0

    def seed(self, seed=None):
        return [seed]

    def reset(self):
        self.pos, self.t = 0, 0
        return np.array([self.pos], dtype=np.float32)

    def step(self, action):
        self.pos = max(0, self.pos + (1 if action == 1 else -1))
        self.t += 1
        at_goal = self.pos >= 5
        timeout = self.t >= 30
        info = {"TimeLimit.truncated": True} if timeout and not at_goal else {}
        return np.array([self.pos], dtype=np.float32), (1.0 if at_goal else -0.1), at_goal or timeout, info


class ContinuousEnv(gym.Env):
    """1-D Box actions in [-2, 2]; reward -|action - 1|. 10 steps."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)

    def __init__(self, config=None):
        self._t = 0

    def reset(self, *, seed=None, options=None):
        self._t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self._t += 1
        assert self.action_space.contains(np.asarray(action, np.float32)), action
        return np.zeros(2, np.float32), -abs(float(action[0]) - 1.0), False, self._t >= 10, {}


class HiddenArmBandit(gym.Env):
    """A two-armed bandit whose good arm is drawn anew each episode and never shown: the
    observation is always 0. Reward +1 for the good arm, -1 for the other; 10 pulls.

    Only the previous action and reward tell the arm (win-stay, lose-shift earns ~ +9 per
    episode); a policy that sees the observations alone, with or without memory, earns
    0 in expectation."""

    observation_space = gym.spaces.Box(0.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config=None):
        self._rng = np.random.default_rng()
        self._arm, self._t = 0, 0

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._arm, self._t = int(self._rng.integers(2)), 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self._t += 1
        return np.zeros(1, np.float32), 1.0 if int(action) == self._arm else -1.0, False, self._t >= 10, {}


class FaultyCartPole(gym.Wrapper):
    """CartPole whose ``step`` raises once in chosen workers at a chosen step.

    ``env_config``: ``bad_workers`` (worker indices), ``fail_at_step`` (the n-th step of
    this env instance) and ``fault_log`` (the name of a :class:`FaultLog` actor, which
    remembers who failed already, so a recreated worker's env does not fail again).
    """

    def __init__(self, config):
        super().__init__(gym.make("CartPole-v1"))
        self.worker_index = getattr(config, "worker_index", 0)
        self.bad_workers = set(config.get("bad_workers", ()))
        self.fail_at_step = int(config.get("fail_at_step", 10))
        self.fault_log = config.get("fault_log")
        self.steps = 0

    def step(self, action):
        self.steps += 1
        if self.worker_index in self.bad_workers and self.steps == self.fail_at_step:
            import ray

            log = ray.get_actor(self.fault_log)
            if ray.get(log.claim.remote(self.worker_index)):
                raise RuntimeError(f"injected failure in worker {self.worker_index} at step {self.steps}")
        return self.env.step(action)


class FaultLog:
    """Which workers have had their injected failure (used as a named Ray actor)."""

    def __init__(self):
        self.failed: dict[int, int] = {}

    def claim(self, worker_index: int) -> bool:
        """True the first time a worker asks: that one fails."""
        first = worker_index not in self.failed
        self.failed[worker_index] = self.failed.get(worker_index, 0) + 1
        return first

    def failures(self) -> int:
        return len(self.failed)
