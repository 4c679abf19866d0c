"""Small TF model helpers classic RLlib's custom models import (``ray.rllib.models.tf.misc``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rlstack.models.tf.framework import tf

__all__ = ["normc_initializer"]


def normc_initializer(std: float = 1.0) -> Callable[..., Any]:
    """An initializer that scales each output column of a normal draw to norm ``std``.

    Usable as a Keras ``kernel_initializer`` (called as ``init(shape, dtype=None)``) or
    on its own; it is the init of rlstack's built-in dense layers (``models/catalog``).

    Args:
        std: The norm of each column of the returned matrix.

    Returns:
        ``init(shape, dtype=None, partition_info=None) -> tf.Tensor``.
    """

    def _initializer(shape: Any, dtype: Any = None, partition_info: Any = None, **kwargs: Any) -> tf.Tensor:
        shape = [int(d) for d in shape]
        out = np.random.randn(*shape).astype(np.float32)
        out *= std / np.sqrt(np.square(out).sum(axis=0, keepdims=True))
        return tf.constant(out, dtype=tf.as_dtype(dtype) if dtype is not None else tf.float32)

    return _initializer
