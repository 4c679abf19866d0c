"""Step-wise weighted importance sampling (Mahmood et al. 2014): each step's ratio is
divided by the mean ratio of that step over the episodes seen so far, which trades the
plain estimator's variance for a bias that vanishes with more episodes."""

from __future__ import annotations

import numpy as np

from rlstack.offline.estimators.off_policy_estimator import OffPolicyEstimate, OffPolicyEstimator
from rlstack.sample_batch import SampleBatch


class WeightedImportanceSampling(OffPolicyEstimator):
    """``V_step_WIS = sum_t gamma^t * p_t / w_t * r_t``, with ``w_t`` the mean of ``p_t``
    over every episode estimated so far that lasted at least ``t + 1`` steps."""

    def __init__(self, name: str, policy, gamma: float) -> None:  # noqa: ANN001 - any Policy
        super().__init__(name, policy, gamma)
        self._sums = np.zeros(0)
        self._counts = np.zeros(0)

    def _update_means(self, weights: np.ndarray) -> np.ndarray:
        n = len(weights)
        if n > len(self._sums):
            self._sums = np.pad(self._sums, (0, n - len(self._sums)))
            self._counts = np.pad(self._counts, (0, n - len(self._counts)))
        self._sums[:n] += weights
        self._counts[:n] += 1
        return self._sums[:n] / self._counts[:n]

    def estimate(self, batch: SampleBatch) -> list[OffPolicyEstimate]:
        batch = self.check_can_estimate_for(batch)
        estimates = []
        for episode in batch.split_by_episode():
            discounted, weights, v_prev = self.episode_terms(episode)
            means = self._update_means(weights)
            v_wis = float(np.sum(weights / np.maximum(means, 1e-12) * discounted))
            estimates.append(OffPolicyEstimate(self.name, {
                "V_prev": v_prev, "V_step_WIS": v_wis, "V_gain_est": v_wis / max(1e-8, v_prev)}))
        return estimates
