"""Policies: the framework-free Policy surface, the torch and TF bases, postprocessing.

Only ``torch_*`` modules import torch and only ``tf_*`` modules import TensorFlow; import them
from their modules, not from here.
"""

from rlstack.policies.policy import Policy
from rlstack.policies.policy_map import PolicySpec

__all__ = ["Policy", "PolicySpec"]
