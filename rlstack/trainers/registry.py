"""Algorithm names ("PPO") mapped to trainer classes, imported only when asked for, and
the same names for Ray Tune: ``tune.run("PPO")`` / ``tune.Tuner("PPO")`` run rlstack's
trainer once ``rlstack`` is imported, even when Ray's own RLlib is installed.

Tune resolves a name through ``ray.tune.registry._has_trainable``, and for a name it does
not know it imports ``ray.rllib`` and registers every RLlib algorithm under the same
names (``ray.rllib._register_all``), overwriting any earlier registration. So rather
than registering once, rlstack wraps that lookup: each time Tune looks up one of
:data:`ALGORITHMS` it (re-)registers rlstack's class first, and RLlib is never imported
for these names. The wrap is installed when ``ray.tune.registry`` is first imported (or at
once if it already is), so ``import rlstack`` imports neither Ray nor a trainer. The
registry Tune writes to is Ray's job-wide key-value store, so trial processes see the
same classes. A trainable registered by the user under one of these names is replaced
by rlstack's at lookup.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType
from typing import Any

from rlstack.errors import ConfigError, did_you_mean

__all__ = ["ALGORITHMS", "get_trainer_class", "install_tune_names"]

# name -> "module:Class"; importing a trainer imports no deep-learning framework.
ALGORITHMS: dict[str, str] = {
    "A2C": "rlstack.trainers.a3c:A2CTrainer",
    "A3C": "rlstack.trainers.a3c:A3CTrainer",
    "APEX": "rlstack.trainers.dqn:ApeXTrainer",
    "DQN": "rlstack.trainers.dqn:DQNTrainer",
    "IMPALA": "rlstack.trainers.impala:IMPALATrainer",
    "PPO": "rlstack.trainers.ppo:PPOTrainer",
}

_TUNE_REGISTRY = "ray.tune.registry"


def get_trainer_class(name: str, return_config: bool = False) -> Any:
    """Returns the trainer class registered under ``name`` (e.g. ``"PPO"``).

    Args:
        name: The algorithm's name.
        return_config: Also return its ``DEFAULT_CONFIG`` (classic RLlib 1.x's signature).

    Returns:
        The trainer class, or ``(trainer_class, DEFAULT_CONFIG)`` with ``return_config``
        (a deep copy that the caller may change).

    Raises:
        ConfigError: For an unknown name, listing the available ones.
    """
    if name not in ALGORITHMS:
        raise ConfigError(
            f"Unknown algorithm {name!r}{did_you_mean(name, ALGORITHMS)} Available: {', '.join(sorted(ALGORITHMS))}."
        )
    module_name, class_name = ALGORITHMS[name].split(":")
    trainer_class = getattr(importlib.import_module(module_name), class_name)
    if return_config:
        return trainer_class, trainer_class.get_default_config()
    return trainer_class


def install_tune_names() -> None:
    """Makes Tune resolve :data:`ALGORITHMS` names to rlstack's trainers in this process:
    now if ``ray.tune.registry`` is loaded, else as soon as it is (idempotent)."""
    module = sys.modules.get(_TUNE_REGISTRY)
    if module is not None:
        _wrap_lookup(module)
    elif not any(isinstance(finder, _TuneRegistryHook) for finder in sys.meta_path):
        sys.meta_path.insert(0, _TuneRegistryHook())


def _wrap_lookup(module: ModuleType) -> None:
    original = module._has_trainable
    if getattr(original, "_rlstack_names", False):
        return

    def _has_trainable(trainable_name: str) -> bool:
        if trainable_name in ALGORITHMS:
            # Registered on every lookup: RLlib's _register_all (run by Tune for any name
            # it does not know, in any process of the job) may have overwritten it.
            module.register_trainable(trainable_name, get_trainer_class(trainable_name))
            return True
        return original(trainable_name)

    _has_trainable._rlstack_names = True  # type: ignore[attr-defined]
    module._has_trainable = _has_trainable


class _TuneRegistryHook(importlib.abc.MetaPathFinder):
    """Wraps Tune's lookup right after ``ray.tune.registry`` is first imported."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != _TUNE_REGISTRY:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_wrap(module: ModuleType) -> None:
            exec_module(module)
            _wrap_lookup(module)

        spec.loader.exec_module = exec_and_wrap  # type: ignore[method-assign]
        return spec


install_tune_names()
