"""Step-wise importance sampling (Precup et al. 2000; Thomas & Brunskill 2016)."""

from __future__ import annotations

import numpy as np

from rlstack.offline.estimators.off_policy_estimator import OffPolicyEstimate, OffPolicyEstimator
from rlstack.sample_batch import SampleBatch


class ImportanceSampling(OffPolicyEstimator):
    """``V_step_IS = sum_t gamma^t * p_t * r_t`` per episode, with ``p_t`` the product of
    the ratios ``pi(a_k | s_k) / mu(a_k | s_k)`` for ``k <= t``."""

    def estimate(self, batch: SampleBatch) -> list[OffPolicyEstimate]:
        batch = self.check_can_estimate_for(batch)
        estimates = []
        for episode in batch.split_by_episode():
            discounted, weights, v_prev = self.episode_terms(episode)
            v_is = float(np.sum(weights * discounted))
            estimates.append(OffPolicyEstimate(self.name, {
                "V_prev": v_prev, "V_step_IS": v_is, "V_gain_est": v_is / max(1e-8, v_prev)}))
        return estimates
