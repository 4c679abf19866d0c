"""Policies: the framework-free Policy surface, the torch and TF bases, postprocessing.

Only ``torch_policy`` imports torch and only ``tf_policy`` imports TensorFlow; import them
from their modules, not from here.
"""

from rlstack.policies.policy import Policy

__all__ = ["Policy"]
