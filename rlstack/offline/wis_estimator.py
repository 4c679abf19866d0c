"""1.12's module path of the weighted importance-sampling estimator."""

from rlstack.offline.estimators.weighted_importance_sampling import (
    WeightedImportanceSampling as WeightedImportanceSamplingEstimator,
)

__all__ = ["WeightedImportanceSamplingEstimator"]
