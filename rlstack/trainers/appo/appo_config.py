"""APPOConfig: APPO's config object (Ray 2.0's name)."""

from rlstack.trainers.trainer_config import TrainerConfig

__all__ = ["APPOConfig"]


class APPOConfig(TrainerConfig):
    """APPO's config object; ``build()`` returns an ``APPOTrainer``."""

    _algorithm = "APPO"
