"""``ray.rllib.utils.torch_ops``, 1.x's earlier name of :mod:`rlstack.utils.torch_utils`
(1.0-1.6), which user code of that time imports (``from ray.rllib.utils.torch_ops import
one_hot``)."""

from typing import Any

from rlstack.utils import torch_utils as _torch_utils


def __getattr__(name: str) -> Any:
    return getattr(_torch_utils, name)
