"""Torch helpers of classic RLlib's ``ray.rllib.utils.torch_utils`` that example models use.

Importing this module imports no framework (``FLOAT_MIN`` is what action-masking models
read at class-definition time); the functions import torch when called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

# The most negative / positive float32 values, as classic RLlib defines them: adding
# FLOAT_MIN to a logit makes its action's probability 0 without producing -inf (whose
# softmax gradients and KL terms would be NaN).
FLOAT_MIN = -3.4e38
FLOAT_MAX = 3.4e38


def convert_to_torch_tensor(x: Any, device: "str | torch.device | None" = None) -> Any:
    """Turns numpy arrays (also inside dicts, lists and tuples) into torch tensors;
    float64 becomes float32, as the models compute in float32.

    Args:
        x: An array, a tensor, a number, or a nested dict / list / tuple of those.
        device: Where to put the tensors (None: the CPU).

    Returns:
        The same structure holding tensors.
    """
    import numpy as np
    import torch

    if isinstance(x, dict):
        return {key: convert_to_torch_tensor(value, device) for key, value in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(convert_to_torch_tensor(value, device) for value in x)
    tensor = x if isinstance(x, torch.Tensor) else torch.from_numpy(np.array(x))
    if tensor.dtype == torch.float64:
        tensor = tensor.float()
    return tensor.to(device) if device is not None else tensor


def explained_variance(y: "torch.Tensor", pred: "torch.Tensor") -> "torch.Tensor":
    """``max(-1, 1 - var(y - pred) / var(y))``: 1 for a perfect value function, 0 for
    one no better than the mean."""
    import torch

    y_var = torch.var(y, dim=0, correction=0)
    diff_var = torch.var(y - pred, dim=0, correction=0)
    return torch.clamp(1.0 - diff_var / y_var, min=-1.0)


def one_hot(x: "torch.Tensor", space: Any) -> "torch.Tensor":
    """``x`` (a tensor of actions or observations of ``space``) one-hot encoded, as
    float32: ``[B, n]`` for ``Discrete(n)``, the components' encodings side by side for
    ``MultiDiscrete`` (``[B, sum(nvec)]``); :func:`rlstack.utils.tf_utils.one_hot`'s twin.

    Raises:
        ValueError: For another space, naming it.
    """
    import gymnasium as gym
    import numpy as np
    import torch
    import torch.nn.functional as F

    if isinstance(space, gym.spaces.Discrete):
        return F.one_hot(x.long() - int(space.start), int(space.n)).float()
    if isinstance(space, gym.spaces.MultiDiscrete):
        nvec = np.asarray(space.nvec).reshape(-1)
        starts = np.asarray(space.start).reshape(-1)
        x = x.long().reshape(-1, len(nvec))
        return torch.cat([F.one_hot(x[:, i] - int(starts[i]), int(n)).float() for i, n in enumerate(nvec)], dim=-1)
    raise ValueError(f"one_hot takes a Discrete or MultiDiscrete space, got {space!r}.")
