"""RLlib 1.4–1.12's ``ray.rllib.agents.trainer_template``: ``build_trainer``, a Trainer
subclass made from a name, defaults, a policy class and, usually, an execution plan.

The class is an ordinary rlstack :class:`~rlstack.trainers.trainer.Trainer`: it trains by
pulling its ``execution_plan`` (see ``rlstack/execution``) when one is given, else by the
synchronous ``training_step`` (the same algorithm as 1.x's default plan).
"""

from __future__ import annotations

import copy
import functools
import warnings
from collections.abc import Callable, Iterable
from typing import Any

from rlstack.errors import ConfigError
from rlstack.policies.policy import Policy
from rlstack.trainers.common.trainer import COMMON_CONFIG, Trainer

__all__ = ["build_trainer"]


def build_trainer(
    name: str,
    *,
    default_config: dict[str, Any] | None = None,
    validate_config: Callable[[dict[str, Any]], None] | None = None,
    default_policy: type[Policy] | str | None = None,
    get_policy_class: Callable[[dict[str, Any]], type[Policy] | str | None] | None = None,
    validate_env: Callable[[Any, Any], None] | None = None,
    before_init: Callable[[Trainer], None] | None = None,
    after_init: Callable[[Trainer], None] | None = None,
    before_evaluate_fn: Callable[[Trainer], None] | None = None,
    mixins: list[type] | None = None,
    execution_plan: Callable[..., Iterable[dict[str, Any]]] | None = None,
    allow_unknown_configs: bool = False,
    allow_unknown_subkeys: list[str] | None = None,
    override_all_subkeys_if_type_changes: list[str] | None = None,
) -> type[Trainer]:
    """A Trainer subclass named ``name`` (RLlib 1.12's helper, deprecated there as here:
    subclass Trainer directly for new code).

    Set-up runs in 1.x's order: the config is merged and checked (``validate_config``),
    the policy class chosen, ``before_init(trainer)``, the rollout workers built,
    ``validate_env`` run on each worker's envs, then ``after_init(trainer)``.

    Args:
        name: The trainer's name (its results directories, checkpoints, ``repr``).
        default_config: The full defaults (e.g. ``with_common_config({...})``); None:
            ``COMMON_CONFIG``.
        validate_config: ``fn(config)``, called on the merged config (it may change it).
        default_policy: The policy class (or ``"module:Class"``) where
            ``get_policy_class`` is missing or returns None.
        get_policy_class: ``fn(config) -> policy class or None``.
        validate_env: ``fn(env, env_context)``, called on every sub-env of the rollout
            workers once they are built (raise to reject the env).
        before_init: ``fn(trainer)`` before the workers are built (``trainer.config`` is
            the merged config).
        after_init: ``fn(trainer)`` at the end of set-up.
        before_evaluate_fn: ``fn(trainer)`` before each evaluation.
        mixins: Classes placed before Trainer in the new class's bases, first one first.
        execution_plan: ``fn(workers, config, **kwargs)`` returning the plan's iterator
            (``StandardMetricsReporting(...)`` at its end); None: the synchronous
            ``training_step``.
        allow_unknown_configs: Accept top-level keys ``default_config`` lacks.
        allow_unknown_subkeys: Top-level keys whose dict a user's config updates sub-key
            by sub-key (the defaults' other sub-keys kept), with sub-keys of its own.
        override_all_subkeys_if_type_changes: Of those, keys whose whole dict the user's
            replaces when its ``"type"`` differs from the defaults'.

    Returns:
        The Trainer subclass.
    """
    original_kwargs = {key: value for key, value in locals().items()}
    warnings.warn("build_trainer() is deprecated (as in RLlib 1.12): subclass rlstack.trainers.trainer.Trainer "
                  "and override training_step() (or execution_plan) instead.", DeprecationWarning, stacklevel=2)
    merged_subkeys = list(allow_unknown_subkeys or [])
    typed_subkeys = list(override_all_subkeys_if_type_changes or [])
    defaults = default_config if default_config is not None else COMMON_CONFIG

    class BuiltTrainer(*(mixins or []), Trainer):  # type: ignore[misc]
        _name = name
        _default_config = defaults
        _allow_unknown_configs = allow_unknown_configs

        @classmethod
        def merge_and_validate(cls, config: dict[str, Any] | None) -> dict[str, Any]:
            return super().merge_and_validate(_merge_subkeys(cls._default_config, config, merged_subkeys,
                                                             typed_subkeys))

        @classmethod
        def validate_config(cls, config: dict[str, Any]) -> None:
            super().validate_config(config)
            if validate_config is not None:
                validate_config(config)

        def get_policy_class_path(self, config: dict[str, Any]) -> str | type[Policy]:
            chosen = get_policy_class(config) if get_policy_class is not None else None
            chosen = chosen if chosen is not None else default_policy
            if chosen is not None:
                return chosen
            try:  # multi-agent policies that all name their class need none here
                return super().get_policy_class_path(config)
            except ConfigError:
                raise ConfigError(f"build_trainer({name!r}) has no policy class: pass default_policy=YourPolicy "
                                  "(or a get_policy_class(config) that returns one).") from None

        def setup(self, config: dict[str, Any]) -> None:
            if before_init is not None:
                self.config = self.merge_and_validate(config)
                before_init(self)
            super().setup(config)
            if validate_env is not None:
                self.workers.foreach_env_with_context(validate_env)
            if after_init is not None:
                after_init(self)

        def _before_evaluate(self) -> None:
            super()._before_evaluate()
            if before_evaluate_fn is not None:
                before_evaluate_fn(self)

        @staticmethod
        def with_updates(**overrides: Any) -> type[Trainer]:
            """A new class built from this one's build_trainer arguments with ``overrides``."""
            return build_trainer(**{**original_kwargs, **overrides})

    if execution_plan is not None:
        @functools.wraps(execution_plan)  # its signature: the trainer passes the keywords it takes
        def plan(workers: Any, config: dict[str, Any], **kwargs: Any) -> Iterable[dict[str, Any]]:
            return execution_plan(workers, config, **kwargs)

        plan.__qualname__ = f"{name}.execution_plan"  # the trainer runs a plan its class defines
        BuiltTrainer.execution_plan = staticmethod(plan)  # type: ignore[method-assign]
    BuiltTrainer.__name__ = BuiltTrainer.__qualname__ = name
    return BuiltTrainer


def _merge_subkeys(defaults: dict[str, Any], config: dict[str, Any] | None, merged: list[str],
                   typed: list[str]) -> dict[str, Any] | None:
    # The user's dicts under `merged` keys completed with the defaults' other sub-keys
    # (unless `typed` and the "type" changed), before the usual merge replaces them whole.
    if not config or not merged:
        return config
    config = dict(config)
    for key in merged:
        mine, theirs = config.get(key), defaults.get(key)
        if not (isinstance(mine, dict) and isinstance(theirs, dict)):
            continue
        if key in typed and mine.get("type", theirs.get("type")) != theirs.get("type"):
            continue
        config[key] = {**copy.deepcopy(theirs), **mine}
    return config
