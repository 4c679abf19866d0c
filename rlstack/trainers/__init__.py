"""Trainers: the Trainer base, the config machinery, and one package per algorithm."""

from rlstack.trainers.registry import ALGORITHMS, get_trainer_class

__all__ = ["ALGORITHMS", "get_trainer_class"]
