"""MARWIL's trajectory postprocessing, in numpy (shared by its torch, TF and numpy
policies): each row's discounted return to the end of its recorded piece."""

from __future__ import annotations

import numpy as np

from rlstack.policies.postprocessing import discount_cumsum
from rlstack.sample_batch import SampleBatch


def postprocess_returns(batch: SampleBatch, config: dict) -> SampleBatch:
    """Adds ``value_targets``: ``sum_k gamma^k r_{t+k}`` to the piece's end, plus
    ``gamma^(T-t) V(s_T)`` where the piece did not terminate and recorded its bootstrap
    value (rlstack's batches do; 1.13's files, which lack the column, bootstrap 0).

    Args:
        batch: One episode's rows (or one piece of an episode).
        config: The trainer's config (``gamma``).
    """
    rewards = batch[SampleBatch.REWARDS].astype(np.float64)
    if not batch.count:
        batch[SampleBatch.VALUE_TARGETS] = np.zeros(0, np.float32)
        return batch
    last = 0.0
    terminated = bool(batch[SampleBatch.TERMINATEDS][-1]) if SampleBatch.TERMINATEDS in batch else True
    if not terminated and SampleBatch.BOOTSTRAP_VALUE in batch:
        last = float(batch[SampleBatch.BOOTSTRAP_VALUE][-1])
    returns = discount_cumsum(np.append(rewards, last), float(config["gamma"]))[:-1]
    batch[SampleBatch.VALUE_TARGETS] = returns.astype(np.float32)
    return batch
