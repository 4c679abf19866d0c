"""DQNConfig and ApexDQNConfig: the config objects of DQN and Ape-X (Ray 2.0's names)."""

from rlstack.trainers.trainer_config import TrainerConfig

__all__ = ["ApexDQNConfig", "DQNConfig"]


class DQNConfig(TrainerConfig):
    """DQN's config object; ``build()`` returns a ``DQNTrainer``."""

    _algorithm = "DQN"


class ApexDQNConfig(TrainerConfig):
    """Ape-X's config object (``run: APEX``); ``build()`` returns an ``ApeXTrainer``."""

    _algorithm = "APEX"
