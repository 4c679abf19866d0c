"""A2CConfig and A3CConfig: the config objects of the actor-critic trainers (Ray 2.0's names)."""

from rlstack.trainers.trainer_config import TrainerConfig

__all__ = ["A2CConfig", "A3CConfig"]


class A2CConfig(TrainerConfig):
    """A2C's config object; ``build()`` returns an ``A2CTrainer``."""

    _algorithm = "A2C"


class A3CConfig(TrainerConfig):
    """A3C's config object; ``build()`` returns an ``A3CTrainer``."""

    _algorithm = "A3C"
