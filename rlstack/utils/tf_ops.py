"""``ray.rllib.utils.tf_ops``, 1.x's earlier name of :mod:`rlstack.utils.tf_utils`
(1.0-1.6), which user code of that time imports."""

from typing import Any

from rlstack.utils import tf_utils as _tf_utils


def __getattr__(name: str) -> Any:
    return getattr(_tf_utils, name)
