"""CQLConfig: CQL's config object (Ray 2.0's name)."""

from rlstack.trainers.trainer_config import TrainerConfig

__all__ = ["CQLConfig"]


class CQLConfig(TrainerConfig):
    """CQL's config object; ``build()`` returns a ``CQLTrainer``."""

    _algorithm = "CQL"
