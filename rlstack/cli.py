"""The ``rlstack`` command line: ``rlstack train`` (and ``python -m rlstack train``).

``rlstack train`` builds a trainer from flags or from a classic RLlib-style YAML file,
trains until a stop criterion holds, prints one line per iteration and a summary table
at the end, and saves a final checkpoint.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from typing import Any

from rlstack.errors import ConfigError, RLStackError

# Keys of one experiment in a YAML file that `rlstack train` understands.
EXPERIMENT_KEYS = ("env", "run", "stop", "config", "checkpoint_at_end")


def _parse_json(text: str, flag: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{flag} must be a JSON object, e.g. '{{\"lr\": 0.0003}}'; could not parse {text!r}: {exc}") from exc
    if not isinstance(value, dict):
        raise ConfigError(f"{flag} must be a JSON object, got {type(value).__name__}.")
    return value


def load_experiments(path: str) -> dict[str, dict[str, Any]]:
    """Reads a YAML file of experiments (``name: {env, run, stop, config}``).

    Raises:
        ConfigError: For an unreadable file or an unknown experiment key.
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
        if not isinstance(spec, dict):
            raise ConfigError(f"Experiment {name!r} in {path!r} must be a mapping, got {type(spec).__name__}.")
        for key in spec:
            if key not in EXPERIMENT_KEYS:
                raise ConfigError(
                    f"Experiment key {key!r} in {path!r} is not supported by `rlstack train` yet; "
                    f"supported: {', '.join(EXPERIMENT_KEYS)}."
                )
    return experiments


def stop_reached(result: dict[str, Any], stop: dict[str, Any]) -> bool:
    """True when any ``stop`` criterion holds (Tune's semantics: result[key] >= value)."""
    for key, bound in stop.items():
        value = result.get(key)
        if value is not None and not (isinstance(value, float) and math.isnan(value)) and value >= bound:
            return True
    return False


def run_experiment(name: str, spec: dict[str, Any], framework: str | None = None, verbose: bool = True) -> dict[str, Any]:
    """Trains one experiment until its stop criterion; returns a summary row.

    Args:
        name: Experiment name (for printing).
        spec: ``{"run", "env", "stop", "config", "checkpoint_at_end"}``.
        framework: Overrides ``config["framework"]`` when given.
        verbose: Print a line per iteration.
    """
    from rlstack.trainers.registry import get_trainer_class

    trainer_class = get_trainer_class(spec.get("run", "PPO"))
    config = dict(spec.get("config") or {})
    if framework:
        config["framework"] = framework
    stop = dict(spec.get("stop") or {"training_iteration": 10})
    start = time.time()
    trainer = trainer_class(config, spec.get("env") or config.get("env"))
    result: dict[str, Any] = {}
    try:
        while True:
            result = trainer.train()
            if verbose:
                print(
                    f"[{name}] iter {result['training_iteration']:4d}  steps {result['timesteps_total']:8d}  "
                    f"reward {result['episode_reward_mean']:8.2f}  len {result['episode_len_mean']:7.1f}  "
                    f"time {result['time_total_s']:7.1f}s",
                    flush=True,
                )
            if stop_reached(result, stop):
                break
        checkpoint = trainer.save() if spec.get("checkpoint_at_end", True) else None
    finally:
        trainer.stop()
    return {
        "experiment": name,
        "algorithm": trainer_class._name,
        "env": str(spec.get("env")),
        "framework": trainer.config["framework"],
        "iterations": result.get("training_iteration"),
        "timesteps": result.get("timesteps_total"),
        "reward_mean": round(float(result.get("episode_reward_mean", float("nan"))), 2),
        "wall_s": round(time.time() - start, 1),
        "checkpoint": checkpoint,
    }


def _train(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    if args.config_file:
        experiments = load_experiments(args.config_file)
    else:
        experiments = {
            "default": {
                "run": args.run,
                "env": args.env,
                "stop": _parse_json(args.stop, "--stop"),
                "config": _parse_json(args.config, "--config"),
            }
        }
    if args.num_workers is not None:
        for spec in experiments.values():
            spec.setdefault("config", {})["num_workers"] = args.num_workers
    rows = [run_experiment(name, spec, framework=args.framework) for name, spec in experiments.items()]
    print()
    print(tabulate(rows, headers="keys", tablefmt="github"))
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``rlstack`` command."""
    parser = argparse.ArgumentParser(prog="rlstack", description="Train reinforcement-learning agents on Ray.")
    commands = parser.add_subparsers(dest="command", required=True)
    train = commands.add_parser("train", help="train an algorithm until a stop criterion holds")
    train.add_argument("--run", default="PPO", help="algorithm name (default: PPO)")
    train.add_argument("--env", default="CartPole-v1", help="env id or registered name (default: CartPole-v1)")
    train.add_argument("--stop", default='{"episode_reward_mean": 150, "timesteps_total": 100000}',
                       help="JSON stop criteria, e.g. '{\"episode_reward_mean\": 150}'")
    train.add_argument("--config", default="{}", help="JSON config overrides, e.g. '{\"lr\": 0.0003}'")
    train.add_argument("-f", "--config-file", help="YAML file of experiments (classic RLlib format)")
    train.add_argument("--framework", choices=["torch", "tf", "tf2"], help="override the config's framework")
    train.add_argument("--num-workers", type=int, help="override the config's num_workers")
    train.set_defaults(func=_train)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``rlstack`` command; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except RLStackError as exc:
        print(f"rlstack: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
