"""rlstack: classic RLlib-style reinforcement-learning trainers on Ray.

Importing ``rlstack`` imports neither torch nor TensorFlow nor Ray; the framework a config
names is imported when a policy is built. The trainer classes (``rlstack.PPOTrainer`` and
every other one an algorithm package declares, see ``rlstack/trainers/common/registry.py``) are
imported on first use.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

from rlstack.env import EnvContext, register_env
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

# The trainer classes come from the algorithm packages' declarations (adding an algorithm
# edits nothing outside its folder).
__all__ = sorted([
    "CheckpointError",
    "ConfigError",
    "EnvContext",
    "EnvError",
    "FrameworkNotInstalledError",
    "ModelCatalog",
    "Policy",
    "RLStackError",
    "SampleBatch",
    "concat_samples",
    "get_trainer_class",
    "register_env",
    *_registry.trainer_class_names(),
])


def __getattr__(name: str) -> Any:
    # Trainers import Ray Tune; load them on first use so `import rlstack` stays light.
    target = _registry.trainer_class_names().get(name)
    if target is None:
        raise AttributeError(f"module 'rlstack' has no attribute {name!r}")
    value = _registry.load(target)
    globals()[name] = value  # later lookups skip this function
    return value
