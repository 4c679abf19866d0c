"""Classic RLlib's deprecation helpers (``ray.rllib.utils.deprecation``), which user code
decorated its own old names with: :data:`DEPRECATED_VALUE`, :func:`deprecation_warning`
and the :class:`Deprecated` decorator."""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)

# The default of a config key or argument that is kept only to say it is gone.
DEPRECATED_VALUE = -1

__all__ = ["DEPRECATED_VALUE", "Deprecated", "deprecation_warning", "deprecation_warning_once"]

# (old, new) pairs deprecation_warning_once has warned about in this process.
_WARNED: set[tuple[str, str | None]] = set()


def deprecation_warning(old: str, new: str | None = None, *, help: str | None = None,  # noqa: A002 - 1.13's name
                        error: bool | None = None) -> None:
    """Says that ``old`` is deprecated (and what to use: ``new`` or ``help``); raises
    a ValueError instead when ``error`` is true."""
    message = f"`{old}` has been deprecated." + (f" Use `{new}` instead." if new else "") + (f" {help}" if help else "")
    if error:
        raise ValueError(message)
    logger.warning("DeprecationWarning: %s This will raise an error in the future!", message)


def deprecation_warning_once(old: str, new: str | None = None, *, help: str | None = None) -> None:  # noqa: A002
    """:func:`deprecation_warning` (never an error), the first time only for each
    ``(old, new)`` in this process: a config merged for every worker and trial warns once."""
    if (old, new) in _WARNED:
        return
    _WARNED.add((old, new))
    deprecation_warning(old, new, help=help, error=False)


def Deprecated(old: str | None = None, *, new: str | None = None, help: str | None = None,  # noqa: N802, A002
               error: bool = True) -> Callable[[Any], Any]:
    """A decorator for a function or class that is deprecated: calling it (or building
    an instance) logs a warning, or raises a ValueError when ``error``."""

    def decorate(obj: Any) -> Any:
        name = old or getattr(obj, "__qualname__", repr(obj))
        if inspect.isclass(obj):
            original_init = obj.__init__

            @functools.wraps(original_init)
            def patched_init(self: Any, *args: Any, **kwargs: Any) -> None:
                deprecation_warning(name, new, help=help, error=error)
                original_init(self, *args, **kwargs)

            obj.__init__ = patched_init
            return obj

        @functools.wraps(obj)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            deprecation_warning(name, new, help=help, error=error)
            return obj(*args, **kwargs)

        return wrapper

    return decorate
