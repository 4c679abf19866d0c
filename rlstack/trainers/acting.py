"""Using the trained policy, under RLlib 1.13's names: ``get_policy`` and
``get_weights`` / ``set_weights`` by policy id, ``compute_single_action`` /
``compute_actions`` on raw observations, and ``evaluate()`` on evaluation workers. A
mixin of :class:`Trainer`, which supplies ``config``, ``workers``, ``evaluation_workers``,
``policy_class``, ``learner_policy``, ``global_timestep``, ``policy_specs_for`` and the
algorithm's ``postprocess_fn`` / ``numpy_policy_class``.
"""

from __future__ import annotations

import warnings
from collections.abc import Collection
from typing import Any

import gymnasium as gym
import numpy as np
import ray

from rlstack.evaluation.metrics import episode_results
from rlstack.evaluation.worker_set import WorkerSet
from rlstack.policies.observations import check_observation
from rlstack.policies.policy import Policy
from rlstack.policies.rnn_sequencing import state_out_key
from rlstack.sample_batch import DEFAULT_POLICY_ID
from rlstack.trainers.config import evaluation_config_of

__all__ = ["DEFAULT_POLICY_ID", "ActingMixin"]


class ActingMixin:
    """Acting and evaluation methods of :class:`rlstack.trainers.trainer.Trainer`."""

    # ----- policies and weights (RLlib 1.13's names) ---------------------------------------

    def get_policy(self, policy_id: str = DEFAULT_POLICY_ID) -> Policy:
        """Returns the learner's policy ``policy_id`` (``"default_policy"`` for a single-agent
        trainer; any id of ``multiagent.policies`` for a multi-agent one).

        Raises:
            KeyError: For another policy id, naming the known ones.
        """
        return self.workers.local_worker().get_policy(policy_id)

    def get_weights(self, policies: Collection[str] | None = None) -> dict[str, dict[str, np.ndarray]]:
        """The learner's weights by policy id, as numpy arrays (RLlib 1.13's form).

        Args:
            policies: The policy ids to return (None: all; ``["default_policy"]`` for a
                single-agent trainer).

        Returns:
            ``{policy_id: {name: array}}``.

        Raises:
            KeyError: For an unknown policy id, naming the known ones.
        """
        ids = list(self.workers.local_worker().policy_map) if policies is None else list(policies)
        return {policy_id: self.get_policy(policy_id).get_weights() for policy_id in ids}

    def set_weights(self, weights: dict[str, dict[str, np.ndarray]]) -> None:
        """Loads ``{policy_id: weights}`` (as :meth:`get_weights` returns) into the learner
        and sends them to the rollout workers.

        Raises:
            KeyError: For an unknown policy id, naming the known ones (nothing is loaded).
        """
        policies = {policy_id: self.get_policy(policy_id) for policy_id in weights}
        for policy_id, policy in policies.items():
            policy.set_weights(weights[policy_id])
        self.workers.sync_weights(self.global_timestep())

    # ----- acting -----------------------------------------------------------------------

    def compute_single_action(
        self,
        observation: Any = None,
        state: list[Any] | None = None,
        *,
        prev_action: Any = None,
        prev_reward: float | None = None,
        info: dict | None = None,
        input_dict: dict[str, Any] | None = None,
        policy_id: str = DEFAULT_POLICY_ID,
        full_fetch: bool = False,
        explore: bool | None = None,
        timestep: int | None = None,
        episode: Any = None,
        unsquash_action: bool | None = None,
        clip_action: bool | None = None,
        unsquash_actions: bool | None = None,
        clip_actions: bool | None = None,
        **kwargs: Any,
    ) -> Any:
        """The action the trained policy takes for one raw observation (RLlib 1.13's form).

        The observation goes through the same preprocessing and observation filter as
        during training (the filter is applied, not updated).

        Args:
            observation: One observation as the env returns it.
            state: A recurrent policy's state (``use_lstm``: ``[h, c]``): start an
                episode from ``trainer.get_policy().get_initial_state()`` and feed each
                call's ``state_out`` to the next. A non-empty state asks for the
                3-tuple return, as in 1.13 (for a model without state it is not used).
            prev_action: The previous action, as this method returned it, for a model
                that reads it (``lstm_use_prev_action``, a custom recurrent model); with
                ``attention_use_n_prev_actions: n``, the last ``n`` actions, oldest
                first. None (or zeros) at an episode's start. It is mapped back to the
                policy's form (``unsquash_action`` undone) before the model reads it, as
                training recorded it. Unused by a model that does not read it.
            prev_reward: The previous reward (``lstm_use_prev_reward``), or the last
                ``attention_use_n_prev_rewards`` rewards, oldest first; as ``prev_action``.
            info: Accepted for 1.13 compatibility; unused.
            input_dict: ``{"obs": observation}``, used instead of ``observation``.
            policy_id: The policy that acts (multi-agent: any of ``multiagent.policies``).
            full_fetch: Return ``(action, state_out, extra_fetches)`` even without a state.
            explore: Sample (True) or take the most likely action (False); None uses
                ``config["explore"]``.
            timestep: Accepted for 1.13 compatibility; schedules follow training.
            episode: Accepted for 1.13 compatibility; unused.
            unsquash_action: Map a Box action from [-1, 1] onto the action space's
                bounds; None: ``config["normalize_actions"]``.
            clip_action: When not unsquashing, clip a Box action to the bounds; None:
                ``config["clip_actions"]``.
            unsquash_actions: 1.13's deprecated spelling of ``unsquash_action``.
            clip_actions: 1.13's deprecated spelling of ``clip_action``.
            **kwargs: Forward-compatibility placeholder, as in 1.13.

        Returns:
            The action; or ``(action, state_out, extra_fetches)`` when ``state`` is
            non-empty or ``full_fetch`` is set (``state_out``: the new state, ``[]``
            for a model without state;
            ``extra_fetches`` holds ``action_logp``, ``action_dist_inputs``, ``vf_preds``
            and the like for this observation).

        Raises:
            ObservationError: (a ValueError) If the observation does not fit the
                observation space (wrong shape, a non-numeric dtype, an (obs, info) pair).
            ValueError: If ``state`` has the wrong number or shapes of tensors, or
                ``prev_action`` / ``prev_reward`` the wrong shape (or an action outside
                the action space).
            KeyError: For an unknown policy id.
        """
        unsquash_action = _renamed("unsquash_actions", unsquash_actions, "unsquash_action", unsquash_action)
        clip_action = _renamed("clip_actions", clip_actions, "clip_action", clip_action)
        if input_dict is not None:
            observation = input_dict["obs"]
            prev_action = input_dict.get("prev_actions", prev_action)
            prev_reward = input_dict.get("prev_rewards", prev_reward)
        if observation is None:
            raise ValueError("compute_single_action() needs an observation: pass the env's observation as "
                             "the first argument, or input_dict={'obs': observation}.")
        policy = self.get_policy(policy_id)
        obs = self._prepare_observations([observation], policy)
        action, state_out, extras = policy.compute_single_action(
            obs[0], state, prev_action=policy.squash_actions(prev_action, normalize=unsquash_action),
            prev_reward=prev_reward, explore=explore, timestep=timestep)
        action = policy.unsquash_actions(np.asarray(action)[None], normalize=unsquash_action, clip=clip_action)[0]
        # 1.13 returns the 3-tuple when a (non-empty) RNN state was passed in.
        if state or full_fetch:
            return action, state_out, extras
        return action

    def compute_action(self, *args: Any, **kwargs: Any) -> Any:
        """Classic RLlib's deprecated name of :meth:`compute_single_action` (same arguments)."""
        return self.compute_single_action(*args, **kwargs)

    def compute_actions(
        self,
        observations: Any,
        state: Any = None,
        *,
        prev_action: Any = None,
        prev_reward: Any = None,
        info: Any = None,
        policy_id: str = DEFAULT_POLICY_ID,
        full_fetch: bool = False,
        explore: bool | None = None,
        timestep: int | None = None,
        episodes: Any = None,
        unsquash_actions: bool | None = None,
        clip_actions: bool | None = None,
        **kwargs: Any,
    ) -> Any:
        """Actions for several raw observations, in one forward pass (RLlib 1.13's form).

        Args:
            observations: A dict ``{agent_id: obs}`` as in 1.13 (a dict of actions comes
                back), or, as an rlstack convenience, a sequence or batch array of
                observations (an array of actions comes back).
            state: A recurrent policy's state for the batch: one ``[B, ...]`` array per
                state tensor (None: the initial state). For a model without state it
                only asks for the 3-tuple return.
            prev_action: For a model that reads them, each observation's previous
                action(s) as :meth:`compute_single_action`'s ``prev_action``, batched
                ``[B, ...]`` (None: zeros, every episode at its start); else unused.
            prev_reward: Each observation's previous reward(s) ``[B, ...]``, likewise.
            info: Accepted for 1.13 compatibility; unused.
            policy_id: The policy that acts (multi-agent: any of ``multiagent.policies``).
            full_fetch: Return ``(actions, state_outs, extra_fetches)``.
            explore: As in :meth:`compute_single_action`.
            timestep: Accepted for 1.13 compatibility.
            episodes: Accepted for 1.13 compatibility; unused.
            unsquash_actions: As ``unsquash_action`` of :meth:`compute_single_action`.
            clip_actions: As ``clip_action`` of :meth:`compute_single_action`.
            **kwargs: Forward-compatibility placeholder, as in 1.13.

        Returns:
            The actions; with ``state`` or ``full_fetch``, ``(actions, state_outs,
            extra_fetches)``: for dict observations ``state_outs`` is ``{agent_id: []}``,
            else ``[]``; ``extra_fetches`` are batched columns, rows in input order.
        """
        policy = self.get_policy(policy_id)
        keys = None
        if isinstance(observations, dict):
            if _is_single_dict_obs(observations, policy):
                observations = [observations]  # one observation of a Dict space: a batch of one
            else:
                keys = list(observations)
                observations = [observations[key] for key in keys]
        obs = self._prepare_observations(list(observations), policy)
        if policy.is_recurrent:
            states = policy.initial_state_batch(len(obs)) if not state else policy.check_state(state)
            if any(value.shape[:1] != (len(obs),) for value in states):
                raise ValueError(f"compute_actions() got {len(obs)} observations but states of shapes "
                                 f"{[value.shape for value in states]}; give one state row per observation.")
            prev = policy.prev_input_batches(len(obs), policy.squash_actions(prev_action, normalize=unsquash_actions),
                                             prev_reward)
            actions, extras = policy.compute_actions(obs, explore=explore, state_batches=states,
                                                     prev_action_batch=prev.get("prev_actions"),
                                                     prev_reward_batch=prev.get("prev_rewards"))
            recurrent_out = [extras.pop(state_out_key(i)) for i in range(len(states))]
        else:
            actions, extras = policy.compute_actions(obs, explore=explore)
            recurrent_out = []
        actions = policy.unsquash_actions(actions, normalize=unsquash_actions, clip=clip_actions)
        if keys is not None:
            actions = dict(zip(keys, actions))
        if state is None and not full_fetch:
            return actions
        state_outs: Any = {key: [value[i] for value in recurrent_out] for i, key in enumerate(keys)} \
            if keys is not None else recurrent_out
        return actions, state_outs, extras

    # ----- export ------------------------------------------------------------------------

    def export_policy_model(self, export_dir: str, policy_id: str = DEFAULT_POLICY_ID,
                            onnx: int | None = None) -> str:
        """Writes the policy's model for serving without rlstack (classic RLlib's name).

        torch: a TorchScript ``model.pt`` (``torch.jit.load``); TF: a SavedModel
        (``tf.saved_model.load``, signature ``serving_default``); with ``onnx=OPSET`` a
        ``model.onnx`` in either framework (``pip install 'rlstack[export]'``). Every file
        maps ``obs`` (a batch of flat observations as the policy's preprocessor writes them;
        for a Box space, the observations themselves) to ``output``, the action
        distribution's inputs (logits for Discrete actions), the names 1.x's export used.

        Returns:
            The path written.
        """
        return self.get_policy(policy_id).export_model(export_dir, onnx)

    def export_policy_checkpoint(self, export_dir: str, filename_prefix: str = "model",
                                 policy_id: str = DEFAULT_POLICY_ID) -> str:
        """Writes the policy's state (weights, optimizer state) to
        ``<export_dir>/<filename_prefix>.npz`` and returns its path (classic RLlib's name;
        ``policy.set_state(dict(np.load(path)))`` restores it)."""
        return self.get_policy(policy_id).export_checkpoint(export_dir, filename_prefix)

    def _prepare_observations(self, observations: list[Any], policy: Policy) -> np.ndarray:
        space = policy.observation_space
        for i, obs in enumerate(observations):
            check_observation(obs, space, "Observation" if len(observations) == 1 else
                              f"Observation {i} of {len(observations)}")
        observation_filter = self.workers.local_worker().filter_for(policy)  # each policy's own
        return observation_filter(policy.preprocessor.transform_batch(observations), update=False)

    # ----- evaluation ---------------------------------------------------------------------

    def evaluate(self) -> dict[str, Any]:
        """Plays ``evaluation_duration`` episodes (or timesteps) with ``evaluation_config``.

        Returns:
            ``{"evaluation": metrics}`` as in RLlib 1.13, the metrics being
            ``episode_reward_mean/min/max``, ``episode_len_mean``, ``custom_metrics``,
            ``hist_stats``, ``episodes_this_iter`` and ``timesteps_this_iter`` of the
            evaluation episodes, and ``num_env_restarts``, the sub-envs rebuilt during
            this evaluation; ``train()`` reports the same inner dict as
            ``result["evaluation"]``.
        """
        cfg = self.config
        if self.evaluation_workers is None:
            eval_config = evaluation_config_of(cfg)
            num = cfg["evaluation_num_workers"]
            self.evaluation_workers = WorkerSet(cfg["env"], self.policy_class, eval_config, num,
                                                local_env=num == 0, name="evaluation",
                                                postprocess_fn=type(self).postprocess_fn,
                                                numpy_policy_class=type(self).numpy_policy_class,
                                                policy_specs=self.policy_specs_for(eval_config))
        workers = self.evaluation_workers
        # The learner's weights and filter statistics (multi-agent: of every policy, by id).
        weights = self.workers.local_worker().get_weights()
        filter_state = self.workers.local_worker().get_filter_state()
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
        return {"evaluation": {
            **episode_results(episodes),
            "episodes_this_iter": len(episodes),
            "timesteps_this_iter": sum(e.length for e in episodes),
            # Sub-envs rebuilt during this evaluation (restart_failed_sub_environments);
            # their broken episodes are not among the episodes above.
            "num_env_restarts": workers.collect_env_restarts(),
        }}


def _is_single_dict_obs(observations: dict, policy: Policy) -> bool:
    space = policy.observation_space
    return isinstance(space, gym.spaces.Dict) and set(observations) == set(space.spaces)


def _renamed(old: str, old_value: Any, new: str, new_value: Any) -> Any:
    # 1.13 renamed these arguments and warned about the old spelling; both still work.
    if old_value is None:
        return new_value
    warnings.warn(f"compute_single_action({old}=...) is deprecated (as in RLlib 1.13); use {new}=... instead.",
                  DeprecationWarning, stacklevel=3)
    return old_value if new_value is None else new_value


def _run_share(worker: Any, n: int, by_episodes: bool) -> Any:
    # One evaluation worker's share: n episodes or n timesteps.
    return worker.run_episodes.remote(n, None) if by_episodes else worker.run_episodes.remote(None, n)
