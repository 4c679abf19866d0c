"""Sampling: rollout workers, the worker set, and episode metrics."""

from rlstack.evaluation.metrics import EpisodeStats, summarize_episodes
from rlstack.evaluation.rollout_worker import RolloutWorker
from rlstack.evaluation.worker_set import WorkerSet, synchronous_parallel_sample

__all__ = ["EpisodeStats", "RolloutWorker", "WorkerSet", "summarize_episodes", "synchronous_parallel_sample"]
