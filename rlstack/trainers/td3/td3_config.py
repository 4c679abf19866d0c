"""TD3Config: TD3's config object (Ray 2.0's name)."""

from rlstack.trainers.trainer_config import TrainerConfig

__all__ = ["TD3Config"]


class TD3Config(TrainerConfig):
    """TD3's config object; ``build()`` returns a ``TD3Trainer``."""

    _algorithm = "TD3"
