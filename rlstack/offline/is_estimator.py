"""1.12's module path of the importance-sampling estimator."""

from rlstack.offline.estimators.importance_sampling import ImportanceSampling as ImportanceSamplingEstimator

__all__ = ["ImportanceSamplingEstimator"]
