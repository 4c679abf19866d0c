"""Batches as either framework's tensors, and tensors back as numpy, for the loss tests
that run one case in torch and in TF."""

from __future__ import annotations

from typing import Any

import numpy as np


def as_tensors(framework: str, batch: Any) -> dict[str, Any]:
    """Every column of ``batch`` as a torch tensor (sharing the numpy memory) or a TF one."""
    if framework == "torch":
        import torch

        return {key: torch.from_numpy(np.ascontiguousarray(value)) for key, value in batch.items()}
    import tensorflow as tf

    return {key: tf.convert_to_tensor(value) for key, value in batch.items()}


def to_numpy(value: Any) -> np.ndarray:
    """A torch tensor (detached), a TF tensor or an array as a numpy array."""
    if hasattr(value, "detach"):
        value = value.detach()
    return np.asarray(value)


def to_float(value: Any) -> float:
    """A scalar tensor of either framework as a Python float."""
    return float(to_numpy(value))


def loss_value(policy: Any, batch: Any) -> float:
    """``policy.loss`` of either framework on a numpy batch, as a float."""
    loss, _ = policy.loss(as_tensors(policy.framework, batch))
    return to_float(loss)
