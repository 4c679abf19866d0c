"""Experiments: classic RLlib YAML files (and ``rlstack train`` flags) run on Ray Tune.

A file maps experiment names to specs::

    cartpole-ppo:
        run: PPO
        env: CartPole-v1
        stop: {episode_reward_mean: 150, timesteps_total: 100000}
        checkpoint_freq: 5
        checkpoint_at_end: true
        num_samples: 1
        config:
            lr: {grid_search: [0.001, 0.0003]}

A stop criterion on a result key that holds one value per policy (``policy_reward_mean``,
``policy_reward_min``, ``policy_reward_max`` of a multi-agent run) is met once every
policy's value reaches it: ``stop: {policy_reward_mean: 150}``.

Search spaces are written as one-key mappings: ``grid_search: [...]``, ``choice: [...]``,
``uniform: [low, high]``, ``loguniform: [low, high]``, ``randint: [low, high]``,
``quniform: [low, high, q]``. A key rlstack does not implement is an error naming it.
"""

from __future__ import annotations

import copy
import os
from typing import Any

from rlstack.errors import ConfigError, did_you_mean

# Experiment keys: the classic RLlib / tune.run_experiments ones rlstack implements.
EXPERIMENT_KEYS = (
    "run", "env", "stop", "config", "checkpoint_freq", "checkpoint_at_end", "keep_checkpoints_num",
    "num_samples", "local_dir", "storage_path", "restore", "name",
)

SEARCH_SPACES = ("grid_search", "choice", "uniform", "loguniform", "randint", "quniform")


def load_experiments(path: str) -> dict[str, dict[str, Any]]:
    """Reads and checks a YAML file of experiments.

    Raises:
        ConfigError: For an unreadable file, a wrong type, or an unknown key.
    """
    import yaml

    try:
        with open(path) as f:
            experiments = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"Cannot read experiment file {path!r}: {exc}") from exc
    if not isinstance(experiments, dict) or not experiments:
        raise ConfigError(f"{path!r} must map experiment names to {{run, env, stop, config}}.")
    for name, spec in experiments.items():
        check_experiment(name, spec, path)
    return ExperimentFile(experiments, source=path)


class ExperimentFile(dict):
    """The experiments of one YAML file (a plain dict of them) that remembers the file,
    so that errors found later (:func:`validate_experiments`) can name it."""

    def __init__(self, experiments: dict[str, dict[str, Any]], source: str) -> None:
        super().__init__(experiments)
        self.source = source


def check_experiment(name: str, spec: Any, where: str = "the command line") -> None:
    """Validates one experiment spec.

    Raises:
        ConfigError: Naming the experiment, the key and the fix.
    """
    if not isinstance(spec, dict):
        raise ConfigError(f"Experiment {name!r} in {where} must be a mapping, got {type(spec).__name__}.")
    for key in spec:
        if key not in EXPERIMENT_KEYS:
            raise ConfigError(
                f"Experiment key {key!r} (experiment {name!r} in {where}) is not supported by rlstack"
                f"{did_you_mean(key, EXPERIMENT_KEYS) or '.'} Supported: {', '.join(EXPERIMENT_KEYS)}."
            )
    if "run" not in spec:
        raise ConfigError(f"Experiment {name!r} in {where} has no 'run' (the algorithm, e.g. run: PPO).")
    for key, (fits, expected, example) in _KEY_TYPES.items():
        value = spec.get(key)
        if value is not None and not fits(value):
            raise ConfigError(
                f"Experiment {name!r} in {where}: {key} must be {expected}, got {type(value).__name__} "
                f"({value!r}); e.g. {example}."
            )
    for criterion, value in (spec.get("stop") or {}).items():
        if not _is_number(value):
            raise ConfigError(
                f"Experiment {name!r} in {where}: stop criterion {criterion!r} must be a number (the trial stops once "
                f"the result reaches it), got {type(value).__name__} ({value!r}); e.g. stop: {{{criterion}: 100}}."
            )


def _is_env_grid(value: Any) -> bool:
    return (isinstance(value, dict) and set(value) == {"grid_search"} and isinstance(value["grid_search"], list)
            and bool(value["grid_search"]) and all(isinstance(v, str) for v in value["grid_search"]))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_int_at_least(low: int) -> Any:
    return lambda value: isinstance(value, int) and not isinstance(value, bool) and value >= low


