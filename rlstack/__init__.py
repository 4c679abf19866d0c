"""rlstack: classic RLlib-style reinforcement-learning trainers on Ray.

Importing ``rlstack`` imports neither torch nor TensorFlow nor Ray; the framework a config
names is imported when a policy is built. The trainer classes (``rlstack.PPOTrainer`` and
every other one an algorithm package declares, see ``rlstack/trainers/common/registry.py``) are
imported on first use, and so are 1.13's other top-level names that bring in Ray or a
framework (``RolloutWorker``, ``TFPolicy``, ``TorchPolicy``).
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

from rlstack.env import BaseEnv, EnvContext, ExternalEnv, MultiAgentEnv, VectorEnv, register_env
from rlstack.errors import CheckpointError, ConfigError, EnvError, FrameworkNotInstalledError, RLStackError
from rlstack.models.catalog import ModelCatalog
from rlstack.policies.policy import Policy
from rlstack.sample_batch import SampleBatch, concat_samples
from rlstack.trainers.common import registry as _registry
from rlstack.trainers.common.registry import get_trainer_class
from rlstack import _missing_modules

# `import rlstack.trainers.sac` (an RLlib 1.x module rlstack lacks) raises an ImportError
# saying what rlstack offers instead.
_missing_modules.install()

# RLlib 1.13's top-level names (``from ray.rllib import RolloutWorker``) that import Ray or
# a framework: "module:Class", imported on first use.
_LAZY_NAMES = {
    "RolloutWorker": "rlstack.evaluation.rollout_worker:RolloutWorker",
    "TFPolicy": "rlstack.policies.tf_policy:TFPolicy",
    "TorchPolicy": "rlstack.policies.torch_policy:TorchPolicy",
}

# The trainer classes come from the algorithm packages' declarations (adding an algorithm
# edits nothing outside its folder).
__all__ = sorted([
    "BaseEnv",
    "CheckpointError",
    "ConfigError",
    "EnvContext",
    "EnvError",
    "ExternalEnv",
    "FrameworkNotInstalledError",
    "ModelCatalog",
    "MultiAgentEnv",
    "Policy",
    "RLStackError",
    "SampleBatch",
    "VectorEnv",
    "concat_samples",
    "get_trainer_class",
    "register_env",
    *_LAZY_NAMES,
    *_registry.trainer_class_names(),
])


def __getattr__(name: str) -> Any:
    # Trainers import Ray Tune, RolloutWorker Ray, the policy bases their framework: load
    # them on first use so `import rlstack` stays light.
    if name in _LAZY_NAMES:
        import importlib

        from rlstack.utils.framework import check_installed

        if name in ("TFPolicy", "TorchPolicy"):
            check_installed("tf" if name == "TFPolicy" else "torch")  # the install command, not a bare ImportError
        module_name, class_name = _LAZY_NAMES[name].split(":")
        value = getattr(importlib.import_module(module_name), class_name)
        globals()[name] = value
        return value
    target = _registry.trainer_class_names().get(name)
    if target is None:
        raise AttributeError(f"module 'rlstack' has no attribute {name!r}")
    value = _registry.load(target)
    globals()[name] = value  # later lookups skip this function
    return value
