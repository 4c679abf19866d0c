"""ESConfig: the evolution strategies' config object (Ray 2.0's name)."""

from rlstack.trainers.trainer_config import TrainerConfig

__all__ = ["ESConfig"]


class ESConfig(TrainerConfig):
    """ES's config object; ``build()`` returns an ``ESTrainer``."""

    _algorithm = "ES"
