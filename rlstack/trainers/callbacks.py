"""RLlib 1.13's module path of the training callbacks (``ray.rllib.agents.callbacks``):
they live in ``rlstack/evaluation/callbacks.py``, beside the rollout workers that call
most of their hooks."""

from rlstack.evaluation.callbacks import DefaultCallbacks, MemoryTrackingCallbacks, MultiCallbacks

__all__ = ["DefaultCallbacks", "MemoryTrackingCallbacks", "MultiCallbacks"]
