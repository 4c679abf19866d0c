"""RLlib 1.13's config objects: ``TrainerConfig`` here and, per algorithm, its subclass
(``PPOConfig``, ``DQNConfig``, ...) in the algorithm's folder (``ppo/ppo_config.py``, ...).

A config object builds the classic config dict and nothing more. Each setter takes 1.13's
keyword arguments (``rollouts(num_rollout_workers=2)``, ``training(lambda_=0.95)``) and
writes the classic key each one stands for (``num_workers``, ``lambda``); ``to_dict()``
returns the dict, key for key the algorithm's ``DEFAULT_CONFIG``. Keys, defaults and checks
stay where they were: an algorithm's ``training()`` takes the keys of its ``DEFAULT_CONFIG``
that ``COMMON_CONFIG`` lacks, and each setter runs the trainer's own merge and validation
(``Trainer.merge_and_validate``), so an object and a dict cannot disagree.
"""

from __future__ import annotations

import copy
import inspect
import re
from collections.abc import Callable
from typing import Any, Self

from rlstack.errors import ConfigError, did_you_mean
from rlstack.trainers.common.classic_keys import NO_OP_KEYS, is_no_op_key
from rlstack.trainers.common.config import COMMON_CONFIG, DEEP_MERGE_KEYS, merge_config
from rlstack.trainers.common.registry import get_trainer_class

__all__ = ["TrainerConfig"]

# Each setter's arguments, in 1.13's order, then the common keys 1.13 had no argument for.
# An argument sets the classic key of its own name unless RENAMED_ARGUMENTS says otherwise;
# multi_agent()'s arguments set sub-keys of `multiagent`.
SETTER_ARGUMENTS: dict[str, tuple[str, ...]] = {
    "python_environment": ("extra_python_environs_for_driver", "extra_python_environs_for_worker"),
    "resources": ("num_gpus", "_fake_gpus", "num_cpus_per_worker", "num_gpus_per_worker",
                  "num_cpus_for_local_worker", "custom_resources_per_worker", "placement_strategy",
                  "placement_timeout_s"),
    "framework": ("framework", "eager_tracing", "eager_max_retraces", "tf_session_args", "local_tf_session_args",
                  "rollout_inference"),
    "environment": ("env", "env_config", "observation_space", "action_space", "env_task_fn", "render_env",
                    "record_env", "clip_rewards", "normalize_actions", "clip_actions", "disable_env_checking"),
    "rollouts": ("num_rollout_workers", "num_envs_per_worker", "create_env_on_local_worker", "sample_collector",
                 "sample_async", "rollout_fragment_length", "batch_mode", "remote_worker_envs",
                 "remote_env_batch_wait_ms", "ignore_worker_failures", "recreate_failed_workers", "horizon",
                 "soft_horizon", "no_done_at_end", "preprocessor_pref", "observation_filter", "synchronize_filter",
                 "compress_observations", "restart_failed_sub_environments",
                 "num_consecutive_env_restarts_tolerance", "num_consecutive_failed_fragments_tolerance",
                 "num_consecutive_worker_failures_tolerance", "worker_health_probe_timeout_s",
                 "worker_restore_timeout_s"),
    "training": ("gamma", "lr", "train_batch_size", "model", "optimizer", "lr_schedule", "adam_epsilon",
                 "grad_clip"),
    "callbacks": ("callbacks_class",),
    "exploration": ("explore", "exploration_config"),
    "evaluation": ("evaluation_interval", "evaluation_duration", "evaluation_duration_unit",
                   "evaluation_parallel_to_training", "evaluation_config", "evaluation_num_workers",
                   "custom_evaluation_function", "always_attach_evaluation_results", "in_evaluation"),
    "offline_data": ("input_", "input_config", "actions_in_input_normalized", "input_evaluation",
                     "postprocess_inputs", "shuffle_buffer_size", "output", "output_config",
                     "output_compress_columns", "output_max_file_size", "off_policy_estimation_methods"),
    "multi_agent": ("policies", "policy_map_capacity", "policy_map_cache", "policy_mapping_fn",
                    "policies_to_train", "observation_fn", "replay_mode", "count_steps_by"),
    "reporting": ("keep_per_episode_custom_metrics", "metrics_episode_collection_timeout_s",
                  "metrics_num_episodes_for_smoothing", "min_time_s_per_reporting",
                  "min_train_timesteps_per_reporting", "min_sample_timesteps_per_reporting"),
    "debugging": ("logger_config", "log_level", "log_sys_usage", "fake_sampler", "seed"),
    "experimental": ("_tf_policy_handles_more_than_one_loss", "_disable_preprocessor_api",
                     "_disable_action_flattening", "_disable_execution_plan_api"),
}

