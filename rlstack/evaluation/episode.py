"""Episode: one running episode as callbacks see it (classic RLlib's ``MultiAgentEpisode``).

Rollout workers build Episode objects only when a callbacks class overrides an episode
hook (``on_episode_start/step/end``, ``on_postprocess_trajectory``); a run without such
callbacks steps its envs without them. :class:`EpisodeTracker` keeps one Episode per
sub-env and calls the hooks.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np

from rlstack.env.multi_agent_env import DEFAULT_AGENT_ID
from rlstack.errors import MissingFeatureError
from rlstack.sample_batch import DEFAULT_POLICY_ID

if TYPE_CHECKING:
    from rlstack.evaluation.callbacks import DefaultCallbacks

__all__ = ["DEFAULT_AGENT_ID", "DEFAULT_POLICY_ID", "EPISODE_HOOKS", "Episode", "EpisodeTracker",
           "MultiAgentEpisode", "zero_action"]

# The hooks that need Episode objects.
EPISODE_HOOKS = frozenset({"on_episode_start", "on_episode_step", "on_episode_end", "on_postprocess_trajectory"})


def zero_action(space: gym.Space) -> Any:
    """Zeros shaped like one action of ``space`` (what an episode's last action is
    before its first)."""
    if isinstance(space, gym.spaces.Discrete):
        return 0
    if isinstance(space, (gym.spaces.Box, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
        return np.zeros(space.shape, dtype=space.dtype)
    return None


class CollectedRows:
    """What 1.13's per-episode sample collector let callbacks read: ``policy_collectors``
    by policy id, each with its ``batches`` (a list of SampleBatches)."""

    class _PolicyRows:
        def __init__(self, batch: Any) -> None:
            self.batches = [batch]
            self.agent_steps = batch.count

    def __init__(self, batches: dict[str, Any]) -> None:
        self.policy_collectors = {pid: self._PolicyRows(batch) for pid, batch in batches.items()}
        self.count = max((batch.count for batch in batches.values()), default=0)


class Episode:
    """The state of one running episode of one sub-env.

    Attributes:
        episode_id: The episode's id (the ``eps_id`` column of its rows in the batch).
        env_id: The vector index of the sub-env it runs in.
        length: Steps taken so far.
        total_reward: Sum of its (unclipped) rewards so far.
        agent_rewards: ``{(agent_id, policy_id): total reward}``.
        user_data: Free for callbacks to keep state in between hooks.
        custom_metrics: Scalars reported as ``custom_metrics/<name>_mean/_min/_max``.
        hist_data: Lists of values reported under ``hist_stats``.
        media: Free for callbacks (not reported by rlstack's loggers).

    Args:
        episode_id: See above.
        env_id: See above.
        zero_action: What :meth:`last_action_for` returns before the first action
            (classic RLlib: zeros shaped like an action).
    """

    def __init__(self, episode_id: int, env_id: int, zero_action: Any = 0) -> None:
        self.episode_id = episode_id
        self.env_id = env_id
        self.length = 0
        self.total_reward = 0.0
        self.agent_rewards: dict[tuple[str, str], float] = defaultdict(float)
        self.user_data: dict[str, Any] = {}
        self.custom_metrics: dict[str, float] = {}
        self.hist_data: dict[str, list] = {}
        self.media: dict[str, Any] = {}
        self._zero_action = zero_action
        self._last_obs: Any = None
        self._last_raw_obs: Any = None
        self._last_info: dict = {}
        self._last_action: Any = zero_action
        self._prev_action: Any = zero_action
        self._last_reward = 0.0
        self._prev_reward = 0.0
        self._last_done = False
        # The sampler's view of this episode's collected rows (see batch_builder).
        self._collected_rows: Callable[[], Any] | None = None

    def __repr__(self) -> str:
        return f"Episode(episode_id={self.episode_id}, env_id={self.env_id}, length={self.length})"

    @property
    def batch_builder(self) -> Any:
        """1.13's sample collector of this episode, to read from:
        ``batch_builder.policy_collectors["default_policy"].batches[-1]`` is a SampleBatch
        of the episode's rows collected in the current sampling fragment, up to the
        latest step (in ``on_episode_end``: its last row is the episode's end, ``dones``
        True). Unlike 1.13's, the rows are not postprocessed yet (that comes after the
        fragment; ``on_postprocess_trajectory`` sees the postprocessed ones) and earlier
        fragments' rows of a long episode were returned already."""
        rows = self._collected_rows() if self._collected_rows is not None else None
        if rows is None:
            raise MissingFeatureError(
                "Episode.batch_builder (1.13's sample collector) is only kept by the single-agent sampler while it "
                "runs the episode: read the rows of a trajectory in on_postprocess_trajectory (postprocessed_batch), "
                "and an ended episode in on_episode_end (episode.length, episode.total_reward, "
                "episode.last_info_for()).")
        return CollectedRows({DEFAULT_POLICY_ID: rows})

    def policy_for(self, agent_id: str = DEFAULT_AGENT_ID) -> str:
        """The policy id acting for ``agent_id`` (always ``"default_policy"``)."""
        return DEFAULT_POLICY_ID

    def get_agents(self) -> list[str]:
        """The ids of the agents in this episode (``["agent0"]``)."""
        return [DEFAULT_AGENT_ID]

    # ----- what happened last (agent_id is accepted for classic scripts) -----------------

    def last_observation_for(self, agent_id: str = DEFAULT_AGENT_ID) -> Any:
        """The last observation as the policy saw it (preprocessed, flattened, filtered)."""
        return self._last_obs

    def last_raw_obs_for(self, agent_id: str = DEFAULT_AGENT_ID) -> Any:
        """The last observation as the env returned it."""
        return self._last_raw_obs

    def last_info_for(self, agent_id: str = DEFAULT_AGENT_ID) -> dict:
        """The info dict of the last step (empty after the reset)."""
        return self._last_info

    def last_action_for(self, agent_id: str = DEFAULT_AGENT_ID) -> Any:
        """The last action the policy chose (zeros before the first)."""
        return self._last_action

    def prev_action_for(self, agent_id: str = DEFAULT_AGENT_ID) -> Any:
        """The action before the last one (zeros before the second)."""
        return self._prev_action

    def last_reward_for(self, agent_id: str = DEFAULT_AGENT_ID) -> float:
        """The reward of the last step (0.0 before the first)."""
        return self._last_reward

    def prev_reward_for(self, agent_id: str = DEFAULT_AGENT_ID) -> float:
        """The reward of the step before the last one."""
        return self._prev_reward

    def last_done_for(self, agent_id: str = DEFAULT_AGENT_ID) -> bool:
        """Whether the last step ended the episode."""
        return self._last_done

    # ----- updates by the rollout worker --------------------------------------------------

    def _observe_first(self, raw_obs: Any, obs: Any) -> None:
        self._last_raw_obs, self._last_obs = raw_obs, obs

    def _step(self, action: Any, reward: float, raw_obs: Any, obs: Any, info: dict, done: bool) -> None:
        self._prev_action, self._last_action = self._last_action, action
        self._prev_reward, self._last_reward = self._last_reward, reward
        self._last_raw_obs, self._last_obs, self._last_info, self._last_done = raw_obs, obs, info, done
        self.length += 1
        self.total_reward += reward
        self.agent_rewards[(DEFAULT_AGENT_ID, DEFAULT_POLICY_ID)] += reward


