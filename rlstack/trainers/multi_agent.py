"""Multi-agent training: the ``multiagent`` config read into :class:`PolicySpec` objects,
its checks, and the trainer's per-policy steps (:class:`MultiAgentTrainerMixin`, a mixin
of :class:`~rlstack.trainers.trainer.Trainer`).

A synchronous trainer's ``training_step`` stays the same in both modes::

    batch = self.sample_train_batch(cfg["train_batch_size"])  # SampleBatch or MultiAgentBatch
    self.count_sampled(batch)
    info = self.learn_per_policy(batch, learn)                # {policy_id: {"learner_stats": ...}}
    self.count_trained(batch)
    self.sync_learned_weights(info)

With a MultiAgentBatch each policy of ``policies_to_train`` learns on its own rows, and
only the weights of those that learned go to the rollout workers.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping
from typing import Any

import gymnasium as gym

from rlstack.errors import CheckpointError, ConfigError
from rlstack.evaluation.worker_policies import class_path
from rlstack.policies.policy import Policy
from rlstack.policies.policy_map import PolicySpec
from rlstack.sample_batch import DEFAULT_POLICY_ID, MultiAgentBatch, SampleBatch
from rlstack.utils.imports import import_object, object_path

__all__ = ["MultiAgentTrainerMixin", "configured_policies", "policy_specs", "restorable_multiagent",
           "validate_multiagent_config", "with_multiagent_paths"]

COUNT_STEPS_BY = ("env_steps", "agent_steps")
_FIELDS = PolicySpec._fields


def configured_policies(config: dict[str, Any]) -> dict[str, PolicySpec]:
    """``multiagent.policies`` as ``{policy_id: PolicySpec}`` (overrides not merged yet);
    empty when none are configured.

    Raises:
        ConfigError: For a value that is not a dict of specs or a collection of ids.
    """
    policies = config["multiagent"]["policies"]
    if not policies:
        return {}
    if isinstance(policies, (list, tuple, set, frozenset)):
        return {_policy_id(pid): PolicySpec() for pid in policies}
    if not isinstance(policies, Mapping):
        raise ConfigError(f"multiagent.policies must be a dict {{policy_id: PolicySpec(...)}} or a list of policy "
                          f"ids, got {type(policies).__name__} ({policies!r}).")
    return {_policy_id(pid): _as_spec(pid, value) for pid, value in policies.items()}


def _policy_id(pid: Any) -> str:
    if not isinstance(pid, str):
        raise ConfigError(f"Policy ids are strings (1.13's PolicyID); got {pid!r} ({type(pid).__name__}) in "
                          "multiagent.policies. Name it e.g. 'pol0'.")
    return pid


def _as_spec(pid: str, value: Any) -> PolicySpec:
    # PolicySpec, 1.13's 4-tuple (a 4-item list in YAML), a mapping of its field names, or None.
    if value is None:
        return PolicySpec()
    if isinstance(value, PolicySpec):
        spec = value
    elif isinstance(value, (tuple, list)) and len(value) == 4:
        spec = PolicySpec(*value)
    elif isinstance(value, Mapping) and set(value) <= set(_FIELDS):
        spec = PolicySpec(**value)
    else:
        raise ConfigError(
            f"multiagent.policies[{pid!r}] = {value!r} is not a policy spec; give PolicySpec(policy_class, "
            "observation_space, action_space, config), 1.13's 4-tuple of those, a mapping of those names (YAML: "
            "{config: {lr: 0.001}}), or None (all taken from the trainer and the env).")
    cls = spec.policy_class
    if isinstance(cls, str):
        cls = import_object(cls, f"multiagent.policies[{pid!r}].policy_class")
    if cls is not None and not (isinstance(cls, type) and issubclass(cls, Policy)):
        raise ConfigError(f"multiagent.policies[{pid!r}].policy_class = {spec.policy_class!r} is not a Policy "
                          "subclass; give a subclass of rlstack.policies.policy.Policy (or None: the trainer's).")
    for field in ("observation_space", "action_space"):
        space = getattr(spec, field)
        if space is not None and not isinstance(space, gym.Space):
            raise ConfigError(f"multiagent.policies[{pid!r}].{field} = {space!r} is not a gymnasium space; give one "
                              "(e.g. gymnasium.spaces.Box(...)) or None to take it from the env.")
    if spec.config is not None and not isinstance(spec.config, Mapping):
        raise ConfigError(f"multiagent.policies[{pid!r}].config must be a dict of the trainer's config keys this "
                          f"policy overrides, got {spec.config!r}.")
    return spec


def validate_multiagent_config(config: dict[str, Any], algorithm: str, supported: bool,
                               validate_policy_config: Callable[[dict[str, Any]], None] | None = None) -> None:
    """Checks ``config["multiagent"]``, each policy's config included.

    Args:
        config: The merged config.
        algorithm: The algorithm's name, for messages.
        supported: Whether the trainer trains several policies.
        validate_policy_config: The algorithm's own check, run on each policy's config.

    Raises:
        ConfigError: Naming the key, the policy or agent, what is allowed and the fix.
    """
    multiagent = config["multiagent"]
    policies = configured_policies(config)
    if policies and not supported:
        raise ConfigError(_unsupported(algorithm))
    if multiagent["count_steps_by"] not in COUNT_STEPS_BY:
        raise ConfigError(f"multiagent.count_steps_by={multiagent['count_steps_by']!r} is not allowed; use one of "
                          f"{', '.join(COUNT_STEPS_BY)}.")
    if multiagent["replay_mode"] != "independent":
        raise ConfigError(f"multiagent.replay_mode={multiagent['replay_mode']!r} is not supported; rlstack replays "
                          "each policy's rows on their own ('independent', the default).")
    capacity = multiagent["policy_map_capacity"]
    if not (isinstance(capacity, numbers.Integral) and not isinstance(capacity, bool) and capacity >= 1):
        raise ConfigError(f"multiagent.policy_map_capacity must be an integer >= 1, got {capacity!r}.")
    _check_function(multiagent["observation_fn"], "observation_fn")
    _check_multiagent_functions(multiagent["policy_mapping_fn"], multiagent["policies_to_train"],
                                sorted(policies) or [DEFAULT_POLICY_ID])
    from rlstack.trainers.config import validate_common_config

    for pid, spec in (policy_specs(config, algorithm) or {}).items():
        try:
            validate_common_config(dict(spec.config))
            if validate_policy_config is not None:
                validate_policy_config(dict(spec.config))
        except ConfigError as exc:
            raise ConfigError(f"In multiagent.policies[{pid!r}].config: {exc}") from exc


def _check_function(value: Any, key: str) -> None:
    if isinstance(value, str):
        value = import_object(value, f"multiagent.{key}")
    if value is not None and not callable(value):
        raise ConfigError(f"multiagent.{key} must be a function or its import path 'module:function', got "
                          f"{value!r}.")


def _check_multiagent_functions(policy_mapping_fn: Any, policies_to_train: Any, known: list[str]) -> None:
    # policy_mapping_fn: a function or its path; policies_to_train: ids among ``known`` or fn(id, batch).
    _check_function(policy_mapping_fn, "policy_mapping_fn")
    if isinstance(policies_to_train, (list, tuple, set, frozenset)):
        unknown = [pid for pid in policies_to_train if pid not in known]
        if unknown:
            raise ConfigError(f"multiagent.policies_to_train names {unknown}, which are not among the policies "
                              f"{sorted(known)}; remove them or add them to multiagent.policies.")
    elif policies_to_train is not None and not callable(policies_to_train):
        raise ConfigError(f"multiagent.policies_to_train must be a list of policy ids or a function "
                          f"fn(policy_id, batch) -> bool, got {policies_to_train!r}.")


def _unsupported(algorithm: str) -> str:
    from rlstack.trainers.registry import ALGORITHMS, get_trainer_class

    able = sorted(name for name in ALGORITHMS if getattr(get_trainer_class(name), "supports_multi_agent", False))
    return (f"multi-agent training is supported by {', '.join(able)} so far, not by {algorithm}: its trainer learns "
            "one policy. Use one of those, or a single-agent env without multiagent.policies.")


def policy_specs(config: dict[str, Any], algorithm: str) -> dict[str, PolicySpec] | None:
    """The configured policies with complete configs (each policy's overrides merged over
    ``config``), or None when ``multiagent.policies`` is empty.

    Raises:
        ConfigError: For an override key the trainer does not have (with the closest ones).
    """
    policies = configured_policies(config)
    if not policies:
        return None
    return {pid: complete_spec(config, pid, spec, k, algorithm) for k, (pid, spec) in enumerate(policies.items())}


def complete_spec(config: dict[str, Any], policy_id: str, spec: PolicySpec, position: int,
                  algorithm: str) -> PolicySpec:
    """``spec`` with its config overrides merged over ``config`` (the policy at
    ``position`` among the trainer's policies).

    Raises:
        ConfigError: For an override key the trainer does not have (with the closest ones).
    """
    from rlstack.trainers.config import merge_config

    overrides = dict(spec.config or {})
    if position and config.get("seed") is not None and "seed" not in overrides:
        # Each policy starts from its own initial weights (as 1.13's, built one after
        # another from one random stream), reproducibly and alike on every worker.
        overrides["seed"] = int(config["seed"]) + 1_000_003 * position
    try:
        merged = merge_config(config, overrides, algorithm)
    except ConfigError as exc:
        raise ConfigError(f"In multiagent.policies[{policy_id!r}].config: {exc}") from exc
    return PolicySpec(spec.policy_class, spec.observation_space, spec.action_space, merged)


class MultiAgentTrainerMixin:
    """The per-policy parts of a trainer's step, results and checkpoints (a mixin of
    :class:`~rlstack.trainers.trainer.Trainer`, which supplies ``config``, ``workers``,
    ``_counters``, ``_name`` and ``learner_policy``)."""

    # The trainer trains several policies (multiagent.policies, a MultiAgentEnv).
    supports_multi_agent: bool = False

    config: dict[str, Any]
    workers: Any
    _counters: dict[str, int]
    _name: str
    learner_policy: Policy

    def policy_specs_for(self, config: dict[str, Any]) -> dict[str, PolicySpec] | None:
        """The multi-agent policies of ``config`` (see :func:`policy_specs`)."""
        return policy_specs(config, self._name)

    @property
    def is_multi_agent(self) -> bool:
        """Whether the rollout workers run several policies (policies configured, or a MultiAgentEnv)."""
        return self.workers.local_worker().multi_agent

    def check_multi_agent_support(self) -> None:
        """Raises after the workers found a MultiAgentEnv the trainer cannot train.

        Raises:
            ConfigError: Naming the trainers that can.
        """
        if self.is_multi_agent and not self.supports_multi_agent:
            self.workers.stop()
            raise ConfigError(_unsupported(self._name))

    # ----- a synchronous step ---------------------------------------------------------------

    def sample_train_batch(self, size: int) -> SampleBatch | MultiAgentBatch:
        """``size`` env steps from the workers, or agent steps with ``count_steps_by: agent_steps``."""
        from rlstack.evaluation.worker_set import synchronous_parallel_sample

        if self.config["multiagent"]["count_steps_by"] == "agent_steps":
            return synchronous_parallel_sample(self.workers, max_agent_steps=size)
        return synchronous_parallel_sample(self.workers, max_env_steps=size)

    def count_sampled(self, batch: SampleBatch | MultiAgentBatch) -> None:
        """Adds a sampled batch's env and agent steps to the counters."""
        self._counters["num_env_steps_sampled"] += batch.env_steps()
        self._counters["num_agent_steps_sampled"] += batch.agent_steps()

    def count_trained(self, batch: SampleBatch | MultiAgentBatch) -> None:
        """Adds a batch learned on to the trained counters."""
        self._counters["num_env_steps_trained"] += batch.env_steps()
        self._counters["num_agent_steps_trained"] += batch.agent_steps()

    def policies_to_train(self, batch: Any = None) -> list[str]:
        """The ids of the policies that learn (``multiagent.policies_to_train``)."""
        local = self.workers.local_worker()
        if local.policies is None:
            return [DEFAULT_POLICY_ID]
        return [pid for pid in local.policies.policies if local.policies.is_trained(pid, batch)]

    def learn_per_policy(self, batch: SampleBatch | MultiAgentBatch,
                         learn: Callable[[Policy, SampleBatch], dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """``learn(policy, its rows)`` for each policy that learns and has rows.

        Returns:
            ``{policy_id: {"learner_stats": stats}}`` (the results' ``info/learner``).
        """
        if isinstance(batch, SampleBatch):
            return {DEFAULT_POLICY_ID: {"learner_stats": learn(self.learner_policy, batch)}}
        local = self.workers.local_worker()
        info = {}
        for pid in self.policies_to_train(batch):
            rows = batch.policy_batches.get(pid)
            if rows is not None and rows.count:
                info[pid] = {"learner_stats": learn(local.get_policy(pid), rows)}
        return info

    def last_learner_info(self) -> dict[str, Any]:
        """What an asynchronous trainer's step reports: the learner statistics it last
        received by policy id (``_last_learner_stats``), or, before any, an empty entry
        for a single-agent trainer's one policy."""
        stats = getattr(self, "_last_learner_stats", {})
        if stats or self.is_multi_agent:
            return stats
        return {DEFAULT_POLICY_ID: {"learner_stats": {}}}

    def global_timestep(self) -> int:
        """The step count schedules follow: env steps, or agent steps (``count_steps_by``)."""
        by_agent = self.is_multi_agent and self.config["multiagent"]["count_steps_by"] == "agent_steps"
        return self._counters["num_agent_steps_sampled" if by_agent else "num_env_steps_sampled"]

    def sync_learned_weights(self, info: dict[str, Any]) -> None:
        """Moves every policy's schedules on and sends the weights of those that learned
        (``info``'s policies; a single-agent trainer's one) and the filters to the workers."""
        steps = self.global_timestep()
        for policy in self.workers.local_worker().policy_map.values():
            policy.on_global_var_update(steps)
        self.workers.sync_weights(steps, policies=list(info) if self.is_multi_agent else None)
        self.workers.sync_filters(broadcast=self.config["synchronize_filters"])

    # ----- policies added and removed at run time (self-play leagues) -------------------------

    def add_policy(self, policy_id: str, policy_cls: type[Policy] | str | None = None, *,
                   observation_space: gym.Space | None = None, action_space: gym.Space | None = None,
                   config: dict[str, Any] | None = None, policy_state: dict[str, Any] | None = None,
                   policy_mapping_fn: Callable[..., str] | str | None = None,
                   policies_to_train: Any = None, evaluation_workers: bool = True) -> Policy:
        """Adds a policy to every rollout worker (and evaluation worker) while training
        (1.13's ``Trainer.add_policy``): e.g. a frozen snapshot of the learner for
        self-play, added from ``on_train_result``.

        Args:
            policy_id: The new policy's id.
            policy_cls: Its class (None or the trainer's own policy class: the algorithm's,
                which acts in numpy on remote workers; a hand-written ``Policy`` acts as it is).
            observation_space: None: the space of an agent the (new) mapping maps to it.
            action_space: As ``observation_space``.
            config: Trainer config keys this policy overrides.
            policy_state: A ``policy.get_state()`` to start from (e.g. the learner's).
            policy_mapping_fn: The mapping new episodes use from now on (running episodes
                keep theirs); None: unchanged.
            policies_to_train: The new ``policies_to_train`` (a list or ``fn(policy_id,
                batch)``); None: unchanged (a list leaves the new policy untrained).
            evaluation_workers: Add it to the evaluation workers too.

        Returns:
            The new policy of the driver's worker (the learner, for the algorithm's class).

        Raises:
            ConfigError: For a single-agent trainer, a taken id, a bad class, space or
                config key, or spaces that cannot be inferred.
        """
        if not self.is_multi_agent:
            raise ConfigError(f"add_policy({policy_id!r}): this {self._name} trainer is single-agent; configure "
                              "multiagent.policies (or use a MultiAgentEnv) to train several policies.")
        # The policies as configured (a MultiAgentEnv without them has "default_policy").
        policies = configured_policies(self.config) or {pid: PolicySpec() for pid in self.workers.local_worker().policy_map}
        pid = _policy_id(policy_id)
        if pid in self.workers.local_worker().policy_map:
            raise ConfigError(f"add_policy({pid!r}): a policy of that id exists already (the policies are "
                              f"{sorted(self.workers.local_worker().policy_map)}); pick a new id or remove_policy() "
                              "it first.")
        given = _as_spec(pid, PolicySpec(policy_cls, observation_space, action_space, config))
        if given.policy_class is not None and class_path(given.policy_class) == class_path(self.policy_class):
            given = given._replace(policy_class=None)  # the algorithm's own class, acting in numpy where it can
        _check_multiagent_functions(policy_mapping_fn, policies_to_train, [*policies, pid])
        spec = complete_spec(self.config, pid, given, len(policies), self._name)
        self._validate_policy_config(pid, spec.config)
        spec = self.workers.add_policy(pid, spec, policy_mapping_fn, policies_to_train)
        evaluation = getattr(self, "evaluation_workers", None)
        if evaluation_workers and evaluation is not None:
            # Evaluation workers run the policy with evaluation_config's overrides (explore, ...).
            from rlstack.trainers.config import evaluation_config_of

            on_evaluation = complete_spec(evaluation_config_of(self.config), pid, given, len(policies), self._name)
            evaluation.add_policy(pid, on_evaluation._replace(observation_space=spec.observation_space,
                                                              action_space=spec.action_space),
                                  policy_mapping_fn, policies_to_train)
        # What a checkpoint's config and a recreated worker need: the spec as given, the
        # current mapping and training list.
        policies[pid] = given
        self._update_multiagent(policies, policy_mapping_fn, policies_to_train)
        policy = self.workers.local_worker().get_policy(pid)
        if policy_state is not None:
            policy.set_state(policy_state)
            self.workers.sync_weights(self.global_timestep(), policies=[pid])
        return policy

    def remove_policy(self, policy_id: str = DEFAULT_POLICY_ID, *,
                      policy_mapping_fn: Callable[..., str] | str | None = None, policies_to_train: Any = None,
                      evaluation_workers: bool = True) -> None:
        """Removes a policy from every rollout worker (and evaluation worker) (1.13's
        ``Trainer.remove_policy``). Running episodes in which an agent acts for it end
        unreported, and their envs start over.

        Args:
            policy_id: The policy to remove.
            policy_mapping_fn: The mapping from now on (it must no longer name the policy);
                None: unchanged.
            policies_to_train: The new ``policies_to_train``; None: unchanged (with the
                removed id dropped from a list).
            evaluation_workers: Remove it from the evaluation workers too.

        Raises:
            KeyError: For an unknown policy id, naming the known ones.
            ConfigError: For a single-agent trainer or the last policy.
        """
        if not self.is_multi_agent:
            raise ConfigError(f"remove_policy({policy_id!r}): this {self._name} trainer is single-agent; its one "
                              "policy cannot be removed.")
        self.workers.local_worker().get_policy(policy_id)  # KeyError naming the known ids
        to_train = self.config["multiagent"]["policies_to_train"]
        if policies_to_train is None and isinstance(to_train, (list, tuple, set, frozenset)):
            policies_to_train = [p for p in to_train if p != policy_id]
        remaining = [p for p in self.workers.local_worker().policy_map if p != policy_id]
        _check_multiagent_functions(policy_mapping_fn, policies_to_train, remaining)
        evaluation = getattr(self, "evaluation_workers", None)
        for worker_set in [self.workers] + ([evaluation] if evaluation_workers and evaluation is not None else []):
            worker_set.remove_policy(policy_id, policy_mapping_fn, policies_to_train)
        policies = {pid: spec for pid, spec in (configured_policies(self.config) or {}).items() if pid != policy_id}
        self._update_multiagent(policies, policy_mapping_fn, policies_to_train)

    def _update_multiagent(self, policies: dict[str, PolicySpec], policy_mapping_fn: Any, policies_to_train: Any) -> None:
        # The trainer's multiagent config after add/remove_policy (None: that key unchanged);
        # the WorkerSet shares this config dict, so recreated workers read it too.
        multiagent = self.config["multiagent"]
        self.config["multiagent"] = {
            **multiagent, "policies": policies,
            "policy_mapping_fn": multiagent["policy_mapping_fn"] if policy_mapping_fn is None else policy_mapping_fn,
            "policies_to_train": multiagent["policies_to_train"] if policies_to_train is None else policies_to_train}

    def _validate_policy_config(self, policy_id: str, config: dict[str, Any]) -> None:
        from rlstack.trainers.config import validate_common_config

        try:
            validate_common_config(dict(config))
            self.validate_config(dict(config))
        except ConfigError as exc:
            raise ConfigError(f"In the config of policy {policy_id!r}: {exc}") from exc

    def agent_step_results(self) -> dict[str, int]:
        """The agent-step counters of the result dict (the env-step ones when single-agent)."""
        multi = self.is_multi_agent
        sampled = self._counters["num_agent_steps_sampled" if multi else "num_env_steps_sampled"]
        trained = self._counters["num_agent_steps_trained" if multi else "num_env_steps_trained"]
        # 1.13's result key, and the name this project's issue gives it.
        return {"num_agent_steps_sampled": sampled, "num_agent_steps_trained": trained,
                "agent_timesteps_total": sampled, "agent_steps_total": sampled}


def with_multiagent_paths(config: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``config`` whose ``multiagent`` functions and policy classes are their
    import paths where they have one (module-level objects), so that a checkpoint's stored
    config builds the trainer again (:func:`restorable_multiagent`)."""
    multiagent = dict(config["multiagent"])
    for key in ("policy_mapping_fn", "observation_fn", "policies_to_train"):
        if callable(multiagent[key]):
            multiagent[key] = object_path(multiagent[key]) or multiagent[key]
    policies = multiagent["policies"]
    if isinstance(policies, Mapping):
        specs = {pid: PolicySpec(*spec) if isinstance(spec, (tuple, list)) and len(spec) == 4 else spec
                 for pid, spec in policies.items()}
        multiagent["policies"] = {
            pid: spec._replace(policy_class=object_path(spec.policy_class) or spec.policy_class)
            if isinstance(spec, PolicySpec) and isinstance(spec.policy_class, type) else spec
            for pid, spec in specs.items()}
    return {**config, "multiagent": multiagent}


def restorable_multiagent(config: dict[str, Any]) -> None:
    """Checks a checkpoint's stored ``multiagent`` config for objects kept only as their
    repr (a lambda, a space), which cannot build the trainer again.

    Raises:
        CheckpointError: Naming them and how to pass them again.
    """
    lost = [f"{where}: {value['__repr__']}" for where, value in _leaves(config.get("multiagent") or {}, "multiagent")
            if isinstance(value, dict) and set(value) == {"__repr__"}]
    if lost:
        raise CheckpointError(
            f"The checkpoint's multi-agent config holds objects stored only as their repr ({'; '.join(lost)}); "
            "pass that config again: Trainer.from_checkpoint(path, config_overrides={'multiagent': {...}}) (module-"
            "level functions and classes, and policy ids whose spaces come from the env, are stored restorably).")


def _leaves(value: Any, where: str) -> list[tuple[str, Any]]:
    if isinstance(value, dict) and set(value) != {"__repr__"}:
        return [leaf for key, sub in value.items() for leaf in _leaves(sub, f"{where}.{key}")]
    if isinstance(value, list):
        return [leaf for i, sub in enumerate(value) for leaf in _leaves(sub, f"{where}[{i}]")]
    return [(where, value)]
