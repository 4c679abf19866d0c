"""Sampling: rollout workers, the worker set, episodes and episode metrics."""

from rlstack.evaluation.episode import Episode, MultiAgentEpisode
from rlstack.evaluation.metrics import EpisodeStats, summarize_episodes
from rlstack.evaluation.rollout_worker import RolloutWorker
from rlstack.evaluation.worker_set import WorkerSet, synchronous_parallel_sample

__all__ = ["Episode", "EpisodeStats", "MultiAgentEpisode", "RolloutWorker", "WorkerSet", "summarize_episodes",
           "synchronous_parallel_sample"]
