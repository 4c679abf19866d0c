"""PG's framework-free pieces: the discounted-return postprocessing every PG policy
(torch, TF, numpy) runs on a trajectory piece, and the numpy acting policy of its workers.

REINFORCE (Williams 1992) weighs ``grad log pi(a_t | s_t)`` by the return that follows
step ``t``. PG has no value function, so a piece cut before its episode ended (by
``rollout_fragment_length``, a time limit or ``horizon``) is not bootstrapped: its return
stops at the cut, as in RLlib 1.13. ``batch_mode: complete_episodes`` avoids such cuts.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlstack.policies.numpy_policy import NumpyPolicy
from rlstack.policies.postprocessing import discount_cumsum
from rlstack.sample_batch import SampleBatch


def postprocess_returns(batch: SampleBatch, config: dict) -> SampleBatch:
    """Adds ``advantages``: the discounted return within the piece,
    ``G_t = sum_{k >= 0} gamma^k r_{t+k}`` up to the piece's last row.

    Args:
        batch: One trajectory piece (consecutive steps of one episode) with ``rewards``.
        config: The policy's config (``gamma``).

    Returns:
        The same batch with the ``advantages`` column (float32).

    >>> batch = SampleBatch({SampleBatch.REWARDS: np.array([1.0, 1.0, 1.0], np.float32)})
    >>> postprocess_returns(batch, {"gamma": 0.5})[SampleBatch.ADVANTAGES]
    array([1.75, 1.5 , 1.  ], dtype=float32)
    """
    batch[SampleBatch.ADVANTAGES] = discount_cumsum(batch[SampleBatch.REWARDS], float(config["gamma"])).astype(
        np.float32)
    return batch


def post_process_advantages(policy: Any, sample_batch: SampleBatch, other_agent_batches: Any = None,
                            episode: Any = None) -> SampleBatch:
    """RLlib 1.13's ``ray.rllib.agents.pg.utils.post_process_advantages``: adds the
    ``advantages`` column (discounted returns, see :func:`postprocess_returns`).

    Args:
        policy: A policy whose ``config`` holds ``gamma``.
        sample_batch: One trajectory piece.
        other_agent_batches: Unused (1.13's signature).
        episode: Unused (1.13's signature).

    Returns:
        ``sample_batch`` with ``advantages``.
    """
    return postprocess_returns(sample_batch, policy.config)


class PGNumpyPolicy(NumpyPolicy):
    """Acts with the built-in dense model in numpy on rollout workers, like
    :class:`~rlstack.policies.numpy_policy.NumpyPolicy`, but asks the worker for no
    bootstrap values: PG's returns stop at a cut piece's end."""

    needs_bootstrap_value = False
