"""RLlib 1.13's accessors of a rollout worker's policies and sub-envs: ``policy_map``,
``get_policy``, ``foreach_policy``, ``foreach_trainable_policy``, ``foreach_env`` and
``foreach_env_with_context``; the policies' spaces, weights and observation filters as
the WorkerSet moves them (a mixin of :class:`~rlstack.evaluation.rollout_worker.RolloutWorker`,
which supplies ``policy``, ``sampling_policy``, ``policies``, ``filter``, ``env``,
``config``, ``worker_index`` and ``num_workers``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import gymnasium as gym

from rlstack.env.env_context import EnvContext
from rlstack.evaluation.worker_policies import refresh_acting
from rlstack.sample_batch import DEFAULT_POLICY_ID

if TYPE_CHECKING:
    from rlstack.evaluation.worker_policies import WorkerPolicyMap
    from rlstack.policies.policy import Policy
    from rlstack.policies.policy_map import PolicySpec
    from rlstack.utils.filters import MeanStdFilter, NoFilter


__all__ = ["DEFAULT_POLICY_ID", "WorkerAccessMixin"]


class WorkerAccessMixin:
    """Policy and sub-env accessors of a rollout worker, under RLlib 1.13's names."""

    policy: Policy
    sampling_policy: Policy
    policies: WorkerPolicyMap | None
    _multi_agent_sampler: Any
    _use_first_policy: Callable[[], None]
    filter: NoFilter | MeanStdFilter
    observation_space: gym.Space
    action_space: gym.Space
    _acting_shares_weights: bool
    env: Any
    config: dict
    worker_index: int
    num_workers: int

    @property
    def policy_map(self) -> dict[str, Policy]:
        """``{policy_id: policy}``: ``{"default_policy": policy}`` for a single-agent
        worker, every policy of ``multiagent.policies`` for a multi-agent one.

        On a remote worker acting in numpy (``rollout_inference="auto"`` with a built-in
        dense model, or ``"numpy"``) a policy of the algorithm's class is that worker's
        :class:`~rlstack.policies.numpy_policy.NumpyPolicy`: it acts and holds the
        learner's weights, but does not learn. The driver's worker holds the learners.
        """
        if self.policies is not None:
            return self.policies.policies
        return {DEFAULT_POLICY_ID: self.policy}

    def get_policy(self, policy_id: str = DEFAULT_POLICY_ID) -> Policy:
        """The policy ``policy_id`` of this worker (see :attr:`policy_map`).

        Raises:
            KeyError: For an unknown policy id, naming the known ones.
        """
        policy_map = self.policy_map
        if policy_id not in policy_map:
            raise KeyError(f"Unknown policy id {policy_id!r}; this worker has {sorted(map(str, policy_map))} "
                           "(configure several with multiagent.policies).")
        return policy_map[policy_id]

    def foreach_policy(self, func: Callable[..., Any], **kwargs: Any) -> list[Any]:
        """``[func(policy, policy_id, **kwargs)]`` for every policy of this worker."""
        return [func(policy, policy_id, **kwargs) for policy_id, policy in self.policy_map.items()]

    def foreach_trainable_policy(self, func: Callable[..., Any], **kwargs: Any) -> list[Any]:
        """Like :meth:`foreach_policy` for the policies being trained
        (``multiagent.policies_to_train``; a function of it is asked with no batch)."""
        return [func(policy, policy_id, **kwargs) for policy_id, policy in self.policy_map.items()
                if self.policies is None or self.policies.is_trained(policy_id)]

    # ----- policies added and removed at run time (Trainer.add_policy / remove_policy) -------

    def add_policy(self, policy_id: str, spec: PolicySpec, policy_mapping_fn: Any = None,
                   policies_to_train: Any = None, policy_state: dict[str, Any] | None = None,
                   ) -> tuple[gym.Space, gym.Space]:
        """Builds policy ``policy_id`` on this multi-agent worker (1.13's
        ``RolloutWorker.add_policy``); missing spaces come from its env.

        Args:
            policy_id: The new id.
            spec: Its class, spaces and complete config.
            policy_mapping_fn: The mapping for new episodes from now on (None: unchanged).
            policies_to_train: The new ``policies_to_train`` (None: unchanged).
            policy_state: A :meth:`Policy.get_state` to load into it.

        Returns:
            The new policy's ``(observation_space, action_space)``.

        Raises:
            ConfigError: On a single-agent worker, or for a taken id.
        """
        if self.policies is None:
            from rlstack.errors import ConfigError

            raise ConfigError(f"Cannot add policy {policy_id!r} to a single-agent trainer: add_policy needs a "
                              "multi-agent one (set multiagent.policies, or use a MultiAgentEnv).")
        env = self.env.envs[0] if self.env is not None else None
        policy = self.policies.add(policy_id, spec, policy_mapping_fn, policies_to_train, env)
        if policy_state is not None:
            policy.set_state(policy_state)
            self.policies.refresh({policy_id: policy.get_weights()})
        return self.policies.spaces()[policy_id]

    def remove_policy(self, policy_id: str, policy_mapping_fn: Any = None, policies_to_train: Any = None) -> None:
        """Drops policy ``policy_id`` from this worker (1.13's ``RolloutWorker.remove_policy``).
        Running episodes with an agent mapped to it end unreported; their envs reset at
        the next sample."""
        if self.policies is None:
            raise KeyError(f"Unknown policy id {policy_id!r}: this worker is single-agent (its one policy is "
                           f"{DEFAULT_POLICY_ID!r}, which cannot be removed).")
        self.policies.remove(policy_id, policy_mapping_fn, policies_to_train)
        self._use_first_policy()  # the worker's single-agent attributes may have named it
        if self._multi_agent_sampler is not None:
            self._multi_agent_sampler.drop_episodes_of(policy_id)

    # ----- spaces, weights and filters, as the WorkerSet moves them ------------------------

    def get_spaces(self) -> Any:
        """The env's observation and action spaces; a multi-agent worker's
        ``{policy_id: (obs_space, action_space)}``."""
        if self.policies is not None:
            return self.policies.spaces()
        return self.observation_space, self.action_space

    def get_weights(self, policies: Any = None) -> dict[str, Any]:
        """The policy's weights; a multi-agent worker's ``{policy_id: weights}`` of
        ``policies`` (None: all)."""
        if self.policies is not None:
            return self.policies.get_weights(policies)
        return self.policy.get_weights()

    def set_weights(self, weights: dict[str, Any], global_timestep: int | None = None) -> None:
        """Loads the learner's weights (a multi-agent worker's ``{policy_id: weights}``, of
        some policies or all) and moves schedules to ``global_timestep``."""
        if self.policies is not None:
            self.policies.set_weights(weights, global_timestep)
            return
        self.policy.set_weights(weights)
        if global_timestep is not None:
            self.policy.on_global_var_update(global_timestep)
        self.refresh_sampling_policy(weights)

    def refresh_sampling_policy(self, weights: dict[str, Any] | None = None) -> None:
        """Copies the policy's weights (or ``weights``, when the caller has them already)
        into the separate acting copy, if there is one and it does not read them in place."""
        if self.policies is not None:
            self.policies.refresh(weights)
        else:
            refresh_acting(self.policy, self.sampling_policy, self._acting_shares_weights, weights)

    def get_filter_state(self) -> dict[str, Any]:
        """The observation filter's statistics (multi-agent: by policy id)."""
        return self.policies.get_filter_state() if self.policies is not None else self.filter.get_state()

    def set_filter_state(self, state: dict[str, Any]) -> None:
        """Replaces the observation filter's statistics (after a sync)."""
        if self.policies is not None:
            self.policies.set_filter_state(state)
        else:
            self.filter.set_state(state)

    def flush_filter(self) -> dict[str, Any]:
        """Returns what the filter saw since the last sync, and clears that buffer."""
        return self.policies.flush_filters() if self.policies is not None else self.filter.flush_buffer()

    def apply_filter_buffer(self, buffer: dict[str, Any]) -> None:
        """Merges another worker's :meth:`flush_filter` into this worker's filter(s)."""
        if self.policies is not None:
            self.policies.apply_filter_buffers(buffer)
        else:
            self.filter.apply_buffer(buffer)

    def uses_filters(self) -> bool:
        """Whether observations are filtered (some policy's ``observation_filter``)."""
        if self.policies is not None:
            return self.policies.uses_filters()
        return self.config["observation_filter"] != "NoFilter"

    def filter_for(self, policy: Policy) -> Any:
        """The observation filter of ``policy`` (one of :attr:`policy_map`)."""
        if self.policies is None:
            return self.filter
        return next(self.policies.filters[pid] for pid, p in self.policies.policies.items() if p is policy)


    def foreach_env(self, func: Callable[[Any], Any]) -> list[Any]:
        """``[func(sub_env)]`` for each of this worker's sub-envs, in vector-index order
        (``[]`` for a worker without envs, such as the driver's when ``num_workers > 0``).

        The sub-envs are the objects the env creator returned (e.g. for the curriculum
        pattern ``worker.foreach_env(lambda env: env.set_task(task))``); a sub-env that
        ``restart_failed_sub_environments`` rebuilds is a new object.
        """
        if self.env is None:
            return []
        return [func(env) for env in self.env.envs]

    def foreach_env_with_context(self, func: Callable[[Any, EnvContext], Any]) -> list[Any]:
        """``[func(sub_env, env_context)]`` for each sub-env, the context carrying
        ``env_config`` and this sub-env's ``worker_index`` / ``vector_index``."""
        if self.env is None:
            return []
        context = EnvContext(self.config.get("env_config"), self.worker_index, 0, self.num_workers)
        return [func(env, context.copy_with(vector_index=i)) for i, env in enumerate(self.env.envs)]
