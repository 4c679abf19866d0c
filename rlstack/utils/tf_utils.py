"""TensorFlow helpers classic RLlib's models import (``ray.rllib.utils.tf_utils``).

Nothing here imports TensorFlow at module level: :data:`FLOAT_MIN` and
:data:`FLOAT_MAX` are plain floats, usable in torch or numpy code as well.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# One pair of constants for both frameworks (classic RLlib's -3.4e38 / 3.4e38, defined
# with the torch helpers; that module imports no framework either).
from rlstack.utils.torch_utils import FLOAT_MAX, FLOAT_MIN

__all__ = ["FLOAT_MAX", "FLOAT_MIN", "explained_variance", "huber_loss", "one_hot"]


def huber_loss(x: Any, delta: float = 1.0) -> Any:
    """The Huber loss of a TF tensor ``x``: ``x^2 / 2`` where ``|x| < delta``, else
    ``delta (|x| - delta / 2)``."""
    from rlstack.models.tf.framework import tf

    return tf.where(tf.abs(x) < delta, tf.square(x) * 0.5, delta * (tf.abs(x) - 0.5 * delta))


def explained_variance(y: Any, pred: Any) -> Any:
    """``max(-1, 1 - Var[y - pred] / Var[y])`` of TF tensors, as classic RLlib reports it."""
    from rlstack.models.tf.framework import tf

    _, y_var = tf.nn.moments(y, axes=[0])
    _, diff_var = tf.nn.moments(y - pred, axes=[0])
    return tf.maximum(-1.0, 1.0 - diff_var / y_var)


def one_hot(x: Any, space: Any) -> Any:
    """``x`` (a TF tensor of actions or observations of ``space``) one-hot encoded, as
    float32: ``[B, n]`` for ``Discrete(n)``, the components' encodings side by side for
    ``MultiDiscrete`` (``[B, sum(nvec)]``).

    Raises:
        ValueError: For another space, naming it.
    """
    import gymnasium as gym

    from rlstack.models.tf.framework import tf

    if isinstance(space, gym.spaces.Discrete):
        return tf.one_hot(tf.cast(x, tf.int32) - int(space.start), int(space.n), dtype=tf.float32)
    if isinstance(space, gym.spaces.MultiDiscrete):
        nvec = np.asarray(space.nvec).reshape(-1)
        starts = np.asarray(space.start).reshape(-1)
        x = tf.reshape(tf.cast(x, tf.int32), (-1, len(nvec)))
        return tf.concat([tf.one_hot(x[:, i] - int(starts[i]), int(n), dtype=tf.float32)
                          for i, n in enumerate(nvec)], axis=-1)
    raise ValueError(f"one_hot takes a Discrete or MultiDiscrete space, got {space!r}.")
