"""Multi-agent training: the ``multiagent`` config read into :class:`PolicySpec` objects,
and its checks; :class:`~rlstack.trainers.common.trainer.Trainer` takes the per-policy steps
from them.

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
from rlstack.policies.policy import Policy
from rlstack.policies.policy_map import PolicySpec
from rlstack.sample_batch import DEFAULT_POLICY_ID
from rlstack.utils.imports import import_object, object_path

__all__ = ["as_policy_id", "as_policy_spec", "check_multiagent_functions", "complete_spec", "configured_policies",
           "policy_specs", "restorable_multiagent", "unsupported_message", "validate_multiagent_config",
           "with_multiagent_paths"]

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
        return {as_policy_id(pid): PolicySpec() for pid in policies}
    if not isinstance(policies, Mapping):
        raise ConfigError(f"multiagent.policies must be a dict {{policy_id: PolicySpec(...)}} or a list of policy "
                          f"ids, got {type(policies).__name__} ({policies!r}).")
    return {as_policy_id(pid): as_policy_spec(pid, value) for pid, value in policies.items()}


def as_policy_id(pid: Any) -> str:
    if not isinstance(pid, str):
        raise ConfigError(f"Policy ids are strings (1.13's PolicyID); got {pid!r} ({type(pid).__name__}) in "
                          "multiagent.policies. Name it e.g. 'pol0'.")
    return pid


def as_policy_spec(pid: str, value: Any) -> PolicySpec:
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
        raise ConfigError(unsupported_message(algorithm))
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
    check_multiagent_functions(multiagent["policy_mapping_fn"], multiagent["policies_to_train"],
                               sorted(policies) or [DEFAULT_POLICY_ID])
    from rlstack.trainers.common.config import validate_common_config

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


def check_multiagent_functions(policy_mapping_fn: Any, policies_to_train: Any, known: list[str]) -> None:
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


def unsupported_message(algorithm: str) -> str:
    from rlstack.trainers.common.registry import ALGORITHMS, get_trainer_class

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
    from rlstack.trainers.common.config import merge_config

    overrides = dict(spec.config or {})
    if position and config.get("seed") is not None and "seed" not in overrides:
        # Each policy starts from its own initial weights (as 1.13's, built one after
        # another from one random stream), reproducibly and alike on every worker.
        overrides["seed"] = int(config["seed"]) + 1_000_003 * position
    defaults, checked_as = config, algorithm
    owner = owning_algorithm(spec.policy_class)
    if owner is not None and owner != algorithm:
        # Another algorithm's policy (1.13's two-trainer workflow: a PPO and a DQN policy
        # side by side): its overrides may use that algorithm's keys, whose defaults it gets.
        from rlstack.trainers.common.registry import get_trainer_class

        defaults, checked_as = {**get_trainer_class(owner)._default_config, **config}, owner
    try:
        merged = merge_config(defaults, overrides, checked_as)
    except ConfigError as exc:
        raise ConfigError(f"In multiagent.policies[{policy_id!r}].config: {exc}") from exc
    return PolicySpec(spec.policy_class, spec.observation_space, spec.action_space, merged)


def owning_algorithm(policy_class: Any) -> str | None:
    """The algorithm whose trainer declares ``policy_class`` (or a base class of it) in
    its ``policy_classes``, preferring the one named after its package (DQN over APEX);
    None for another class."""
    if not isinstance(policy_class, type):
        return None
    from rlstack.trainers.common.registry import declarations, get_trainer_class

    paths = {f"{cls.__module__}:{cls.__qualname__}" for cls in policy_class.__mro__}
    owners = [declaration for name, declaration in declarations().items()
              if paths & set((getattr(get_trainer_class(name), "policy_classes", None) or {}).values())]
    owners.sort(key=lambda d: d.target.partition(":")[0] != f"{d.package}.{d.folder}")
    return owners[0].name if owners else None


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
