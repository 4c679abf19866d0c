"""The DQN family: DQNTrainer (local replay) and ApeXTrainer (distributed replay)."""

from rlstack.trainers.dqn.apex import APEX_DEFAULT_CONFIG, ApeXTrainer
from rlstack.trainers.dqn.dqn import DEFAULT_CONFIG, DQNTrainer

__all__ = ["APEX_DEFAULT_CONFIG", "ApeXTrainer", "DEFAULT_CONFIG", "DQNTrainer"]
