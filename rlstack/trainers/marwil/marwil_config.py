"""MARWILConfig and BCConfig: the config objects of MARWIL and behaviour cloning (Ray 2.0's names)."""

from rlstack.trainers.trainer_config import TrainerConfig

__all__ = ["BCConfig", "MARWILConfig"]


class MARWILConfig(TrainerConfig):
    """MARWIL's config object; ``build()`` returns a ``MARWILTrainer``."""

    _algorithm = "MARWIL"


class BCConfig(TrainerConfig):
    """BC's config object; ``build()`` returns a ``BCTrainer``."""

    _algorithm = "BC"
