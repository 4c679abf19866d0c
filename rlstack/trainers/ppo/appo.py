"""RLlib 1.13's module path of APPO (``ray.rllib.agents.ppo.appo``): ``APPOTrainer`` and
``DEFAULT_CONFIG`` live in ``rlstack/trainers/appo/``."""

from rlstack.trainers.appo.appo import DEFAULT_CONFIG, APPOTrainer

__all__ = ["APPOTrainer", "DEFAULT_CONFIG"]
