"""RLlib 1.13's ``Repeated`` space: a list of up to ``max_len`` items of one space."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class Repeated(gym.Space):
    """A variable-length list (1 to ``max_len`` items) of ``child_space`` values.

    rlstack's models do not take it as an observation space yet (1.13 encoded it as the
    length followed by ``max_len`` padded items); it serves as a value space in envs.

    Args:
        child_space: The space of each item.
        max_len: The longest list.
    """

    def __init__(self, child_space: gym.Space, max_len: int) -> None:
        super().__init__()
        self.child_space = child_space
        self.max_len = int(max_len)

    def seed(self, seed: int | None = None) -> list[int]:
        """Seeds the length draws and the child space."""
        seeds = super().seed(seed)
        self.child_space.seed(int(self.np_random.integers(2**31)))
        return seeds

    def sample(self, mask: Any = None, probability: Any = None) -> list[Any]:
        """A list of random length (1 to ``max_len``) of child samples."""
        return [self.child_space.sample() for _ in range(int(self.np_random.integers(1, self.max_len + 1)))]

    def contains(self, x: Any) -> bool:
        return isinstance(x, (list, np.ndarray)) and len(x) <= self.max_len and all(
            self.child_space.contains(item) for item in x)

    def __repr__(self) -> str:
        return f"Repeated({self.child_space}, {self.max_len})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Repeated) and other.child_space == self.child_space and other.max_len == self.max_len
