"""Episode statistics and their smoothing into the classic result keys."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class EpisodeStats:
    """One finished episode: its undiscounted return and its length in steps."""

    episode_return: float
    length: int


class EpisodeWindow:
    """The last ``size`` finished episodes (``metrics_smoothing_episodes``)."""

    def __init__(self, size: int) -> None:
        self.episodes: deque[EpisodeStats] = deque(maxlen=max(1, int(size)))

    def extend(self, episodes: Iterable[EpisodeStats]) -> None:
        """Adds newly finished episodes, dropping the oldest beyond the window."""
        self.episodes.extend(episodes)


def summarize_episodes(episodes: Iterable[EpisodeStats]) -> dict[str, float]:
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
