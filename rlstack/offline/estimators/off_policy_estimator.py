"""OffPolicyEstimator: the value of the policy being trained, estimated from experience
another (the behaviour) policy recorded (1.13's ``ray.rllib.offline.estimators``).

An estimator sees each batch a worker reads, splits it into episodes and returns one
:class:`OffPolicyEstimate` per episode: ``V_prev``, the behaviour policy's discounted
return in that episode, the estimator's value of the current policy, and ``V_gain_est``,
their ratio. The trainer reports their means per estimator under
``result["off_policy_estimator"][name]``. The recorded rows need ``action_prob`` (or
``action_logp``): the probability with which the behaviour policy took each action.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlstack.sample_batch import MultiAgentBatch, SampleBatch


@dataclass
class OffPolicyEstimate:
    """One episode's estimate: the estimator's name and its metrics."""

    estimator_name: str
    metrics: dict[str, float] = field(default_factory=dict)


class OffPolicyEstimator:
    """Base of the estimators.

    Args:
        name: The name results report it under.
        policy: The policy whose value is estimated (its current weights, each batch).
        gamma: The discount of the estimated values.
    """

    def __init__(self, name: str, policy: Any, gamma: float) -> None:
        self.name = name
        self.policy = policy
        self.gamma = float(gamma)
        self.new_estimates: list[OffPolicyEstimate] = []

    def estimate(self, batch: SampleBatch | MultiAgentBatch) -> list[OffPolicyEstimate]:
        """The estimates of each episode in ``batch``."""
        raise NotImplementedError

    def process(self, batch: SampleBatch | MultiAgentBatch) -> None:
        """Estimates ``batch`` and keeps the estimates until :meth:`get_metrics`."""
        self.new_estimates.extend(self.estimate(batch))

    def get_metrics(self) -> list[OffPolicyEstimate]:
        """The estimates since the last call."""
        out, self.new_estimates = self.new_estimates, []
        return out

    def check_can_estimate_for(self, batch: SampleBatch | MultiAgentBatch) -> SampleBatch:
        """``batch`` as one policy's rows, with the columns an estimate needs.

        Raises:
            ValueError: A multi-agent batch, or a missing column (the message names it).
        """
        if isinstance(batch, MultiAgentBatch):
            raise ValueError("off-policy estimation of multi-agent batches is not supported: estimate each "
                             "policy's recorded rows on their own")
        for column in (SampleBatch.REWARDS, SampleBatch.ACTIONS, SampleBatch.OBS):
            if column not in batch:
                raise ValueError(f"off-policy estimation needs the {column!r} column; the batch has {batch.columns}")
        if "action_prob" not in batch and SampleBatch.ACTION_LOGP not in batch:
            raise ValueError("off-policy estimation needs the behaviour policy's 'action_prob' (or 'action_logp') "
                             "column: record with a policy that samples its actions (explore=True)")
        if SampleBatch.EPS_ID not in batch:
            raise ValueError("off-policy estimation needs the 'eps_id' column to split the rows into episodes")
        return batch

    def behaviour_prob(self, episode: SampleBatch) -> np.ndarray:
        """The recorded probability of each action."""
        if "action_prob" in episode:
            return episode["action_prob"].astype(np.float64)
        return np.exp(episode[SampleBatch.ACTION_LOGP].astype(np.float64))

    def target_prob(self, episode: SampleBatch) -> np.ndarray:
        """The probability of each recorded action under the current policy."""
        logp = self.policy.compute_log_likelihoods(episode[SampleBatch.ACTIONS], episode[SampleBatch.OBS])
        return np.exp(np.asarray(logp, dtype=np.float64))

    def discounts(self, n: int) -> np.ndarray:
        """``gamma ** t`` for the ``n`` steps of an episode."""
        return self.gamma ** np.arange(n, dtype=np.float64)

    def episode_terms(self, episode: SampleBatch) -> tuple[np.ndarray, np.ndarray, float]:
        """``(gamma^t r_t, p_t, V_prev)`` of one episode: the discounted rewards, the
        cumulative importance ratios ``prod_{k<=t} pi(a_k|s_k) / mu(a_k|s_k)`` and the
        behaviour policy's discounted return."""
        discounted = self.discounts(episode.count) * episode[SampleBatch.REWARDS].astype(np.float64)
        ratios = np.cumprod(self.target_prob(episode) / self.behaviour_prob(episode))
        return discounted, ratios, float(discounted.sum())
