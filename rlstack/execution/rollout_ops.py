"""RLlib 1.13's ``ray.rllib.execution.rollout_ops``: sampling for a custom training step
(``synchronous_parallel_sample``) and the sampling operators of 1.x's execution plans.

``ParallelRollouts`` is the source of a plan: each ``next()`` samples from the trainer's
rollout workers (``WorkerSet.sample``, the same call the synchronous ``training_step``
makes) and adds the steps to the trainer's counters. ``ConcatBatches``,
``SelectExperiences`` and ``StandardizeFields`` are plain callables for ``.combine()`` /
``.for_each()``. ``synchronous_parallel_sample`` lives in ``rlstack.evaluation.worker_set``
(a layer above this package) and is found on first use.
"""

from __future__ import annotations

import logging
from collections.abc import Container, Sequence
from typing import TYPE_CHECKING, Any

from rlstack.execution.common import (
    AGENT_STEPS_SAMPLED_COUNTER,
    SAMPLE_TIMER,
    STEPS_SAMPLED_COUNTER,
    _check_sample_batch_type,
    _get_shared_metrics,
)
from rlstack.execution.local_iterator import LocalIterator, ParallelIterator
from rlstack.sample_batch import MultiAgentBatch, SampleBatch, concat_samples
from rlstack.utils.sgd import standardized

if TYPE_CHECKING:
    from rlstack.evaluation.rollout_worker import RolloutWorker
    from rlstack.evaluation.worker_set import WorkerSet

logger = logging.getLogger(__name__)

__all__ = ["ConcatBatches", "ParallelRollouts", "SelectExperiences", "StandardizeFields", "standardize_fields",
           "synchronous_parallel_sample"]

ROLLOUT_MODES = ("bulk_sync", "async", "raw")
COUNT_STEPS_BY = ("env_steps", "agent_steps")


def __getattr__(name: str) -> Any:
    if name == "synchronous_parallel_sample":
        from rlstack.evaluation.worker_set import synchronous_parallel_sample

        return synchronous_parallel_sample
    if name.startswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from rlstack._missing_modules import MissingModuleError

    # AsyncGradients: 1.x's A3C plan, gradients computed on the workers.
    raise MissingModuleError(
        f"rlstack.execution.rollout_ops has no {name} (RLlib's ray.rllib.execution.rollout_ops.{name}): rlstack's "
        "execution-plan operators are ParallelRollouts, ConcatBatches, SelectExperiences and StandardizeFields "
        "here; gradients computed on the rollout workers are A3C's (rlstack.trainers.a3c), and a custom "
        "training_step() can call synchronous_parallel_sample(worker_set, max_env_steps=...) from this module.",
        name=f"{__name__}.{name}")


def _report_sampled(batch: SampleBatch | MultiAgentBatch) -> SampleBatch | MultiAgentBatch:
    # The sampled steps, added to the running plan's (the trainer's) counters.
    metrics = _get_shared_metrics()
    metrics.counters[STEPS_SAMPLED_COUNTER] += batch.env_steps()
    metrics.counters[AGENT_STEPS_SAMPLED_COUNTER] += batch.agent_steps()
    return batch


def ParallelRollouts(workers: "WorkerSet", *, mode: str = "bulk_sync",  # noqa: N802 - 1.x's name
                     num_async: int = 1) -> LocalIterator[SampleBatch | MultiAgentBatch] | ParallelIterator:
    """The batches the rollout workers sample, as a plan's source (1.x's operator).

    The workers first get the learner's weights. Each ``next()`` samples and adds the
    steps to the trainer's counters (``STEPS_SAMPLED_COUNTER``, i.e. ``num_env_steps_sampled``,
    and the agent steps); without remote workers every mode samples the driver's worker.

    Args:
        workers: The trainer's WorkerSet (``execution_plan``'s first argument).
        mode: ``"bulk_sync"``: one ``sample()`` from every worker in parallel,
            concatenated (``WorkerSet.sample``); ``"async"``: each worker's batch as soon
            as it arrives, ``num_async`` requests in flight per worker (the batch's worker
            is what ``zip_with_source_actor()`` pairs it with); ``"raw"``: the
            :class:`~rlstack.execution.local_iterator.ParallelIterator`, which the caller
            gathers (``gather_sync()`` / ``gather_async()``) and counts itself.
        num_async: Requests in flight per worker in ``"async"`` mode.

    Returns:
        A LocalIterator of SampleBatch / MultiAgentBatch, or a ParallelIterator in ``"raw"`` mode.

    Raises:
        ValueError: For another ``mode``, naming the allowed ones.
    """
    if mode not in ROLLOUT_MODES:
        raise ValueError(f"ParallelRollouts(mode={mode!r}): mode must be one of {', '.join(map(repr, ROLLOUT_MODES))} "
                         "('bulk_sync': one batch from every worker per step, concatenated; 'async': batches as "
                         "they arrive; 'raw': the ParallelIterator, to gather yourself).")
    workers.sync_weights()
    if mode == "raw":
        return ParallelIterator(workers)
    if mode == "async" and workers.num_remote_workers:
        return ParallelIterator(workers).gather_async(num_async=num_async).for_each(_report_sampled)

    def rounds(_timeout: Any) -> Any:
        from rlstack.evaluation.worker_set import synchronous_parallel_sample

        while True:
            with _get_shared_metrics().timers[SAMPLE_TIMER]:
                batch = synchronous_parallel_sample(workers)  # one sample() of every worker
            yield batch

    return LocalIterator(rounds, name=f"ParallelRollouts({mode})").for_each(_report_sampled)


