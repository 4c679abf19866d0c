"""RLlib 1.13's ``Simplex`` space: vectors of non-negative entries that sum to 1."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class Simplex(gym.Space):
    """Points of the probability simplex along the last axis of ``shape`` (samples are
    Dirichlet draws with the given ``concentration``, ones by default).

    Args:
        shape: The shape of one value; the last axis sums to 1.
        concentration: The Dirichlet parameters, one per entry of the last axis.
        dtype: The values' dtype.
    """

    def __init__(self, shape: tuple[int, ...], concentration: Any = None, dtype: Any = np.float32) -> None:
        super().__init__(tuple(shape), dtype)
        self.dim = self.shape[-1]
        self.concentration = (np.ones(self.dim) if concentration is None
                              else np.asarray(concentration, dtype=np.float64).reshape(self.dim))

    def sample(self, mask: Any = None, probability: Any = None) -> np.ndarray:
        """A Dirichlet draw of ``shape``."""
        rows = int(np.prod(self.shape[:-1]))
        return self.np_random.dirichlet(self.concentration, size=rows).reshape(self.shape).astype(self.dtype)

    def contains(self, x: Any) -> bool:
        x = np.asarray(x)
        return x.shape == self.shape and bool(np.all(x >= 0)) and bool(np.allclose(x.sum(-1), 1.0, atol=1e-4))

    def __repr__(self) -> str:
        return f"Simplex({self.shape}; {self.concentration})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Simplex) and other.shape == self.shape and np.allclose(
            other.concentration, self.concentration)