# Experiment key -> (check, what is expected, an example), for messages that say all three.
_KEY_TYPES: dict[str, tuple[Any, str, str]] = {
    "run": (lambda v: isinstance(v, str), "an algorithm name (a string)", "run: PPO"),
    # Classic Atari tuned examples sweep over envs: env: {grid_search: [BreakoutNoFrameskip-v4, ...]}.
    "env": (lambda v: isinstance(v, str) or _is_env_grid(v), "an env name (a string) or a grid_search over names",
            "env: CartPole-v1, or env: {grid_search: [BreakoutNoFrameskip-v4, PongNoFrameskip-v4]}"),
    "stop": (lambda v: isinstance(v, dict), "a dict (stop must be a dict of result keys and values)",
             "stop: {training_iteration: 10, episode_reward_mean: 150}"),
    "config": (lambda v: isinstance(v, dict), "a dict (config must be a dict of trainer config keys)",
               "config: {num_workers: 2, lr: 0.0003}"),
    "checkpoint_freq": (_is_int_at_least(0), "an integer >= 0 (0: no periodic checkpoints)", "checkpoint_freq: 5"),
    "keep_checkpoints_num": (_is_int_at_least(1), "an integer >= 1", "keep_checkpoints_num: 3"),
    "num_samples": (_is_int_at_least(1), "an integer >= 1", "num_samples: 4"),
    "checkpoint_at_end": (lambda v: isinstance(v, bool), "true or false", "checkpoint_at_end: true"),
    "local_dir": (lambda v: isinstance(v, str), "a directory path", "local_dir: ~/ray_results"),
    "storage_path": (lambda v: isinstance(v, str), "a directory path", "storage_path: ~/ray_results"),
    "restore": (lambda v: isinstance(v, str), "a checkpoint directory path",
                "restore: ~/ray_results/x/checkpoint_000010"),
    "name": (lambda v: isinstance(v, str), "a string", "name: cartpole-ppo"),
}


