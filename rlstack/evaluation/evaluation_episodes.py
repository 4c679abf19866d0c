"""Evaluation episodes: a rollout worker plays whole episodes without recording a batch.

Apart from the sampling loop (``RolloutWorker._run_fragment``) because it keeps no
fragment buffers and no trajectory pieces; it shares the worker's env, preprocessing,
filter (not updated), NaN checks and episode hooks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from rlstack.evaluation import recurrent_states
from rlstack.evaluation.metrics import EpisodeStats

if TYPE_CHECKING:
    from rlstack.evaluation.rollout_worker import RolloutWorker


def run_episodes(worker: RolloutWorker, num_episodes: int | None = None,
                 num_steps: int | None = None) -> list[EpisodeStats]:
    """Plays whole episodes without recording a batch (for evaluation).

    Stops after ``num_episodes`` episodes or, with ``num_steps``, once that many
    steps were taken (finishing no partial episode). The filter is not updated.
    """
    env = worker._require_env()
    raw_first = env.reset()
    obs = worker._process_obs(raw_first, update=False)
    returns = np.zeros(env.num_envs)
    lengths = np.zeros(env.num_envs, dtype=np.int64)
    episodes: list[EpisodeStats] = []
    steps = 0
    # A recurrent policy carries each sub-env's state (and previous action and reward)
    # through its episodes.
    states = recurrent_states.initial_states(worker.sampling_policy, env.num_envs)
    tracker = worker._make_tracker()
    if tracker is not None:
        # Evaluation episodes get ids of their own, apart from the sampling ones.
        next_id = iter(range(worker.worker_index * 10**9 + 5 * 10**8, (worker.worker_index + 1) * 10**9))
        tracker.start_all([next(next_id) for _ in range(env.num_envs)], raw_first, obs)

        def finish(i: int, episode: Any) -> int:
            if episode is not None:
                episodes.append(EpisodeStats(float(returns[i]), int(lengths[i]), episode.custom_metrics,
                                             episode.hist_data))
                returns[i], lengths[i] = 0.0, 0
            return next(next_id)
    while True:
        if num_episodes is not None and len(episodes) >= num_episodes:
            return episodes[:num_episodes]
        if num_steps is not None and steps >= num_steps:
            return episodes
        actions, _ = recurrent_states.act(worker.sampling_policy, obs, states)
        raw_obs, rewards, _, _, final_obs, infos = env.step(worker.sampling_policy.unsquash_actions(actions))
        if not np.isfinite(rewards).all():
            worker._raise_non_finite("reward", rewards, lambda i: f"at step {lengths[i] + 1} of an evaluation "
                                                                "episode", None)
        next_obs = worker._obs_array(raw_obs, lambda i: (
            "in its first observation after a reset" if i in final_obs or i in env.broken
            else f"at step {lengths[i] + 1} of an evaluation episode"))
        recurrent_states.after_step(states, actions, worker.clip_rewards(rewards))
        returns += rewards
        lengths += 1
        steps += env.num_envs
        if tracker is None:
            for i in final_obs:
                episodes.append(EpisodeStats(float(returns[i]), int(lengths[i])))
                returns[i], lengths[i] = 0.0, 0
        for i in env.broken:
            # A sub-env restarted mid-episode: that episode is not reported.
            returns[i], lengths[i] = 0.0, 0
        recurrent_states.reset(worker.sampling_policy, states, [*final_obs, *env.broken])
        obs = worker.filter(next_obs, update=False)
        if tracker is not None:
            tracker.after_step(actions, rewards, raw_obs, obs, infos, final_obs, env.broken, finish)
