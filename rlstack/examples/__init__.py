"""Example envs and models for classic RLlib's example scripts (``ray.rllib.examples``),
importable as ``rlstack.examples`` after the rename."""
