"""A rollout worker's recorded experience: the reader that replaces its envs (config
``input``), the writer of what it samples (``output``) and the off-policy estimators of
what it reads (``off_policy_estimation_methods``); see rlstack/offline.

A mixin of :class:`~rlstack.evaluation.rollout_worker.RolloutWorker` (as
``worker_episodes.py``'s is), which supplies ``env``, ``config``, ``policy``,
``sampling_policy``, ``policies`` and ``worker_index``; ``RolloutWorker.sample`` chooses
between :meth:`_read_input` and its env sampling.
"""

from __future__ import annotations

from typing import Any

from rlstack.policies.policy import Policy
from rlstack.sample_batch import MultiAgentBatch, SampleBatch, concat_samples


class WorkerOfflineMixin:
    """Reading, writing and estimating recorded experience on a worker."""

    env: Any
    config: dict
    policy: Policy
    sampling_policy: Policy
    policies: Any
    worker_index: int
    num_workers: int

    def _init_offline_io(self, config: dict) -> None:
        # Only workers that sample hold a reader or writer: those with envs, and, in a
        # trainer without an env (env None, its spaces in the config), the remote workers
        # or the driver's when there are none.
        self.input_reader: Any = None
        self.output_writer: Any = None
        self._estimators: list[Any] = []
        if config.get("input", "sampler") == "sampler" and config.get("output") is None:
            return
        samples = self.env is not None or getattr(self, "_external_env", None) is not None
        if not samples and (config.get("env") is not None or (self.worker_index == 0 and self.num_workers > 0)):
            return
        from rlstack.offline.io_context import IOContext
        from rlstack.offline.resolve import make_estimators, make_input_reader, make_output_writer

        ioctx = IOContext(config.get("output") if isinstance(config.get("output"), str) else None, config,
                          self.worker_index, self)
        self.input_reader = make_input_reader(config, ioctx)
        self.output_writer = make_output_writer(config, ioctx)
        if self.input_reader is not None:
            self._estimators = make_estimators(config, self.policy)

    def _read_input(self) -> SampleBatch | MultiAgentBatch:
        """The reader's next batch, postprocessed if ``postprocess_inputs``, estimated."""
        batch = self.input_reader.next()
        if self.config.get("postprocess_inputs"):
            batch = self._postprocess_recorded(batch)
        for estimator in self._estimators:
            estimator.process(batch)
        return batch

    def _postprocess_recorded(self, batch: SampleBatch | MultiAgentBatch) -> SampleBatch | MultiAgentBatch:
        # Each episode's rows through its policy's trajectory postprocessing.
        if isinstance(batch, MultiAgentBatch):
            return MultiAgentBatch({pid: _postprocess_episodes(rows, self.policies.acting[pid])
                                    for pid, rows in batch.policy_batches.items()}, batch.count)
        return _postprocess_episodes(batch, self.sampling_policy)

    def get_off_policy_estimates(self) -> list[Any]:
        """The off-policy estimates (``OffPolicyEstimate``) since the last call."""
        return [estimate for estimator in self._estimators for estimate in estimator.get_metrics()]

    def _close_offline_io(self) -> None:
        if self.output_writer is not None:
            self.output_writer.close()
        if self.input_reader is not None and hasattr(self.input_reader, "close"):
            self.input_reader.close()


def _postprocess_episodes(batch: SampleBatch, policy: Policy) -> SampleBatch:
    if SampleBatch.EPS_ID not in batch:
        return policy.postprocess_trajectory(batch)
    return concat_samples([policy.postprocess_trajectory(piece) for piece in batch.split_by_episode()])
