"""DDPGConfig and ApexDDPGConfig: the config objects of DDPG and Ape-X DDPG (Ray 2.0's names)."""

from rlstack.trainers.trainer_config import TrainerConfig

__all__ = ["ApexDDPGConfig", "DDPGConfig"]


class DDPGConfig(TrainerConfig):
    """DDPG's config object; ``build()`` returns a ``DDPGTrainer``."""

    _algorithm = "DDPG"


class ApexDDPGConfig(TrainerConfig):
    """Ape-X DDPG's config object; ``build()`` returns an ``ApexDDPGTrainer``."""

    _algorithm = "APEX_DDPG"
