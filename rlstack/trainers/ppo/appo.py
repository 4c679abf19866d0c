"""RLlib 1.13's module path of APPO (``ray.rllib.agents.ppo.appo``): ``APPOTrainer`` and
``DEFAULT_CONFIG`` live in ``rlstack/trainers/appo/``."""

from rlstack.trainers.appo.appo import DEFAULT_CONFIG, APPOTrainer
from rlstack.trainers.appo.appo_config import APPOConfig

__all__ = ["APPOConfig", "APPOTrainer", "DEFAULT_CONFIG"]
