"""Classic RLlib 1.x's API annotations (``ray.rllib.utils.annotations``).

1.13 scripts decorate their models and policies with ``@override(TorchModelV2)`` and
mark their own code with ``@PublicAPI`` and friends. Here each is a real decorator:
``override`` checks, when the class body runs, that the method exists in the named base
(a typo in a method name is an error, not a silently unused method); the stability
markers record the stability level on the object (``obj.__rlstack_api__``) and refuse
what they cannot mark.
"""

from __future__ import annotations

import inspect
import logging
from typing import Any, Callable, TypeVar

__all__ = [
    "DeveloperAPI",
    "ExperimentalAPI",
    "OverrideToImplementCustomLogic",
    "OverrideToImplementCustomLogic_CallToSuperRecommended",
    "PublicAPI",
    "is_overridden",
    "override",
]

T = TypeVar("T")

logger = logging.getLogger(__name__)

# Methods 1.x code overrides that the base classes rlstack uses no longer define, and what
# becomes of such an override: private methods of 1.13's Policy (rlstack's sampler builds
# no dummy batches), and gym's Env.seed, which gymnasium's Env dropped.
_CLASSIC_INTERNALS = {
    "_get_dummy_batch_from_view_requirements": "rlstack does not have or call it: the method is never used",
    "_initialize_loss_from_dummy_batch": "rlstack does not have or call it: the method is never used",
    "seed": "gymnasium's Env has no seed(); rlstack calls a 1.x env's seed(n) itself when it seeds the env",
}


def override(cls: type) -> Callable[[T], T]:
    """Marks a method as overriding one of ``cls``; fails if ``cls`` has no such method.

    Examples:
        >>> class Base:
        ...     def forward(self): ...
        >>> class Model(Base):
        ...     @override(Base)
        ...     def forward(self): ...

    Args:
        cls: The base class (or any class) that must define the decorated method's name.

    Returns:
        A decorator that returns the method unchanged.

    Raises:
        TypeError: If ``cls`` is not a class (``@override`` without an argument).
        NameError: At class-definition time, if ``cls`` has no attribute of the method's name.
    """
    if not inspect.isclass(cls):
        raise TypeError(
            f"@override takes the class whose method is overridden, e.g. @override(TorchModelV2); got {cls!r}. "
            "Write @override(BaseClass) above the method."
        )

    def check_override(method: T) -> T:
        name = getattr(method, "__name__", None)
        if isinstance(method, (staticmethod, classmethod)):
            name = method.__func__.__name__
        if name in _CLASSIC_INTERNALS and not hasattr(cls, name):
            qualname = getattr(getattr(method, "__func__", method), "__qualname__", name)
            logger.warning("%s overrides %s.%s of classic RLlib / gym: %s.", qualname, cls.__name__, name,
                           _CLASSIC_INTERNALS[name])
            return method
        if name is None or not hasattr(cls, name):
            qualname = getattr(getattr(method, "__func__", method), "__qualname__", name)
            raise NameError(f"{qualname} does not override any method of {cls.__name__}: {cls.__name__} has no "
                            f"attribute {name!r}. Check the method's name, or the class given to @override.")
        return method

    return check_override


def _marker(level: str) -> Callable[[T], T]:
    def mark(obj: T) -> T:
        if not (inspect.isclass(obj) or callable(obj) or isinstance(obj, (staticmethod, classmethod, property))):
            raise TypeError(f"@{level} marks a class, function or method; got {type(obj).__name__} ({obj!r}).")
        target = obj.__func__ if isinstance(obj, (staticmethod, classmethod)) else obj
        try:
            target.__rlstack_api__ = level  # type: ignore[attr-defined]
        except (AttributeError, TypeError):
            pass  # a builtin or property: the marker is documentation only
        return obj

    mark.__name__ = level
    return mark


PublicAPI = _marker("PublicAPI")
PublicAPI.__doc__ = """Marks a public API: stable, for end users; returns the object unchanged.

Raises:
    TypeError: If applied to something that is not a class, function or method.
"""

DeveloperAPI = _marker("DeveloperAPI")
DeveloperAPI.__doc__ = """Marks an API for developers extending the library; may change between minor
releases; returns the object unchanged.

Raises:
    TypeError: If applied to something that is not a class, function or method.
"""

ExperimentalAPI = _marker("ExperimentalAPI")
ExperimentalAPI.__doc__ = """Marks an experimental API that may change or go away; returns the object unchanged.

Raises:
    TypeError: If applied to something that is not a class, function or method.
"""


def OverrideToImplementCustomLogic(method: T) -> T:  # noqa: N802 (1.13's name)
    """Marks a method users override to add their own logic; returns it unchanged.

    Raises:
        TypeError: If applied to something that is not callable.
    """
    if not callable(method) and not isinstance(method, (staticmethod, classmethod)):
        raise TypeError(f"@OverrideToImplementCustomLogic marks a method; got {type(method).__name__}.")
    target = method.__func__ if isinstance(method, (staticmethod, classmethod)) else method
    target.__rlstack_override_to_implement__ = True  # type: ignore[attr-defined]
    return method


def OverrideToImplementCustomLogic_CallToSuperRecommended(method: T) -> T:  # noqa: N802 (1.13's name)
    """As :func:`OverrideToImplementCustomLogic`, for methods whose override should call
    ``super()``; returns the method unchanged.

    Raises:
        TypeError: If applied to something that is not callable.
    """
    method = OverrideToImplementCustomLogic(method)
    target = method.__func__ if isinstance(method, (staticmethod, classmethod)) else method
    target.__rlstack_call_super__ = True  # type: ignore[attr-defined]
    return method


def is_overridden(obj: Any) -> bool:
    """Whether ``obj`` (an instance) overrides a method marked with
    :func:`OverrideToImplementCustomLogic` in one of its bases.

    Args:
        obj: An instance, e.g. of a user's callbacks or policy class.

    Returns:
        True if any marked method of its class's bases is replaced in the class.
    """
    cls = type(obj)
    for base in cls.__mro__[1:]:
        for name, member in vars(base).items():
            func = getattr(member, "__func__", member)
            if getattr(func, "__rlstack_override_to_implement__", False):
                own = getattr(cls, name, None)
                if getattr(own, "__func__", own) is not func:
                    return True
    return False
