"""ARSConfig: ARS's config object (Ray 2.0's name)."""

from rlstack.trainers.trainer_config import TrainerConfig

__all__ = ["ARSConfig"]


class ARSConfig(TrainerConfig):
    """ARS's config object; ``build()`` returns an ``ARSTrainer``."""

    _algorithm = "ARS"
