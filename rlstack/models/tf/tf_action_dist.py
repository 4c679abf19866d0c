"""Classic RLlib's TF action distributions (``ray.rllib.models.tf.tf_action_dist``).

One implementation: the classes live in :mod:`rlstack.models.tf.distributions`, which
rlstack's TF policies use; this module is their 1.13 name. Subclass
:class:`TFActionDistribution` (or a built-in class) for ``custom_action_dist``.
"""

from __future__ import annotations

from rlstack.models.tf.distributions import (
    Categorical,
    DiagGaussian,
    MultiActionDistribution,
    MultiCategorical,
    SquashedGaussian,
    TFActionDistribution,
)

# 1.13's framework-free base, which its TF module re-exported and custom TF distributions
# subclassed; rlstack's TF base has the same constructor and methods.
ActionDistribution = TFActionDistribution

__all__ = ["ActionDistribution", "Categorical", "DiagGaussian", "MultiActionDistribution", "MultiCategorical",
           "SquashedGaussian", "TFActionDistribution"]
