"""Framework-free helpers: schedules, observation filters, seeding, timers, imports.

The names RLlib 1.x scripts import from ``ray.rllib.utils`` itself are here too
(``from rlstack.utils import override, try_import_torch``); none imports a framework.
"""

from typing import Any

from rlstack.utils.annotations import DeveloperAPI, PublicAPI, override
from rlstack.utils.deprecation import deprecation_warning
from rlstack.utils.framework import try_import_jax, try_import_tf, try_import_tfp, try_import_torch
from rlstack.utils.numpy import (
    LARGE_INTEGER,
    MAX_LOG_NN_OUTPUT,
    MIN_LOG_NN_OUTPUT,
    SMALL_NUMBER,
    fc,
    one_hot,
    relu,
    sigmoid,
    softmax,
)

__all__ = sorted(["LARGE_INTEGER", "MAX_LOG_NN_OUTPUT", "MIN_LOG_NN_OUTPUT", "SMALL_NUMBER", "DeveloperAPI", "PublicAPI",
           "add_mixins", "deprecation_warning", "fc", "force_list", "force_tuple", "one_hot", "override", "relu", "sigmoid", "softmax", "try_import_jax", "try_import_tf", "try_import_tfp",
           "try_import_torch"])


def force_list(elements: Any = None, to_tuple: bool = False) -> list | tuple:
    """``elements`` as a list (a tuple with ``to_tuple``): None is empty, a list / tuple /
    set its items, anything else one item."""
    ctor = tuple if to_tuple else list
    if elements is None:
        return ctor()
    return ctor(elements) if isinstance(elements, (list, tuple, set)) else ctor([elements])


def force_tuple(elements: Any = None) -> tuple:
    """``elements`` as a tuple (see :func:`force_list`)."""
    return force_list(elements, to_tuple=True)


def add_mixins(base: type, mixins: list[type], reversed: bool = False) -> type:  # noqa: A002 - 1.x's name
    """A subclass of ``base`` with ``mixins`` first in its bases (the first mixin
    first, or last with ``reversed``), as 1.x's policy templates built their classes."""
    mixins = list(mixins or [])
    if not mixins:
        return base
    if reversed:
        mixins = mixins[::-1]
    return type(base.__name__, (*mixins, base), {})


def __getattr__(name: str) -> Any:
    # 1.x re-exported Tune's dict helpers (merge_dicts, deep_update); imported on use so
    # that this package stays light, and left out of __all__: they are Ray's, documented there.
    if name in ("merge_dicts", "deep_update"):
        from ray.tune import utils as tune_utils

        return getattr(tune_utils, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
