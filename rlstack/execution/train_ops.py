"""RLlib 1.13's ``ray.rllib.execution.train_ops``: one learning step of a custom
``Trainer.training_iteration`` (1.13's two-trainer workflow, for instance).

rlstack's policies run their own SGD loop in ``learn_on_batch`` (epochs and minibatches
from their config), so a step is each policy's ``learn_on_batch`` on its rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rlstack.sample_batch import DEFAULT_POLICY_ID, MultiAgentBatch, SampleBatch

__all__ = ["multi_gpu_train_one_step", "train_one_step"]


def train_one_step(trainer: Any, train_batch: SampleBatch | MultiAgentBatch,
                   policies_to_train: Sequence[str] | None = None) -> dict[str, Any]:
    """Makes each policy of ``policies_to_train`` (default: the trainer's) learn on its
    rows of ``train_batch`` in the trainer's local worker, and counts the trained steps.
    The rollout workers' weights are not synced: the caller does that.

    Returns:
        ``{policy_id: {"learner_stats": stats}}`` (the result's ``info/learner``).
    """
    worker = trainer.workers.local_worker()
    if isinstance(train_batch, SampleBatch):
        train_batch = MultiAgentBatch({DEFAULT_POLICY_ID: train_batch}, train_batch.count)
    wanted = list(policies_to_train) if policies_to_train is not None else trainer.policies_to_train(train_batch)
    info = {}
    for pid in wanted:
        rows = train_batch.policy_batches.get(pid)
        if rows is not None and rows.count:
            info[pid] = {"learner_stats": worker.get_policy(pid).learn_on_batch(rows)}
    trainer.count_trained(train_batch)
    return info


# 1.13 loaded the batch onto its GPU towers first; rlstack's learner has one device.
multi_gpu_train_one_step = train_one_step
