"""Seeding of numpy, Python's ``random`` and whichever framework is already imported."""

from __future__ import annotations

import random
import sys

import numpy as np


def seed_everything(seed: int | None) -> None:
    """Seeds Python, numpy and the framework modules already imported in this process.

    Frameworks are seeded only if already imported, so that seeding never imports
    TensorFlow into a torch run (or the reverse).

    Args:
        seed: The seed, or None to leave the generators alone.
    """
    if seed is None:
        return
    random.seed(seed)
    np.random.seed(seed % (2**32))
    if "torch" in sys.modules:
        sys.modules["torch"].manual_seed(seed)
    if "tensorflow" in sys.modules:
        sys.modules["tensorflow"].random.set_seed(seed)


def env_seed(seed: int | None, worker_index: int, vector_index: int) -> int | None:
    """The seed of one sub-environment: ``seed + 1000 * worker_index + vector_index``."""
    if seed is None:
        return None
    return int(seed) + 1000 * worker_index + vector_index
