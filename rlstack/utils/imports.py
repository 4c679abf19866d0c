"""Objects named by import path: ``"module:name"`` (or ``"module.name"``), the form a YAML
file uses for what it cannot hold itself (a policy class, a policy mapping function)."""

from __future__ import annotations

import importlib
from typing import Any

from rlstack.errors import ConfigError

__all__ = ["import_object", "object_path"]


def import_object(path: str, what: str = "object") -> Any:
    """The object ``path`` names, its module imported now.

    Args:
        path: ``"package.module:name"`` (a dotted attribute after the colon is followed),
            or ``"package.module.name"``.
        what: What the path is for, in the error message (e.g. "multiagent.policy_mapping_fn").

    Raises:
        ConfigError: If the module cannot be imported or has no such attribute.
    """
    module_name, sep, name = path.partition(":")
    if not sep:
        module_name, _, name = path.rpartition(".")
    if not module_name or not name:
        raise ConfigError(f"{what}={path!r} is not an import path; write it as 'my_module:my_function' (the "
                          "module importable in every worker process).")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"{what}={path!r}: cannot import module {module_name!r} ({exc}); make it importable "
                          "(installed, or on PYTHONPATH in every worker process).") from exc
    for part in name.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ConfigError(f"{what}={path!r}: module {module_name!r} has no attribute {name!r}.") from None
    return obj


def object_path(obj: Any) -> str | None:
    """``"module:qualname"`` of a module-level function or class that imports back to
    itself, else None (a lambda, a nested function, something from ``__main__``)."""
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not module or not qualname or module == "__main__" or "<" in qualname:
        return None
    try:
        return f"{module}:{qualname}" if import_object(f"{module}:{qualname}") is obj else None
    except ConfigError:
        return None
