"""Episode statistics and their smoothing into the classic result keys (``episode_reward_*``,
``custom_metrics``, ``hist_stats``)."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlstack.sample_batch import DEFAULT_POLICY_ID


@dataclass(frozen=True)
class EpisodeStats:
    """One finished episode: its undiscounted return (all agents' rewards together) and its
    length in env steps, what callbacks put in its ``custom_metrics`` and ``hist_data``
    (empty without callbacks), and in a multi-agent run each ``(agent_id, policy_id)``'s
    own return."""

    episode_return: float
    length: int
    custom_metrics: dict[str, float] = field(default_factory=dict)
    hist_data: dict[str, list] = field(default_factory=dict)
    agent_rewards: dict[tuple[Any, str], float] = field(default_factory=dict)


class EpisodeWindow:
    """The last ``size`` finished episodes (``metrics_smoothing_episodes``)."""

    def __init__(self, size: int) -> None:
        self.episodes: deque[EpisodeStats] = deque(maxlen=max(1, int(size)))

    def extend(self, episodes: Iterable[EpisodeStats]) -> None:
        """Adds newly finished episodes, dropping the oldest beyond the window."""
        self.episodes.extend(episodes)


def reward_summary(episodes: Iterable[EpisodeStats]) -> dict[str, float]:
    """``episode_reward_mean/min/max`` and ``episode_len_mean`` over ``episodes``.

    With no finished episode the values are NaN: ``episode_reward_mean`` stays NaN until
    the first episode ends (as in classic RLlib).
    """
    episodes = list(episodes)
    if not episodes:
        nan = math.nan
        return {"episode_reward_mean": nan, "episode_reward_min": nan, "episode_reward_max": nan, "episode_len_mean": nan}
    returns = [e.episode_return for e in episodes]
    return {
        "episode_reward_mean": sum(returns) / len(returns),
        "episode_reward_min": min(returns),
        "episode_reward_max": max(returns),
        "episode_len_mean": sum(e.length for e in episodes) / len(episodes),
    }


def summarize_custom_metrics(episodes: Iterable[EpisodeStats], keep_custom_metrics: bool = False) -> dict[str, Any]:
    """``<name>_mean/_min/_max`` of each custom metric over ``episodes`` (classic RLlib's
    naming); NaN values are left out, and a metric with none left reports NaN. With
    ``keep_custom_metrics`` (``keep_per_episode_custom_metrics``) each metric is instead
    the list of its values, one per episode, under its own name (NaN values left out too)."""
    values: dict[str, list] = {}
    for episode in episodes:
        for name, value in episode.custom_metrics.items():
            values.setdefault(name, []).append(value)
    summary: dict[str, Any] = {}
    for name, metric_values in values.items():
        finite = [v for v in metric_values if not np.any(np.isnan(v))]
        if keep_custom_metrics:
            summary[name] = finite
            continue
        summary[f"{name}_mean"] = float(np.mean(finite)) if finite else math.nan
        summary[f"{name}_min"] = float(np.min(finite)) if finite else math.nan
        summary[f"{name}_max"] = float(np.max(finite)) if finite else math.nan
    return summary


def hist_stats(episodes: Iterable[EpisodeStats]) -> dict[str, list[Any]]:
    """``episode_reward`` and ``episode_lengths`` of ``episodes``, plus their ``hist_data``
    lists concatenated by name and, multi-agent, ``policy_<id>_reward`` (classic RLlib's
    ``hist_stats``)."""
    episodes = list(episodes)
    stats: dict[str, list[Any]] = {
        "episode_reward": [e.episode_return for e in episodes],
        "episode_lengths": [e.length for e in episodes],
    }
    for episode in episodes:
        for name, data in episode.hist_data.items():
            stats.setdefault(name, []).extend(data)
        for (_, policy_id), reward in episode.agent_rewards.items():
            if policy_id != DEFAULT_POLICY_ID:  # multi-agent: each agent's return, by policy (1.13's)
                stats.setdefault(f"policy_{policy_id}_reward", []).append(reward)
    return stats


def policy_rewards(episodes: Iterable[EpisodeStats]) -> dict[str, dict[str, float]]:
    """``policy_reward_mean/min/max``: ``{policy_id: value}`` over the returns of each agent
    that a policy acted for, one per agent per episode (1.13's; ``default_policy`` is
    left out, as 1.13 did, so a single-agent run reports empty dicts)."""
    returns: dict[str, list[float]] = {}
    for episode in episodes:
        for (_, policy_id), reward in episode.agent_rewards.items():
            if policy_id != DEFAULT_POLICY_ID:
                returns.setdefault(policy_id, []).append(reward)
    return {f"policy_reward_{name}": {pid: float(fn(values)) for pid, values in returns.items()}
            for name, fn in (("min", np.min), ("max", np.max), ("mean", np.mean))}


def episode_results(episodes: Iterable[EpisodeStats], keep_custom_metrics: bool = False) -> dict[str, Any]:
    """:func:`reward_summary` with ``policy_reward_*``, ``custom_metrics`` (per-episode
    lists with ``keep_custom_metrics``) and ``hist_stats`` beside it."""
    episodes = list(episodes)
    return {**reward_summary(episodes), **policy_rewards(episodes),
            "custom_metrics": summarize_custom_metrics(episodes, keep_custom_metrics),
            "hist_stats": hist_stats(episodes)}


def summarize_episodes(episodes: Iterable[EpisodeStats], new_episodes: Iterable[EpisodeStats] | None = None,
                       keep_custom_metrics: bool = False) -> dict[str, Any]:
    """Classic RLlib's metrics dict over ``episodes``: :func:`episode_results` and
    ``episodes_this_iter`` (the count of ``new_episodes``, else of ``episodes``)."""
    episodes = list(episodes)
    new = episodes if new_episodes is None else list(new_episodes)
    return {**episode_results(episodes, keep_custom_metrics), "episodes_this_iter": len(new)}


def collect_episodes(local_worker: Any = None, remote_workers: Sequence[Any] = (), to_be_collected: Sequence[Any] = (),
                     timeout_seconds: float = 180) -> tuple[list[EpisodeStats], list[Any]]:
    """The episodes the given rollout workers finished since they were last asked, and
    (classic RLlib's second value) the pending requests, always empty here: the remote
    workers are waited for, up to ``timeout_seconds``."""
    episodes = list(local_worker.get_metrics()) if local_worker is not None else []
    if remote_workers:
        import ray

        for worker_episodes in ray.get([w.get_metrics.remote() for w in remote_workers], timeout=timeout_seconds):
            episodes.extend(worker_episodes)
    return episodes, []


def collect_metrics(local_worker: Any = None, remote_workers: Sequence[Any] = (), to_be_collected: Sequence[Any] = (),
                    timeout_seconds: float = 180, keep_custom_metrics: bool = False) -> dict[str, Any]:
    """:func:`summarize_episodes` of :func:`collect_episodes` (classic RLlib's call)."""
    episodes, _ = collect_episodes(local_worker, remote_workers, to_be_collected, timeout_seconds)
    return summarize_episodes(episodes, keep_custom_metrics=keep_custom_metrics)


def off_policy_estimates(estimates: list[Any]) -> dict[str, dict[str, float]]:
    """``{estimator name: {metric: mean over the estimates}}`` (1.13's
    ``result["off_policy_estimator"]``), from ``OffPolicyEstimate`` objects."""
    by_name: dict[str, dict[str, list[float]]] = {}
    for estimate in estimates:
        metrics = by_name.setdefault(estimate.estimator_name, {})
        for key, value in estimate.metrics.items():
            metrics.setdefault(key, []).append(float(value))
    return {name: {key: float(np.mean(values)) for key, values in metrics.items()} for name, metrics in by_name.items()}
