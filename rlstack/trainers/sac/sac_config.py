"""SACConfig: SAC's config object (Ray 2.0's name)."""

from rlstack.trainers.trainer_config import TrainerConfig

__all__ = ["SACConfig"]


class SACConfig(TrainerConfig):
    """SAC's config object; ``build()`` returns a ``SACTrainer``."""

    _algorithm = "SAC"
