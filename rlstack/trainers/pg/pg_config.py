"""PGConfig: RLlib 1.13's config object for PG; ``rlstack.trainers.pg.pg`` offers it too,
1.13's module path."""

from rlstack.trainers.trainer_config import TrainerConfig

__all__ = ["PGConfig"]


class PGConfig(TrainerConfig):
    """PG's config object; ``build()`` returns a ``PGTrainer``."""

    _algorithm = "PG"
