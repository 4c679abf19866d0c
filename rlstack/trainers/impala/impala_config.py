"""IMPALAConfig (``ImpalaConfig``, Ray 2.0's spelling): IMPALA's config object."""

from rlstack.trainers.trainer_config import TrainerConfig

__all__ = ["IMPALAConfig", "ImpalaConfig"]


class IMPALAConfig(TrainerConfig):
    """IMPALA's config object; ``build()`` returns an ``IMPALATrainer``."""

    _algorithm = "IMPALA"


# Ray 2.0's spelling.
ImpalaConfig = IMPALAConfig