class ConcatBatches:
    """For ``.combine()``: holds batches back until they make ``min_batch_size`` steps,
    then gives them out as one (1.x's operator).

    Args:
        min_batch_size: Steps per output batch (``train_batch_size``).
        count_steps_by: ``"env_steps"`` or ``"agent_steps"`` (multi-agent's
            ``count_steps_by``).

    Raises:
        ValueError: For another ``count_steps_by``.
    """

    def __init__(self, min_batch_size: int, count_steps_by: str = "env_steps") -> None:
        if count_steps_by not in COUNT_STEPS_BY:
            raise ValueError(f"ConcatBatches(count_steps_by={count_steps_by!r}): use 'env_steps' or 'agent_steps'.")
        self.min_batch_size = int(min_batch_size)
        self.count_steps_by = count_steps_by
        self.buffer: list[SampleBatch | MultiAgentBatch] = []
        self.count = 0

    def __call__(self, batch: SampleBatch | MultiAgentBatch) -> list[SampleBatch | MultiAgentBatch]:
        """Returns ``[the concatenated batch]`` once enough steps are held, else ``[]``."""
        _check_sample_batch_type(batch)
        size = batch.env_steps() if self.count_steps_by == "env_steps" else batch.agent_steps()
        if size == 0:  # an empty batch (a policy server with no client yet) adds nothing
            return []
        self.buffer.append(batch)
        self.count += size
        if self.count < self.min_batch_size:
            return []
        if self.count > 2 * self.min_batch_size:
            logger.info("ConcatBatches collected %d steps for min_batch_size=%d (many workers, or long episodes "
                        "with batch_mode='complete_episodes').", self.count, self.min_batch_size)
        out = concat_samples(self.buffer)
        self.buffer, self.count = [], 0
        return [out]


class SelectExperiences:
    """For ``.for_each()``: a MultiAgentBatch cut down to some policies' rows (1.x's
    operator); a SampleBatch passes unchanged.

    Args:
        policy_ids: The policy ids to keep.
        local_worker: Instead: keep the policies this worker trains
            (``multiagent.policies_to_train``).

    Raises:
        ValueError: If neither is given.
    """

    def __init__(self, policy_ids: Container[str] | None = None,
                 local_worker: "RolloutWorker | None" = None) -> None:
        if policy_ids is None and local_worker is None:
            raise ValueError("SelectExperiences needs policy_ids=[...] (the policies whose rows to keep) or "
                             "local_worker=workers.local_worker() (keep the policies it trains).")
        if isinstance(policy_ids, str):
            raise ValueError(f"SelectExperiences(policy_ids={policy_ids!r}): give a list of policy ids, "
                             f"e.g. [{policy_ids!r}].")
        self.policy_ids = None if local_worker is not None else set(policy_ids)  # type: ignore[arg-type]
        self.local_worker = local_worker

    def __call__(self, samples: SampleBatch | MultiAgentBatch) -> SampleBatch | MultiAgentBatch:
        """The rows of the selected policies."""
        _check_sample_batch_type(samples)
        if not isinstance(samples, MultiAgentBatch):
            return samples
        keep = self.policy_ids
        if keep is None:
            keep = set(self.local_worker.foreach_trainable_policy(lambda _policy, pid: pid))
        return MultiAgentBatch({pid: rows for pid, rows in samples.policy_batches.items() if pid in keep},
                               samples.count)


def standardize_fields(samples: SampleBatch | MultiAgentBatch, fields: Sequence[str]) -> SampleBatch | MultiAgentBatch:
    """``samples`` with each of ``fields`` rescaled to zero mean and unit deviation, policy
    by policy (in place; a field a batch lacks is skipped)."""
    _check_sample_batch_type(samples)
    batches = samples.policy_batches.values() if isinstance(samples, MultiAgentBatch) else [samples]
    for batch in batches:
        for field in fields:
            if field in batch:
                batch[field] = standardized(batch[field])
    return samples


class StandardizeFields:
    """For ``.for_each()``: :func:`standardize_fields` (PPO's advantages), 1.x's operator.

    Args:
        fields: The columns to standardize.
    """

    def __init__(self, fields: Sequence[str]) -> None:
        if isinstance(fields, str):
            fields = [fields]
        self.fields = list(fields)

    def __call__(self, samples: SampleBatch | MultiAgentBatch) -> SampleBatch | MultiAgentBatch:
        """The batch with its fields standardized."""
        return standardize_fields(samples, self.fields)
