"""rlstack: classic RLlib-style reinforcement-learning trainers on Ray.

Importing ``rlstack`` imports neither torch nor TensorFlow; the framework a config names
is imported when a policy is built.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

from rlstack.env import EnvContext, register_env
from rlstack.errors import CheckpointError, ConfigError, EnvError, FrameworkNotInstalledError, RLStackError
from rlstack.models.catalog import ModelCatalog
from rlstack.sample_batch import SampleBatch, concat_samples
from rlstack.trainers.registry import get_trainer_class
from rlstack import _missing_modules

# `import rlstack.trainers.sac` (an RLlib 1.x module rlstack lacks) raises an ImportError
# saying what rlstack offers instead (issue 16).
_missing_modules.install()

__all__ = [
    "A2CTrainer",
    "A3CTrainer",
    "ApeXTrainer",
    "CheckpointError",
    "ConfigError",
    "DQNTrainer",
    "EnvContext",
    "EnvError",
    "FrameworkNotInstalledError",
    "IMPALATrainer",
    "ModelCatalog",
    "PPOTrainer",
    "RLStackError",
    "SampleBatch",
    "concat_samples",
    "get_trainer_class",
    "register_env",
]


def __getattr__(name: str) -> Any:
    # Trainers import Ray Tune; load them on first use so `import rlstack` stays light.
    if name == "PPOTrainer":
        from rlstack.trainers.ppo import PPOTrainer

        return PPOTrainer
    if name in ("DQNTrainer", "ApeXTrainer"):
        from rlstack.trainers import dqn

        return getattr(dqn, name)
    if name in ("A2CTrainer", "A3CTrainer"):
        from rlstack.trainers import a3c

        return getattr(a3c, name)
    if name == "IMPALATrainer":
        from rlstack.trainers.impala import IMPALATrainer

        return IMPALATrainer
    raise AttributeError(f"module 'rlstack' has no attribute {name!r}")
