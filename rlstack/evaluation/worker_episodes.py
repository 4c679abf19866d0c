"""A rollout worker's episodes and the callbacks around them: per sub-env episode ids,
returns and lengths, the finished episodes' :class:`~rlstack.evaluation.metrics.EpisodeStats`,
and the glue to the user's callbacks (which hooks they override, the sub-env, episode and
trajectory hooks, the :class:`~rlstack.evaluation.episode.EpisodeTracker` they need).

A mixin of :class:`~rlstack.evaluation.rollout_worker.RolloutWorker` (as
``worker_access.py``'s is), which supplies ``env``, ``config``, ``policy``,
``sampling_policy``, ``filter``, ``action_space``, ``worker_index`` and ``_obs_array``; the
sampling loop itself stays in the worker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np

from rlstack.env.env_context import EnvContext
from rlstack.env.registry import make_env
from rlstack.evaluation.callbacks import DefaultCallbacks, make_callbacks, overridden_hooks
from rlstack.evaluation.episode import DEFAULT_AGENT_ID, EPISODE_HOOKS, EpisodeTracker, zero_action
from rlstack.evaluation.metrics import EpisodeStats
from rlstack.sample_batch import DEFAULT_POLICY_ID, SampleBatch

if TYPE_CHECKING:
    from rlstack.env.vector_env import VectorEnv
    from rlstack.policies.policy import Policy
    from rlstack.utils.filters import MeanStdFilter, NoFilter

__all__ = ["WorkerEpisodesMixin"]


class WorkerEpisodesMixin:
    """Episode bookkeeping and callback hooks of a rollout worker."""

    env: VectorEnv | None
    config: dict
    policy: Policy
    sampling_policy: Policy
    filter: NoFilter | MeanStdFilter
    action_space: gym.Space
    worker_index: int

    def _init_callbacks(self, config: dict) -> None:
        self.callbacks: DefaultCallbacks = make_callbacks(config.get("callbacks", DefaultCallbacks))
        # Only the hooks the callbacks override are called; with none, sampling pays one
        # boolean check per step.
        self._hooks = overridden_hooks(self.callbacks)

    def _init_episodes(self, num_envs: int) -> None:
        # Each sub-env's running episode: return, length and id (ids are unique across
        # workers: worker_index * 10**9 onwards), and the episodes finished since the
        # last get_metrics().
        self._returns = np.zeros(num_envs, dtype=np.float64)
        self._lengths = np.zeros(num_envs, dtype=np.int64)
        self._eps_ids = self.worker_index * 10**9 + np.arange(num_envs, dtype=np.int64)
        self._next_eps_id = self.worker_index * 10**9 + num_envs
        self._episodes: list[EpisodeStats] = []

    def _make_sub_env(self, env_spec: Any, context: EnvContext) -> gym.Env:
        env = make_env(env_spec, context, self.config.get("preprocessor_pref"), self.config.get("model"))
        if "on_sub_environment_created" in self._hooks:
            self.callbacks.on_sub_environment_created(worker=self, sub_environment=env, env_context=context)
        return env

    def _make_tracker(self) -> EpisodeTracker | None:
        if self.env is None or not self._hooks & EPISODE_HOOKS:
            return None
        return EpisodeTracker(self, self.callbacks, self._hooks, self.env.num_envs, zero_action(self.action_space))

    def get_metrics(self) -> list[EpisodeStats]:
        """Episodes finished since the last call."""
        episodes, self._episodes = self._episodes, []
        reader = getattr(self, "input_reader", None)
        if reader is not None and hasattr(reader, "get_metrics"):
            episodes.extend(reader.get_metrics())  # episodes a PolicyServerInput's clients played
        sampler = getattr(self, "_external_sampler", None)
        if sampler is not None:
            episodes.extend(sampler.drain_metrics())  # an ExternalEnv's
        return episodes

    def _postprocess(self, piece: SampleBatch) -> SampleBatch:
        if "on_postprocess_trajectory" not in self._hooks:
            return self.sampling_policy.postprocess_trajectory(piece)
        original = SampleBatch(dict(piece))  # postprocessing may add columns in place
        batch = self.sampling_policy.postprocess_trajectory(piece)
        self.callbacks.on_postprocess_trajectory(
            worker=self, episode=self._tracker.by_id[int(piece[SampleBatch.EPS_ID][0])], agent_id=DEFAULT_AGENT_ID,
            policy_id=DEFAULT_POLICY_ID, policies={DEFAULT_POLICY_ID: self.policy}, postprocessed_batch=batch,
            original_batches={DEFAULT_AGENT_ID: (self.policy, original)})
        return batch

    def _finish_episode(self, index: int, episode: Any) -> int:
        # With episode hooks: records sub-env ``index``'s ended episode (after its end hook,
        # so its custom metrics go along; None: a broken one, already restarted) and
        # returns the id of its next episode.
        if episode is not None:
            self._episodes.append(EpisodeStats(float(self._returns[index]), int(self._lengths[index]),
                                               episode.custom_metrics, episode.hist_data))
            self._start_episode(index)
        return int(self._eps_ids[index])

    def final_obs_view(self, raw: list[Any], env_indices: list[int]) -> np.ndarray:
        """The last observations of ended episodes as the policy would see them
        (preprocessed and filtered, the filter not updated), for the episode hooks."""
        return self.filter(self._obs_array(raw, "in the last observation of its episode", env_indices),
                           update=False)

    def _start_episode(self, index: int) -> None:
        # Sub-env ``index`` starts a new episode: fresh return, length and id.
        self._returns[index] = 0.0
        self._lengths[index] = 0
        self._eps_ids[index] = self._next_eps_id
        self._next_eps_id += 1
