"""RLlib 1.13's module path of the algorithm registry (``ray.rllib.agents.registry``):
``get_trainer_class`` and ``ALGORITHMS`` live in ``rlstack/trainers/common/registry.py``."""

from rlstack.trainers.common.registry import ALGORITHMS, get_trainer_class

__all__ = ["ALGORITHMS", "get_trainer_class"]
