"""RLlib 1.13's ``ray.rllib.execution.train_ops``: one learning step of a custom
``Trainer.training_iteration`` (1.13's two-trainer workflow, for instance), and the
learning operators of 1.x's execution plans (``TrainOneStep``, ``UpdateTargetNetwork``).

rlstack's policies run their own SGD loop in ``learn_on_batch`` (epochs and minibatches
from their config), so a step is each policy's ``learn_on_batch`` on its rows.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any


from rlstack.execution.common import (
    LAST_TARGET_UPDATE_TS,
    LEARN_ON_BATCH_TIMER,
    NUM_TARGET_UPDATES,
    STEPS_SAMPLED_COUNTER,
    STEPS_TRAINED_COUNTER,
    STEPS_TRAINED_THIS_ITER_COUNTER,
    WORKER_UPDATE_TIMER,
    _check_sample_batch_type,
    _get_shared_metrics,
)
from rlstack.sample_batch import DEFAULT_POLICY_ID, MultiAgentBatch, SampleBatch
from rlstack.utils.metrics.learner_info import LEARNER_INFO, LEARNER_STATS_KEY

if TYPE_CHECKING:
    from rlstack.evaluation.worker_set import WorkerSet
    from rlstack.policies.policy import Policy

__all__ = ["MultiGPUTrainOneStep", "TrainOneStep", "UpdateTargetNetwork", "multi_gpu_train_one_step",
           "train_one_step"]


def __getattr__(name: str) -> Any:
    from rlstack.execution.common import missing_operator

    # ComputeGradients / ApplyGradients / AverageGradients: 1.x's A3C / A2C microbatch plans.
    raise missing_operator(__name__, name, "rlstack's learning operators are TrainOneStep, MultiGPUTrainOneStep and "
                           "UpdateTargetNetwork; gradients computed on the workers are A3C's (rlstack.trainers.a3c), "
                           "and a policy's compute_gradients / apply_gradients work in a custom training_step")


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


class TrainOneStep:
    """For ``.for_each()`` in an execution plan: each policy that learns takes its rows of
    the batch (``learn_on_batch``), then the trainer counts the trained steps and sends
    the new weights (and filters, and the schedules' timestep) to the rollout workers.

    Yields ``(batch, info)``: ``info`` is ``{policy_id: {"learner_stats": stats}}`` with a
    policy's per-row statistics (DQN's ``td_error``) beside ``learner_stats``; the result's
    ``info/learner`` gets the statistics without them.

    Args:
        workers: The trainer's WorkerSet.
        policies: The policy ids that learn (empty: ``multiagent.policies_to_train``).
        num_sgd_iter: Epochs over the batch.
        sgd_minibatch_size: Rows per gradient step (0: the whole batch). These two are the
            plan of the call, in place of the policy's config (PPO's ``num_sgd_iter`` /
            ``sgd_minibatch_size``), as in 1.x: ``TrainOneStep(workers)`` takes one
            gradient step on the whole batch; PPO's own plan passes the config's values.
    """

    def __init__(self, workers: "WorkerSet", policies: Collection[str] = frozenset(), num_sgd_iter: int = 1,
                 sgd_minibatch_size: int = 0) -> None:
        self.workers = workers
        self.policies = list(policies)
        self.num_sgd_iter = int(num_sgd_iter)
        self.sgd_minibatch_size = int(sgd_minibatch_size or 0)

    def __call__(self, batch: SampleBatch | MultiAgentBatch) -> tuple[SampleBatch | MultiAgentBatch, dict[str, Any]]:
        """Learns on ``batch``; returns ``(batch, info)``.

        Raises:
            RuntimeError: Outside a trainer's execution plan (the trainer counts and syncs).
        """
        _check_sample_batch_type(batch)
        metrics = _get_shared_metrics()
        trainer = metrics.trainer
        if trainer is None:
            raise RuntimeError(f"{type(self).__name__} runs inside a trainer's execution plan (the trainer counts the "
                               "trained steps and syncs the workers); call it from Trainer.execution_plan.")
        by_policy = batch.policy_batches if isinstance(batch, MultiAgentBatch) else {DEFAULT_POLICY_ID: batch}
        wanted = self.policies or trainer.policies_to_train(batch)
        info: dict[str, Any] = {}
        with metrics.timers[LEARN_ON_BATCH_TIMER]:
            for pid in wanted:
                rows = by_policy.get(pid)
                if rows is None or not rows.count:
                    continue
                policy = self.workers.local_worker().get_policy(pid)
                stats = dict(self._learn(policy, pid, rows))
                per_row = {key: stats.pop(key) for key in getattr(policy, "per_row_stats", ()) if key in stats}
                info[pid] = {LEARNER_STATS_KEY: stats, **per_row}
        trainer.count_trained(batch)
        metrics.counters[STEPS_TRAINED_THIS_ITER_COUNTER] = batch.env_steps()
        metrics.info[LEARNER_INFO] = {pid: {LEARNER_STATS_KEY: entry[LEARNER_STATS_KEY]} for pid, entry in info.items()}
        with metrics.timers[WORKER_UPDATE_TIMER]:
            trainer.sync_learned_weights(info)
        return batch, info

    def _learn(self, policy: "Policy", policy_id: str, rows: SampleBatch) -> dict[str, Any]:
        # 1.x's TrainOneStep made num_sgd_iter epochs of sgd_minibatch_size-row gradient
        # steps (one step on the whole batch by default), whatever the policy's config
        # said: its learn_on_batch took one step. rlstack's learn_on_batch runs a plan, so
        # the operator's arguments become that plan for this call.
        with policy.plan_override(self.sgd_minibatch_size, self.num_sgd_iter):
            return policy.learn_on_batch(rows)


class MultiGPUTrainOneStep(TrainOneStep):
    """1.x's multi-GPU learning operator: :class:`TrainOneStep` here, since rlstack's
    learner has one device (``num_gpus`` places it; towers are not built).

    Args:
        workers: The trainer's WorkerSet.
        sgd_minibatch_size: As TrainOneStep's.
        num_sgd_iter: As TrainOneStep's.
        num_gpus: Accepted for 1.x's sake (the trainer's ``num_gpus`` places the learner).
        _fake_gpus: Accepted for 1.x's sake.
        shuffle_sequences: Accepted for 1.x's sake (deprecated there).
        framework: Accepted for 1.x's sake (deprecated there).
    """

    def __init__(self, *, workers: "WorkerSet", sgd_minibatch_size: int = 0, num_sgd_iter: int = 1,
                 num_gpus: float = 0, _fake_gpus: bool = False, shuffle_sequences: Any = None,
                 framework: Any = None) -> None:
        super().__init__(workers, num_sgd_iter=num_sgd_iter, sgd_minibatch_size=sgd_minibatch_size)


class UpdateTargetNetwork:
    """For ``.for_each()`` after a learning step: every ``target_update_freq`` steps
    (sampled, or trained with ``by_steps_trained``) the learning policies copy their online
    network into the target network (``update_target()``), counted in the trainer's
    ``num_target_updates`` and ``last_target_update_ts``.

    Args:
        workers: The trainer's WorkerSet.
        target_update_freq: Steps between updates (DQN's ``target_network_update_freq``).
        by_steps_trained: Count trained steps instead of sampled ones.
        policies: The policy ids to update (empty: those that learn).
    """

    def __init__(self, workers: "WorkerSet", target_update_freq: int, by_steps_trained: bool = False,
                 policies: Collection[str] = frozenset()) -> None:
        self.workers = workers
        self.target_update_freq = int(target_update_freq)
        self.metric = STEPS_TRAINED_COUNTER if by_steps_trained else STEPS_SAMPLED_COUNTER
        self.policies = set(policies)

    def __call__(self, _: Any) -> None:
        """Updates the targets when due (the item is not used; None comes out, as in 1.x)."""
        metrics = _get_shared_metrics()
        now = metrics.counters[self.metric]
        if now - metrics.counters[LAST_TARGET_UPDATE_TS] >= self.target_update_freq:
            self.workers.local_worker().foreach_trainable_policy(
                lambda policy, pid: (not self.policies or pid in self.policies) and policy.update_target())
            metrics.counters[NUM_TARGET_UPDATES] += 1
            metrics.counters[LAST_TARGET_UPDATE_TS] = now
