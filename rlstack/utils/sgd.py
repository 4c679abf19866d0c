"""RLlib 1.13's ``ray.rllib.utils.sgd``: helpers a custom training step uses around SGD."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

__all__ = ["minibatches", "standardized"]


def standardized(array: np.ndarray) -> np.ndarray:
    """``array`` rescaled to zero mean and unit standard deviation (the deviation taken
    as at least 1e-4, so a constant array stays finite)."""
    array = np.asarray(array)
    return (array - array.mean()) / max(1e-4, float(array.std()))


def minibatches(samples: Any, sgd_minibatch_size: int, shuffle: bool = True) -> Iterator[Any]:
    """Minibatches of ``sgd_minibatch_size`` rows covering every row of a SampleBatch
    once (the last one holds the remainder); see ``SampleBatch.minibatches``."""
    return samples.minibatches(sgd_minibatch_size, shuffle=shuffle)