# Classic RLlib's name of the same class (1.x scripts import both).
MultiAgentEpisode = Episode


class EpisodeTracker:
    """One :class:`Episode` per sub-env of a rollout worker, and the episode hooks.

    Args:
        worker: The rollout worker (passed to the hooks as ``worker``).
        callbacks: The worker's callbacks.
        hooks: Which hooks it overrides (:func:`~rlstack.evaluation.callbacks.overridden_hooks`).
        num_envs: Sub-envs of the worker.
        zero_action: Zeros shaped like one action.
    """

    def __init__(self, worker: Any, callbacks: "DefaultCallbacks", hooks: frozenset[str], num_envs: int,
                 zero_action: Any) -> None:
        self.worker = worker
        self.callbacks = callbacks
        self.call_start = "on_episode_start" in hooks
        self.call_step = "on_episode_step" in hooks
        self.call_end = "on_episode_end" in hooks
        self.episodes: list[Episode | None] = [None] * num_envs
        # Episodes by id, also just-ended ones: their trajectory pieces are
        # postprocessed at the end of the fragment.
        self.by_id: dict[int, Episode] = {}
        self.zero_action = zero_action
        #: While the sampler runs a fragment: ``rows_of(env_index)``, the rows collected so
        #: far of that sub-env's running episode (what ``Episode.batch_builder`` shows).
        self.rows_of: Callable[[int], Any] | None = None

    def _kwargs(self, episode: Episode) -> dict[str, Any]:
        worker = self.worker
        return {"worker": worker, "base_env": worker.async_env, "policies": {DEFAULT_POLICY_ID: worker.policy},
                "episode": episode, "env_index": episode.env_id}

    def start(self, env_index: int, episode_id: int, raw_obs: Any, obs: np.ndarray) -> None:
        """A new episode in sub-env ``env_index``, whose first observation came in."""
        episode = Episode(int(episode_id), env_index, self.zero_action)
        episode._observe_first(raw_obs, obs)
        episode._collected_rows = lambda: self.rows_of(env_index) if self.rows_of is not None else None
        self.episodes[env_index] = episode
        self.by_id[episode.episode_id] = episode
        if self.call_start:
            self.callbacks.on_episode_start(**self._kwargs(episode))

    def step(self, env_index: int, action: Any, reward: float, raw_obs: Any, obs: np.ndarray, info: dict,
             done: bool) -> Episode:
        """Records one step of sub-env ``env_index``'s episode and calls the step hook
        (and, if ``done``, the end hook); returns the episode."""
        episode = self.episodes[env_index]
        episode._step(action, float(reward), raw_obs, obs, info, done)
        if self.call_step:
            self.callbacks.on_episode_step(**self._kwargs(episode))
        if done and self.call_end:
            self.callbacks.on_episode_end(**self._kwargs(episode))
        return episode

    def start_all(self, episode_ids: Sequence[int], raw_obs: Sequence[Any], obs: np.ndarray) -> None:
        """New episodes in every sub-env after a reset of them all."""
        for i in range(len(self.episodes)):
            self.start(i, int(episode_ids[i]), raw_obs[i], obs[i])

    def after_step(self, actions: np.ndarray, rewards: np.ndarray, raw_obs: Sequence[Any], obs: np.ndarray,
                   infos: Sequence[dict], final_obs: dict[int, Any], broken: Sequence[int],
                   finish: Callable[[int, Episode | None], int]) -> None:
        """Records one step of every sub-env and calls the hooks.

        Args:
            actions: The policy's actions, one per sub-env.
            rewards: The env's (unclipped) rewards.
            raw_obs: What each sub-env returned (a reset one: its first observation).
            obs: ``raw_obs`` as the policy sees them.
            infos: Each sub-env's info dict.
            final_obs: The observation that ended each ended episode, by sub-env.
            broken: Sub-envs restarted after raising; their episode is dropped.
            finish: ``finish(env_index, episode)`` records an ended episode (after its
                end hook; None for a broken one) and returns the id of the next.
        """
        broken = set(broken)
        ended = [i for i in final_obs if i not in broken]
        final_view = self.worker.final_obs_view([final_obs[i] for i in ended], ended) if ended else None
        for i in range(len(self.episodes)):
            if i in broken:
                self.start(i, finish(i, None), raw_obs[i], obs[i])
            elif i in final_obs:
                row = ended.index(i)
                episode = self.step(i, actions[i], rewards[i], final_obs[i], final_view[row], infos[i], True)
                self.start(i, finish(i, episode), raw_obs[i], obs[i])
            else:
                self.step(i, actions[i], rewards[i], raw_obs[i], obs[i], infos[i], False)

    def prune(self) -> None:
        """Forgets ended episodes (after their pieces were postprocessed)."""
        live = {e.episode_id: e for e in self.episodes if e is not None}
        self.by_id = live
