"""Algorithm names ("PPO") mapped to trainer classes, imported only when asked for."""

from __future__ import annotations

import importlib

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


def get_trainer_class(name: str) -> type:
    """Returns the trainer class registered under ``name`` (e.g. ``"PPO"``).

    Raises:
        ConfigError: For an unknown name, listing the available ones.
    """
    if name not in ALGORITHMS:
        raise ConfigError(
            f"Unknown algorithm {name!r}{did_you_mean(name, ALGORITHMS)} Available: {', '.join(sorted(ALGORITHMS))}."
        )
    module_name, class_name = ALGORITHMS[name].split(":")
    return getattr(importlib.import_module(module_name), class_name)
