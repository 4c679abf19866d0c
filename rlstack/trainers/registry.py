"""Algorithm names ("PPO") mapped to trainer classes, imported only when asked for."""

from __future__ import annotations

import importlib
from typing import Any

from rlstack.errors import ConfigError, did_you_mean

# name -> "module:Class"; importing a trainer imports no deep-learning framework.
ALGORITHMS: dict[str, str] = {
    "A2C": "rlstack.trainers.a3c:A2CTrainer",
    "A3C": "rlstack.trainers.a3c:A3CTrainer",
    "APEX": "rlstack.trainers.dqn:ApeXTrainer",
    "DQN": "rlstack.trainers.dqn:DQNTrainer",
    "IMPALA": "rlstack.trainers.impala:IMPALATrainer",
    "PPO": "rlstack.trainers.ppo:PPOTrainer",
}


def register_with_tune() -> None:
    """Imports every trainer, which registers its name with Ray Tune (``tune.Tuner("PPO")``)."""
    for name in ALGORITHMS:
        get_trainer_class(name)


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
