"""RLlib 1.13's ``ray.rllib.evaluation.postprocessing``, for scripts that postprocess
trajectories themselves (custom policies, 1.x's policy-building examples); rlstack's own
policies use :mod:`rlstack.policies.postprocessing`, which these functions call."""

from __future__ import annotations

from typing import Any

import numpy as np

from rlstack.policies.postprocessing import compute_gae, discount_cumsum, postprocess_advantages
from rlstack.sample_batch import SampleBatch

__all__ = ["Postprocessing", "compute_advantages", "compute_gae_for_sample_batch", "discount_cumsum"]


class Postprocessing:
    """The column names postprocessing adds (1.13's constants)."""

    ADVANTAGES = SampleBatch.ADVANTAGES
    VALUE_TARGETS = SampleBatch.VALUE_TARGETS


def compute_advantages(rollout: SampleBatch, last_r: float, gamma: float = 0.9, lambda_: float = 1.0,
                       use_gae: bool = True, use_critic: bool = True) -> SampleBatch:
    """Adds ``advantages`` and ``value_targets`` to one trajectory piece, 1.13's way.

    Args:
        rollout: One trajectory piece with ``rewards`` (and ``vf_preds`` when
            ``use_critic``).
        last_r: The value after the piece's last step (0.0 if the episode ended there).
        gamma: Discount factor.
        lambda_: GAE's lambda (with ``use_gae``).
        use_gae: Generalised advantage estimation; else discounted returns, minus the
            value predictions when ``use_critic``.
        use_critic: Whether ``vf_preds`` is read; without it the advantages are the
            discounted returns and the value targets zeros (1.13's layout).

    Returns:
        ``rollout``, with the two columns added.

    Raises:
        ValueError: For ``use_gae`` without ``use_critic`` (GAE needs value predictions).
    """
    if use_gae and not use_critic:
        raise ValueError("compute_advantages(use_gae=True) needs use_critic=True: GAE reads the value "
                         "predictions (vf_preds); pass use_gae=False for discounted returns.")
    rewards = np.asarray(rollout[SampleBatch.REWARDS], dtype=np.float32)
    if use_gae:
        advantages, value_targets = compute_gae(rewards, rollout[SampleBatch.VF_PREDS], float(last_r), gamma, lambda_)
    else:
        returns = discount_cumsum(np.append(rewards, np.float32(last_r)), gamma)[:-1].astype(np.float32)
        if use_critic:
            advantages = returns - np.asarray(rollout[SampleBatch.VF_PREDS], dtype=np.float32)
            value_targets = returns
        else:
            advantages, value_targets = returns, np.zeros_like(returns)
    rollout[Postprocessing.ADVANTAGES] = advantages.astype(np.float32)
    rollout[Postprocessing.VALUE_TARGETS] = value_targets.astype(np.float32)
    return rollout


def compute_gae_for_sample_batch(policy: Any, sample_batch: SampleBatch, other_agent_batches: Any = None,
                                 episode: Any = None) -> SampleBatch:
    """1.13's postprocessing function of the policy-gradient family: advantages by the
    policy's config (``gamma``, ``lambda``, ``use_gae``, ``use_critic``), bootstrapped
    from the piece's ``bootstrap_value`` (rlstack's workers record V(s) there where a
    piece was cut before its episode ended)."""
    return postprocess_advantages(sample_batch, policy.config)
