"""1.12's module path of the estimators' base and result."""

from rlstack.offline.estimators.off_policy_estimator import OffPolicyEstimate, OffPolicyEstimator

__all__ = ["OffPolicyEstimate", "OffPolicyEstimator"]
