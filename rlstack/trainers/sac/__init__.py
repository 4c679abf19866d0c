"""SAC: ``SACTrainer`` and its ``DEFAULT_CONFIG``, imported on first use (importing this
package imports neither Ray nor a framework)."""

from __future__ import annotations

import importlib
from typing import Any

# The declaration rlstack's registry finds: 1.13's ``run:`` name -> "module:Class".
TRAINERS = {"SAC": "rlstack.trainers.sac.sac:SACTrainer"}
PUBLIC = {"DEFAULT_CONFIG": "rlstack.trainers.sac.sac:DEFAULT_CONFIG"}
_EXPORTS = {**{path.rsplit(":", 1)[1]: path for path in TRAINERS.values()}, **PUBLIC}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module_name, attribute = _EXPORTS[name].split(":")
    return getattr(importlib.import_module(module_name), attribute)


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