# 1.13 argument -> the classic key it sets, where the two differ (`lambda` and `input` are a
# keyword and a builtin; the others are 1.13's renames in the object).
RENAMED_ARGUMENTS = {
    "num_cpus_for_local_worker": "num_cpus_for_driver",
    "num_rollout_workers": "num_workers",
    "create_env_on_local_worker": "create_env_on_driver",
    "synchronize_filter": "synchronize_filters",
    "callbacks_class": "callbacks",
    "custom_evaluation_function": "custom_eval_function",
    "input_": "input",
    "metrics_num_episodes_for_smoothing": "metrics_smoothing_episodes",
    "lambda_": "lambda",
}

# Ray 2.x's names of algorithm keys, taken by training() where the algorithm has the key.
RAY2_TRAINING_ALIASES = {
    "num_steps_sampled_before_learning_starts": "learning_starts",
    "q_model_config": "Q_model",
    "policy_model_config": "policy_model",
    "optimization_config": "optimization",
}

# The default of a setter's first argument given by position: it was not given.
_NOT_GIVEN: Any = object()


def _key_of(argument: str) -> str:
    return RENAMED_ARGUMENTS.get(argument, RAY2_TRAINING_ALIASES.get(argument, argument))


class TrainerConfig:
    """RLlib 1.13's config object: a builder of the classic config dict.

    Every setter takes keyword arguments under 1.13's names, checks them at once and
    returns the object itself, so calls chain; ``to_dict()`` gives the classic dict and
    ``build()`` the trainer. An unknown argument is a TypeError naming the valid ones; a
    bad value is the ConfigError a dict with that value gets from the trainer. The config
    refused changes nothing. A value that only disagrees with another key's (PPO's
    ``train_batch_size=100`` under the default ``sgd_minibatch_size`` of 128) is kept, as a
    later call may set that key: ``to_dict()`` and ``build()`` check the whole config. Two checks
    wait for ``build()``, as they depend on the machine rather than on the config: that
    ``input`` files exist (they may be recorded later), and the values Tune fills in for a
    search space (``tune.grid_search([...])``), which the trainer checks once Tune has
    chosen them.

    Passing an argument sets it, None included. A sub-dict (``model``, ``env_config``,
    ``evaluation_config``, ``multiagent``, ...) merges key by key over what is set, as the
    classic dict does over the defaults. Attributes read and write the config too, under
    the classic keys or 1.13's argument names (``config.lr``, ``config.num_workers = 0``),
    a write checked as a setter's.

    Args:
        trainer_class: The trainer the config is for; None: the subclass's algorithm
            (``PPOConfig``: ``PPOTrainer``), or the ``Trainer`` base for ``TrainerConfig``.

    Examples:
        >>> from rlstack.trainers.ppo import PPOConfig
        >>> config = (PPOConfig().environment("CartPole-v1").rollouts(num_rollout_workers=0)
        ...           .training(lr=3e-4, lambda_=0.95))
        >>> config.to_dict()["num_workers"], config.to_dict()["lambda"], config.lr
        (0, 0.95, 0.0003)
    """

    # The registry name of the subclass's algorithm (``"PPO"``); None for the base class.
    _algorithm: str | None = None

    def __init__(self, trainer_class: type | None = None) -> None:
        if trainer_class is None:
            if self._algorithm is None:
                from rlstack.trainers.common.trainer import Trainer  # Ray Tune: on first use

                trainer_class = Trainer
            else:
                trainer_class = get_trainer_class(self._algorithm)
        object.__setattr__(self, "trainer_class", trainer_class)
        object.__setattr__(self, "_config", dict(trainer_class.get_default_config()))
        # Classic keys rlstack accepts at a value with no effect (classic_keys.py), as given.
        object.__setattr__(self, "_no_op_keys", {})
        # The keys (and "section/sub-key"s) set, for evaluation_config=<config object>.
        object.__setattr__(self, "_given", set())

    # ----- the setters ---------------------------------------------------------------------------------

    def python_environment(self, **arguments: Any) -> Self:
        """Sets environment variables for the driver and the workers (1.13's; rlstack has none)."""
        return self._set("python_environment", arguments)

    def resources(self, **arguments: Any) -> Self:
        """Sets the CPUs, GPUs and custom resources of the driver and each worker."""
        return self._set("resources", arguments)

    def framework(self, framework: Any = _NOT_GIVEN, /, **arguments: Any) -> Self:
        """Sets the deep-learning framework (``"torch"`` or ``"tf"``) and its options."""
        if framework is not _NOT_GIVEN:
            if "framework" in arguments:
                raise TypeError(f"{type(self).__name__}.framework() got the framework twice; pass it once.")
            arguments = {"framework": framework, **arguments}
        return self._set("framework", arguments)

    def environment(self, env: Any = _NOT_GIVEN, /, **arguments: Any) -> Self:
        """Sets the env (a gymnasium id, a registered name, a class or a creator) and how
        its rewards, observations and actions are treated."""
        if env is not _NOT_GIVEN:
            if "env" in arguments:
                raise TypeError(f"{type(self).__name__}.environment() got the env twice; pass it once.")
            arguments = {"env": env, **arguments}
        return self._set("environment", arguments)

    def rollouts(self, **arguments: Any) -> Self:
        """Sets how experience is sampled: the rollout workers, their envs, fragments and
        episodes, and what happens when a worker or env fails."""
        return self._set("rollouts", arguments)

    def training(self, **arguments: Any) -> Self:
        """Sets the learning keys: the common ones below and the algorithm's own, the keys of
        its ``DEFAULT_CONFIG`` that ``COMMON_CONFIG`` lacks (``lambda`` as ``lambda_``);
        :meth:`arguments` lists them all."""
        return self._set("training", arguments)

    def callbacks(self, callbacks_class: Any = _NOT_GIVEN, /, **arguments: Any) -> Self:
        """Sets the callbacks: a ``DefaultCallbacks`` subclass (or what ``callbacks`` takes)."""
        if callbacks_class is not _NOT_GIVEN:
            if "callbacks_class" in arguments:
                raise TypeError(f"{type(self).__name__}.callbacks() got callbacks_class twice; pass it once.")
            arguments = {"callbacks_class": callbacks_class, **arguments}
        return self._set("callbacks", arguments)

    def exploration(self, **arguments: Any) -> Self:
        """Sets whether and how the policy explores while training."""
        return self._set("exploration", arguments)

    def evaluation(self, **arguments: Any) -> Self:
        """Sets when and how the trainer evaluates; ``evaluation_config`` may be a config
        object, whose set keys become the overrides."""
        if isinstance(arguments.get("evaluation_config"), TrainerConfig):
            arguments["evaluation_config"] = arguments["evaluation_config"]._overrides()
        return self._set("evaluation", arguments)

    def offline_data(self, **arguments: Any) -> Self:
        """Sets where experience is read from and written to, and the off-policy estimators."""
        return self._set("offline_data", arguments)

    def multi_agent(self, **arguments: Any) -> Self:
        """Sets the ``multiagent`` sub-keys: the policies, which agent acts with which, which learn."""
        return self._set("multi_agent", arguments)

    def reporting(self, **arguments: Any) -> Self:
        """Sets how results are smoothed and when an iteration reports."""
        return self._set("reporting", arguments)

    def debugging(self, **arguments: Any) -> Self:
        """Sets the logger, the log level and the seed."""
        return self._set("debugging", arguments)

    def experimental(self, **arguments: Any) -> Self:
        """Sets 1.13's experimental switches (accepted at the values that change nothing in
        rlstack, and ``_disable_execution_plan_api`` for a trainer with an execution plan)."""
        return self._set("experimental", arguments)

    # ----- the dict ----------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The classic config dict: the algorithm's ``DEFAULT_CONFIG`` with the values set
        (and any 1.x no-op key given, e.g. ``_disable_execution_plan_api``).

        Returns:
            A new dict, for ``Trainer(config=...)``, ``tune.run(name, config=...)`` or YAML.

        Raises:
            ConfigError: If the config was made invalid through an attribute's dict
                (``config.model["fcnet_hiddens"] = "x"``), which no setter saw.
        """
        config = {**copy.deepcopy(self._config), **copy.deepcopy(self._no_op_keys)}
        self._check(config)
        return config

    def update_from_dict(self, config_dict: dict[str, Any]) -> Self:
        """Sets the classic keys of ``config_dict`` (1.13's dict form; older names such as
        ``timesteps_per_iteration`` too), merged and checked as the trainer does.

        Raises:
            ConfigError: For an unknown key or a bad value.
        """
        return self._apply(dict(config_dict), lambda: f"{type(self).__name__}.update_from_dict()")

    @classmethod
    def from_dict(cls, config_dict: dict[str, Any]) -> Self:
        """A config object holding ``config_dict`` (classic keys) over the defaults.

        Raises:
            ConfigError: For an unknown key or a bad value.
        """
        return cls().update_from_dict(config_dict)

    def copy(self) -> Self:
        """An independent deep copy: setting either leaves the other as it was."""
        return copy.deepcopy(self)

    def build(self, env: Any = None, logger_creator: Any = None) -> Any:
        """Builds the trainer: ``trainer_class(config=self.to_dict(), env=env, logger_creator=...)``.

        Args:
            env: The env, over the one set with :meth:`environment` (this object keeps its own).
            logger_creator: 1.13's ``logger_creator(config) -> logger`` (see ``Trainer``).

        Returns:
            The trainer (``PPOConfig().build()`` is a ``PPOTrainer``).

        Raises:
            ConfigError: For impossible values, input files that do not exist, or no env.
        """
        return self.trainer_class(config=self.to_dict(), env=env, logger_creator=logger_creator)

    def arguments(self, method: str) -> list[str]:
        """The keyword arguments a setter takes, e.g. ``PPOConfig().arguments("training")``.

        Raises:
            ValueError: If ``method`` is not a setter.
        """
        if method not in SETTER_ARGUMENTS:
            raise ValueError(f"{method!r} is not a setter of {type(self).__name__}"
                             f"{did_you_mean(method, SETTER_ARGUMENTS)} Setters: {', '.join(SETTER_ARGUMENTS)}.")
        return list(self._arguments(method))

    # ----- attributes ------------------------------------------------------------------------------

    def __getattr__(self, name: str) -> Any:
        # Only names that are not attributes of the object get here: the config's keys.
        config = self.__dict__.get("_config")
        if config is None or name.startswith("__"):
            raise AttributeError(name)
        path = self._path(name)
        if path is None:
            raise AttributeError(f"{type(self).__name__} has no attribute or config key {name!r}"
                                 f"{did_you_mean(name, {*config, *self._all_arguments()}) or '.'}")
        if path[0] in self._no_op_keys:
            return self._no_op_keys[path[0]]
        if path[0] not in config:
            reason = NO_OP_KEYS[path[0]][1] if path[0] in NO_OP_KEYS else "1.x's key has no effect in rlstack"
            raise AttributeError(f"rlstack has no config key {path[0]!r} ({reason}).")
        value = config[path[0]]
        return value[path[1]] if len(path) == 2 else value

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self.__dict__ or name == "trainer_class":
            object.__setattr__(self, name, value)
            return
        path = self._path(name)
        if path is None:
            raise AttributeError(f"{type(self).__name__} has no config key {name!r}"
                                 f"{did_you_mean(name, {*self._config, *self._all_arguments()}) or '.'}")

        def where() -> str:
            return f"{type(self).__name__}.{name} = {value!r}"

        self._apply({path[0]: {path[1]: value}} if len(path) == 2 else {path[0]: value}, where)

    def __repr__(self) -> str:
        overrides = ", ".join(f"{key}={value!r}" for key, value in self._overrides().items())
        return f"{type(self).__name__}({overrides})"

    # ----- the machinery -----------------------------------------------------------------------------

    def _arguments(self, method: str) -> dict[str, str]:
        # Argument -> classic key; for training() the algorithm's own keys too.
        arguments = {argument: _key_of(argument) for argument in SETTER_ARGUMENTS[method]}
        if method == "training":
            elsewhere = {_key_of(argument) for names in SETTER_ARGUMENTS.values() for argument in names}
            for key in self._config:
                if key not in COMMON_CONFIG and key not in elsewhere:
                    arguments["lambda_" if key == "lambda" else key] = key
            arguments.update({alias: key for alias, key in RAY2_TRAINING_ALIASES.items() if key in self._config})
        return arguments

    def _all_arguments(self) -> dict[str, str]:
        # Every setter's argument -> its setter.
        return {argument: method for method in SETTER_ARGUMENTS for argument in self._arguments(method)}

    def _path(self, name: str) -> tuple[str] | tuple[str, str] | None:
        # An attribute name (a classic key, a 1.13 argument or attribute) -> its place in the dict.
        if name == "framework_str":  # 1.13's attribute
            return ("framework",)
        if name in SETTER_ARGUMENTS["multi_agent"]:
            return ("multiagent", name)
        if name in self._config or name in self._all_arguments() or is_no_op_key(name, self._name):
            return (_key_of(name),)
        return None

    @property
    def _name(self) -> str:
        return self.trainer_class._name

    def _set(self, method: str, arguments: dict[str, Any]) -> Self:
        def where() -> str:
            return f"{type(self).__name__}.{method}({', '.join(f'{a}={v!r}' for a, v in arguments.items())})"

        valid = self._arguments(method)
        for argument in arguments:
            if argument not in valid:
                raise TypeError(self._unknown_argument(method, argument, valid))
        partial: dict[str, Any] = {}
        for argument, value in arguments.items():
            key = valid[argument]
            if method == "multi_agent":
                partial.setdefault("multiagent", {})[key] = value
            else:
                partial[key] = value
        return self._apply(partial, where)

    def _unknown_argument(self, method: str, argument: str, valid: dict[str, str]) -> str:
        message = f"{type(self).__name__}.{method}() got an unknown argument {argument!r}"
        owners = self._all_arguments()
        by_key = {_key_of(name): (owner, name) for name, owner in owners.items()}
        if argument in owners:
            message += f": it is an argument of .{owners[argument]}(), call .{owners[argument]}({argument}=...)"
        elif argument in by_key:
            owner, name = by_key[argument]
            message += f": the config key {argument!r} is set by .{owner}({name}=...)"
        else:
            message += did_you_mean(argument, valid)
        return f"{message}{' ' if message.endswith('?') else '. '}Its arguments: {', '.join(valid)}."

    def _apply(self, partial: dict[str, Any], where: Callable[[], str]) -> Self:
        # The trainer's merge (unknown keys, old names, sub-dicts key by key, 1.x no-op keys
        # checked and dropped) over what is set, then its validation. A value wrong in itself
        # is refused here and changes nothing; one that only disagrees with another key's
        # value is kept, as a later call may change that key, and to_dict() / build() check
        # the whole config.
        try:
            merged = merge_config(self._config, partial, self._name)
            no_op = {key: copy.deepcopy(value) for key, value in partial.items()
                     if key not in merged and is_no_op_key(key, self._name)}
        except ConfigError as exc:
            raise ConfigError(f"{where()}: {exc}") from exc
        try:
            self._check({**merged, **self._no_op_keys, **no_op})
        except ConfigError as exc:
            if not _names_another_key(str(exc), merged, partial):
                raise ConfigError(f"{where()}: {exc}") from exc
        object.__setattr__(self, "_config", merged)
        self._no_op_keys.update(no_op)
        for key, value in partial.items():
            if key in DEEP_MERGE_KEYS and isinstance(value, dict):
                self._given.update(f"{key}/{sub_key}" for sub_key in value)
            else:
                self._given.add(key)
        return self

    def _check(self, config: dict[str, Any]) -> None:
        self.trainer_class.merge_and_validate(_checkable(config))

    def _overrides(self) -> dict[str, Any]:
        # The keys set or differing from the defaults (in sub-dicts, the sub-keys).
        defaults = self.trainer_class.get_default_config()
        overrides: dict[str, Any] = {}
        for key, value in self._config.items():
            default = defaults.get(key)
            if key in DEEP_MERGE_KEYS and isinstance(value, dict) and isinstance(default, dict):
                section = {sub_key: sub_value for sub_key, sub_value in value.items()
                           if f"{key}/{sub_key}" in self._given or sub_key not in default
                           or not _equal(sub_value, default[sub_key])}
                if section:
                    overrides[key] = copy.deepcopy(section)
            elif key in self._given or not _equal(value, default):
                overrides[key] = copy.deepcopy(value)
        return {**overrides, **copy.deepcopy(self._no_op_keys)}


def _names_another_key(message: str, config: dict[str, Any], partial: dict[str, Any]) -> bool:
    # Whether a validation message quotes another key's value beside the one just set: PPO's
    # "sgd_minibatch_size (128) must be <= train_batch_size (100)" after train_batch_size=100
    # is a disagreement; "num_gpus=2: ... give GPUs to workers with num_gpus_per_worker"
    # names a key as advice, without its value, and is a value wrong in itself.
    for key in set(config) - set(partial):
        value = config[key]
        if isinstance(value, (bool, int, float, str)) and re.search(
                rf"\b{re.escape(key)}\b\W{{1,4}}(got )?{re.escape(str(value))}\b", message):
            return True
    return False


def _equal(a: Any, b: Any) -> bool:
    try:
        return a is b or bool(a == b)
    except Exception:  # e.g. numpy arrays, whose == is elementwise
        return False


def _is_search_space(value: Any) -> bool:
    # Tune's grid_search dict, or one of its sample domains (tune.uniform, tune.choice, ...).
    if isinstance(value, dict) and set(value) == {"grid_search"}:
        return True
    return any(klass.__module__.startswith("ray.tune") for klass in type(value).__mro__)


def _without_search_spaces(section: dict[str, Any]) -> dict[str, Any]:
    # Dropped, a key takes its default: the trainer checks Tune's choice when it gets it.
    return {key: _without_search_spaces(value) if isinstance(value, dict) else value
            for key, value in section.items() if not _is_search_space(value)}


class _UnreadInput:
    """Stands in for input files while a config is checked (they are checked at build):
    a reader factory, as the checks take one, named as the files were."""

    def __init__(self, source: Any) -> None:
        self.source = source

    def __call__(self, ioctx: Any = None) -> None:
        raise RuntimeError("a stand-in for input files, used only while checking a config")

    def __repr__(self) -> str:
        return repr(self.source)


def _checkable(config: dict[str, Any]) -> dict[str, Any]:
    # The config as the trainer's validation may see it before a run: no search spaces, and
    # input files (which may be recorded later) replaced by stand-in readers.
    config = _without_search_spaces(config)
    source = config.get("input", "sampler")
    if isinstance(source, (list, tuple)) or (isinstance(source, str) and source not in ("sampler", "dataset")):
        config["input"] = _UnreadInput(source)
    elif isinstance(source, dict):
        config["input"] = {_UnreadInput(key) if isinstance(key, str) and key != "sampler"
                           else key: probability for key, probability in source.items()}
    return config


# The setters whose first argument may be given by position (1.13's and Ray 2.x's).
_POSITIONAL_FIRST = ("framework", "environment", "callbacks")


def _document_setters() -> None:
    # Each setter's signature and Args section come from SETTER_ARGUMENTS, the one list.
    for method, arguments in SETTER_ARGUMENTS.items():
        function = getattr(TrainerConfig, method)
        parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        parameters += [inspect.Parameter(argument, inspect.Parameter.POSITIONAL_OR_KEYWORD if i == 0 and method in
                                         _POSITIONAL_FIRST else inspect.Parameter.KEYWORD_ONLY, default=None,
                                         annotation=Any) for i, argument in enumerate(arguments)]
        if method == "training":
            parameters.append(inspect.Parameter("algorithm_keys", inspect.Parameter.VAR_KEYWORD, annotation=Any))
        function.__signature__ = inspect.Signature(parameters, return_annotation=Self)
        lines = []
        for argument in arguments:
            key = f"multiagent.{argument}" if method == "multi_agent" else _key_of(argument)
            if key not in COMMON_CONFIG and key in NO_OP_KEYS:
                accepted = NO_OP_KEYS[key][0]
                lines.append(f"{argument}: 1.13's, without effect in rlstack: {NO_OP_KEYS[key][1]}; accepted "
                             + ("at any value." if accepted is None else
                                f"as {' or '.join(repr(value) for value in accepted)} only."))
            else:
                lines.append(f"{argument}: ``{key}``.")
        if method == "training":
            lines.append("**algorithm_keys: the algorithm's own keys (``lambda_`` for ``lambda``).")
        indent = " " * 8
        function.__doc__ = (
            f"{function.__doc__}\n\n{indent}Each argument sets the classic key named (COMMON_CONFIG's comment on "
            f"it says what it does).\n\n{indent}Args:\n" + "".join(f"{indent}    {line}\n" for line in lines)
            + f"\n{indent}Returns:\n{indent}    This object.\n\n{indent}Raises:\n{indent}    TypeError: For an "
            f"unknown argument, naming the valid ones.\n{indent}    ConfigError: For a value the trainer refuses.\n")


_document_setters()