def to_search_space(value: Any) -> Any:
    """Turns YAML search-space mappings inside a config into Tune search spaces.

    Raises:
        ConfigError: For a malformed search space.
    """
    from ray import tune

    if isinstance(value, list):
        return [to_search_space(v) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        (kind, args), = value.items()
        if kind in SEARCH_SPACES:
            if not isinstance(args, list):
                raise ConfigError(f"{kind} needs a list, e.g. {{{kind}: [0.001, 0.0003]}}; got {args!r}.")
            try:
                return {
                    "grid_search": lambda: tune.grid_search(args),
                    "choice": lambda: tune.choice(args),
                    "uniform": lambda: tune.uniform(*args),
                    "loguniform": lambda: tune.loguniform(*args),
                    "randint": lambda: tune.randint(*args),
                    "quniform": lambda: tune.quniform(*args),
                }[kind]()
            except (TypeError, ValueError) as exc:
                raise ConfigError(f"Bad arguments for {kind}: {args!r} ({exc}).") from exc
    return {k: to_search_space(v) for k, v in value.items()}


def validate_experiments(experiments: dict[str, dict[str, Any]], framework: str | None = None) -> None:
    """Checks every experiment (keys, algorithm, search spaces, config) before Ray starts.

    Raises:
        ConfigError: Naming the experiment and what is wrong.
    """
    from rlstack.trainers.common.registry import get_trainer_class

    where = getattr(experiments, "source", "the command line")
    for name, spec in experiments.items():
        check_experiment(name, spec, where)
        try:
            trainer_class = get_trainer_class(spec["run"])
            config = _experiment_config(spec, framework)
            to_search_space(config)  # malformed search spaces fail here, with their own message
            # The config with every search space replaced by one of its values.
            trainer_class.merge_and_validate(_first_values(config))
        except ConfigError as exc:
            raise ConfigError(f"Experiment {name!r} in {where}: {exc}") from exc


def _experiment_config(spec: dict[str, Any], framework: str | None) -> dict[str, Any]:
    config = copy.deepcopy(spec.get("config") or {})
    if spec.get("env") is not None:
        config["env"] = spec["env"]
    if framework:
        config["framework"] = framework
        # --framework overrides a 1.x file's own framework switches too (eager: true).
        from rlstack.trainers.common.deprecated_keys import FRAMEWORK_SWITCHES

        for key in FRAMEWORK_SWITCHES:
            config.pop(key, None)
    return config


def needed_cpus(trainer_class: type, config: dict[str, Any]) -> float:
    """CPUs one trial of ``config`` asks for (driver + workers), search spaces ignored."""
    plain = {k: v for k, v in config.items() if not (isinstance(v, dict) and set(v) & set(SEARCH_SPACES))}
    factory = trainer_class.default_resource_request(plain)
    return sum(bundle.get("CPU", 0) for bundle in factory.bundles)


def run_experiments(
    experiments: dict[str, dict[str, Any]],
    framework: str | None = None,
    verbose: int = 1,
    resume: bool = False,
    storage_path: str | None = None,
) -> list[dict[str, Any]]:
    """Runs experiments on Tune, one after the other; returns one summary row per trial.

    Args:
        experiments: ``{name: spec}`` as from :func:`load_experiments`.
        framework: Overrides every experiment's ``config["framework"]``.
        verbose: Tune's verbosity (0 silent, 1 progress, 2 per-result).
        resume: Resume unfinished trials of an experiment of the same name and storage.
        storage_path: Where results go when the experiment names none (default
            ``~/ray_results``).

    Raises:
        ConfigError: For an unknown algorithm or bad experiment keys.
    """
    from ray import tune

    from rlstack.trainers.common.registry import get_trainer_class

    validate_experiments(experiments, framework)
    rows = []
    for name, spec in experiments.items():
        trainer_class = get_trainer_class(spec["run"])
        config = _experiment_config(spec, framework)
        trainable = trainer_class
        if spec.get("restore"):
            restore_path = os.path.abspath(os.path.expanduser(spec["restore"]))
            trainable = type(trainer_class.__name__, (trainer_class,), {"_initial_checkpoint": restore_path})
        storage = spec.get("storage_path") or spec.get("local_dir") or storage_path
        storage = os.path.abspath(os.path.expanduser(storage)) if storage else None
        run_config = tune.RunConfig(
            name=spec.get("name") or name,
            storage_path=storage,
            stop=stopper(spec.get("stop")),
            verbose=verbose,
            checkpoint_config=tune.CheckpointConfig(
                checkpoint_frequency=spec.get("checkpoint_freq") or 0,
                checkpoint_at_end=bool(spec.get("checkpoint_at_end", False)),
                num_to_keep=spec.get("keep_checkpoints_num"),
            ),
        )
        experiment_dir = os.path.join(storage or os.path.expanduser("~/ray_results"), run_config.name)
        if resume and tune.Tuner.can_restore(experiment_dir):
            tuner = tune.Tuner.restore(experiment_dir, trainable=trainable, resume_unfinished=True, resume_errored=True)
        else:
            tuner = tune.Tuner(
                trainable,
                param_space=to_search_space(config),
                tune_config=tune.TuneConfig(num_samples=spec.get("num_samples", 1)),
                run_config=run_config,
            )
        results = tuner.fit()
        for result in results:
            metrics = result.metrics or {}
            rows.append({
                "experiment": name,
                "trial": os.path.basename(result.path) if result.path else "",
                "status": "ERROR" if result.error else "TERMINATED",
                "iterations": metrics.get("training_iteration"),
                "timesteps": metrics.get("timesteps_total"),
                "reward_mean": _round(metrics.get("episode_reward_mean")),
                "time_s": _round(metrics.get("time_total_s")),
                "checkpoint": result.checkpoint.path if result.checkpoint else None,
                "error": str(result.error).splitlines()[0][:200] if result.error else "",
            })
    return rows


# Result keys holding {policy_id: value}: a stop criterion on one is met when every policy's is.
PER_POLICY_KEYS = ("policy_reward_mean", "policy_reward_min", "policy_reward_max")


def stopper(stop: dict[str, float] | None) -> Any:
    """What Tune's ``RunConfig(stop=...)`` gets for an experiment's ``stop``: the dict
    itself, or, when a criterion names a per-policy key (:data:`PER_POLICY_KEYS`), a
    function that also stops once every policy's value reaches that criterion."""
    if not stop or not set(stop) & set(PER_POLICY_KEYS):
        return stop or None
    criteria = dict(stop)

    def should_stop(trial_id: str, result: dict[str, Any]) -> bool:
        for key, bar in criteria.items():
            value = result.get(key)
            if isinstance(value, dict):
                # Every policy, and at least one: a policy with no finished episode yet has none.
                if value and all(v >= bar for v in value.values()):
                    return True
            elif value is not None and value >= bar:
                return True
        return False

    return should_stop


def _first_values(config: Any) -> Any:
    if isinstance(config, dict):
        if len(config) == 1:
            (kind, args), = config.items()
            if kind in SEARCH_SPACES and isinstance(args, list) and args:
                # A member for grid_search / choice, the lower bound for ranges.
                return args[0]
        return {k: _first_values(v) for k, v in config.items()}
    return config


def _round(value: Any) -> Any:
    return round(value, 2) if isinstance(value, float) else value
