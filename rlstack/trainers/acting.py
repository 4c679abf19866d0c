"""Using the trained policy: ``compute_single_action`` / ``compute_actions`` on raw
observations, and ``evaluate()`` on evaluation workers. A mixin of :class:`Trainer`,
which supplies ``config``, ``workers``, ``evaluation_workers``, ``policy_class``,
``learner_policy``, ``get_policy``, ``_local_filter`` and the algorithm's
``postprocess_fn`` / ``numpy_policy_class``.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import ray

from rlstack.evaluation.metrics import summarize_episodes
from rlstack.evaluation.worker_set import WorkerSet
from rlstack.policies.policy import Policy, check_observation
from rlstack.sample_batch import DEFAULT_POLICY_ID
from rlstack.trainers.config import evaluation_config_of


class ActingMixin:
    """Acting and evaluation methods of :class:`rlstack.trainers.trainer.Trainer`."""

    # ----- acting -----------------------------------------------------------------------

    def compute_single_action(
        self,
        observation: Any,
        explore: bool | None = None,
        policy_id: str = DEFAULT_POLICY_ID,
        full_fetch: bool = False,
        unsquash_action: bool = True,
    ) -> Any:
        """The action the trained policy takes for one raw observation.

        The observation goes through the same preprocessing and observation filter as
        during training (the filter is applied, not updated).

        Args:
            observation: One observation as the env returns it.
            explore: Sample (True) or take the most likely action (False); None uses
                ``config["explore"]``.
            policy_id: Must be ``"default_policy"``.
            full_fetch: Also return ``([], extras)`` like classic RLlib.
            unsquash_action: Map Box actions onto the action space's bounds.

        Returns:
            The action, or ``(action, [], extras)`` with ``full_fetch``.

        Raises:
            ObservationError: (a ValueError) If the observation does not fit the
                observation space (wrong shape, a non-numeric dtype, an (obs, info) pair).
        """
        policy = self.get_policy(policy_id)
        obs = self._prepare_observations([observation], policy)
        actions, extras = policy.compute_actions(obs, explore=explore)
        if unsquash_action:
            actions = policy.unsquash_actions(actions)
        action = actions[0]
        if full_fetch:
            return action, [], {key: value[0] for key, value in extras.items()}
        return action

    compute_action = compute_single_action

    def compute_actions(
        self, observations: Any, explore: bool | None = None, policy_id: str = DEFAULT_POLICY_ID,
        unsquash_actions: bool = True,
    ) -> Any:
        """Actions for several raw observations.

        Args:
            observations: A dict ``{key: obs}`` (classic multi-agent style: a dict of
                actions comes back) or a sequence / batch array of observations.
            explore: As in :meth:`compute_single_action`.
            policy_id: Must be ``"default_policy"``.
            unsquash_actions: Map Box actions onto the action space's bounds.
        """
        policy = self.get_policy(policy_id)
        if isinstance(observations, dict) and not _is_single_dict_obs(observations, policy):
            keys = list(observations)
            actions = self.compute_actions([observations[k] for k in keys], explore, policy_id, unsquash_actions)
            return dict(zip(keys, actions))
        obs = self._prepare_observations(list(observations), policy)
        actions, _ = policy.compute_actions(obs, explore=explore)
        return policy.unsquash_actions(actions) if unsquash_actions else actions

    def _prepare_observations(self, observations: list[Any], policy: Policy) -> np.ndarray:
        space = policy.observation_space
        for i, obs in enumerate(observations):
            check_observation(obs, space, "Observation" if len(observations) == 1 else
                              f"Observation {i} of {len(observations)}")
        return self._local_filter()(policy.preprocessor.transform_batch(observations), update=False)

    # ----- evaluation ---------------------------------------------------------------------

    def evaluate(self) -> dict[str, Any]:
        """Plays ``evaluation_duration`` episodes (or timesteps) with ``evaluation_config``.

        Returns:
            ``episode_reward_mean/min/max``, ``episode_len_mean``, ``episodes_this_iter``
            and ``timesteps_this_iter`` of the evaluation episodes.
        """
        cfg = self.config
        if self.evaluation_workers is None:
            eval_config = evaluation_config_of(cfg)
            num = cfg["evaluation_num_workers"]
            self.evaluation_workers = WorkerSet(cfg["env"], self.policy_class, eval_config, num,
                                                local_env=num == 0, name="evaluation",
                                                postprocess_fn=type(self).postprocess_fn,
                                                numpy_policy_class=type(self).numpy_policy_class)
        workers = self.evaluation_workers
        weights = self.learner_policy.get_weights()
        filter_state = self._local_filter().get_state()
        workers.local_worker().set_weights(weights)
        workers.local_worker().set_filter_state(filter_state)
        if workers.num_remote_workers:
            weights_ref, filter_ref = ray.put(weights), ray.put(filter_state)
            workers.call_healthy(lambda w: [w.set_weights.remote(weights_ref), w.set_filter_state.remote(filter_ref)])
        duration = cfg["evaluation_duration"]
        by_episodes = cfg["evaluation_duration_unit"] == "episodes"
        if workers.num_remote_workers:
            # A worker recreated or dropped on the way contributes what it finished.
            positions = workers.healthy_positions()
            shares = [duration // len(positions) + (1 if i < duration % len(positions) else 0)
                      for i in range(len(positions))]
            results = workers.call_each({p: (lambda w, n=n: _run_share(w, n, by_episodes))
                                         for p, n in zip(positions, shares) if n > 0})
            episodes = [e for batch in results.values() for e in batch]
        else:
            local = workers.local_worker()
            episodes = local.run_episodes(duration, None) if by_episodes else local.run_episodes(None, duration)
        return {
            **summarize_episodes(episodes),
            "episodes_this_iter": len(episodes),
            "timesteps_this_iter": sum(e.length for e in episodes),
        }


def _is_single_dict_obs(observations: dict, policy: Policy) -> bool:
    space = policy.observation_space
    return isinstance(space, gym.spaces.Dict) and set(observations) == set(space.spaces)


def _run_share(worker: Any, n: int, by_episodes: bool) -> Any:
    # One evaluation worker's share: n episodes or n timesteps.
    return worker.run_episodes.remote(n, None) if by_episodes else worker.run_episodes.remote(None, n)
