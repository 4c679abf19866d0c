"""Advantage actor-critic: A2CTrainer (synchronous) and A3CTrainer (asynchronous gradients)."""

from rlstack.trainers.a3c.a2c import A2C_DEFAULT_CONFIG, A2CTrainer
from rlstack.trainers.a3c.a3c import DEFAULT_CONFIG, A3CTrainer

__all__ = ["A2CTrainer", "A2C_DEFAULT_CONFIG", "A3CTrainer", "DEFAULT_CONFIG"]
