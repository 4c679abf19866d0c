"""Classic RLlib's ``utils/numpy.py``: numpy versions of a few network pieces and
constants, which 1.x user code imports (``from ray.rllib.utils import one_hot``) to
check models or build observations by hand."""

from __future__ import annotations

from typing import Any

import numpy as np

LARGE_INTEGER = 100000000
MIN_LOG_NN_OUTPUT = -5
MAX_LOG_NN_OUTPUT = 2
SMALL_NUMBER = 1e-6


def one_hot(x: Any, depth: int = 0, on_value: float = 1.0, off_value: float = 0.0) -> np.ndarray:
    """``x`` (ints, any shape) as one-hot float32 rows of ``depth`` (0: ``max(x) + 1``)
    columns, ``on_value`` where the index is, ``off_value`` elsewhere.

    Examples:
        >>> one_hot(np.array([0, 2]), depth=3).tolist()
        [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
    """
    x = np.asarray(x)
    if x.dtype == np.bool_:
        x = x.astype(np.int64)
    depth = int(depth) or int(np.max(x)) + 1
    out = np.full((*x.shape, depth), off_value, dtype=np.float32)
    np.put_along_axis(out, x.astype(np.int64)[..., None], on_value, axis=-1)
    return out


def relu(x: Any, alpha: float = 0.0) -> np.ndarray:
    """ReLU (leaky with ``alpha`` > 0)."""
    x = np.asarray(x)
    return np.maximum(x, x * alpha)


def sigmoid(x: Any, derivative: bool = False) -> np.ndarray:
    """The logistic function, or its derivative at ``sigmoid(x)`` given as ``x``."""
    x = np.asarray(x)
    return x * (1 - x) if derivative else 1 / (1 + np.exp(-x))


def softmax(x: Any, axis: int = -1, epsilon: float | None = None) -> np.ndarray:
    """Softmax over ``axis``, at least ``epsilon`` (default :data:`SMALL_NUMBER`)."""
    x = np.asarray(x)
    exp = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return np.maximum(exp / np.sum(exp, axis=axis, keepdims=True), SMALL_NUMBER if epsilon is None else epsilon)


def fc(x: Any, weights: Any, biases: Any = None, framework: str | None = None) -> np.ndarray:
    """A dense layer in numpy: ``x @ weights + biases`` (torch's ``[out, in]`` weights
    transposed when ``framework == "torch"``)."""
    weights = np.asarray(weights)
    if framework == "torch":
        weights = weights.T
    out = np.asarray(x) @ weights
    return out if biases is None else out + np.asarray(biases)


def huber_loss(x: Any, delta: float = 1.0) -> np.ndarray:
    """The Huber loss of ``x``: quadratic within ``delta``, linear outside."""
    x = np.abs(np.asarray(x))
    return np.where(x < delta, 0.5 * x ** 2, delta * (x - 0.5 * delta))


def l2_loss(x: Any) -> float:
    """``sum(x ** 2) / 2``, as TF's ``tf.nn.l2_loss``."""
    return float(np.sum(np.square(x)) / 2.0)


def convert_to_numpy(x: Any, reduce_type: bool = True) -> Any:
    """``x`` (a tensor or a nest of them) as numpy; float64 / int64 down to float32 / int32
    with ``reduce_type``, as 1.x did."""
    if isinstance(x, dict):
        return {key: convert_to_numpy(value, reduce_type) for key, value in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(convert_to_numpy(value, reduce_type) for value in x)
    if hasattr(x, "detach"):  # a torch tensor
        x = x.detach().cpu().numpy()
    elif hasattr(x, "numpy"):  # an eager TF tensor
        x = x.numpy()
    if reduce_type and isinstance(x, np.ndarray):
        if x.dtype == np.float64:
            x = x.astype(np.float32)
        elif x.dtype == np.int64:
            x = x.astype(np.int32)
    return x
