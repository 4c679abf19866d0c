"""The DQN family: DQNTrainer (local replay) and ApeXTrainer (distributed replay;
``ApexTrainer`` is its RLlib 1.13 spelling)."""

from rlstack.trainers.dqn.apex import APEX_DEFAULT_CONFIG, ApexTrainer, ApeXTrainer
from rlstack.trainers.dqn.dqn import DEFAULT_CONFIG, DQNTrainer

__all__ = ["APEX_DEFAULT_CONFIG", "ApeXTrainer", "ApexTrainer", "DEFAULT_CONFIG", "DQNTrainer"]
