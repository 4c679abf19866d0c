"""Off-policy estimators (1.13's ``ray.rllib.offline.estimators``): importance sampling
and weighted importance sampling, by name in ``off_policy_estimation_methods``."""

from rlstack.offline.estimators.importance_sampling import ImportanceSampling
from rlstack.offline.estimators.off_policy_estimator import OffPolicyEstimate, OffPolicyEstimator
from rlstack.offline.estimators.weighted_importance_sampling import WeightedImportanceSampling

__all__ = ["ImportanceSampling", "OffPolicyEstimate", "OffPolicyEstimator", "WeightedImportanceSampling"]
