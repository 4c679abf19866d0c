"""The ``rlstack`` command line (also ``python -m rlstack``).

* ``rlstack train``: run experiments on Ray Tune, from flags or a classic RLlib YAML file;
  live progress from Tune, then a table of the trials.
* ``rlstack evaluate CHECKPOINT`` (and its older name ``rlstack rollout``): play episodes
  with a trained policy, with classic RLlib 1.x's ``rllib evaluate`` flags; optionally
  render, record mp4 videos, or save the transitions as an ``.npz`` file.
* ``rlstack ls``: the registered algorithms and the envs rlstack knows by name.
* ``rlstack plot RESULTS_DIR``: learning curves (mean ± std over seeds) as PNG files.
* ``rlstack compare --algos PPO,DQN --env CartPole-v1 --seeds 2``: algorithms x frameworks
  x seeds on Tune, then a table, learning-curve PNGs and an HTML report (rlstack/compare.py).
* ``rlstack submit --address http://HEAD:8265 -- train -f x.yaml``: run an rlstack command
  as a Ray job on a cluster (uploading the working directory), following its logs.
* ``rlstack serve CHECKPOINT``: the checkpoint's policy behind an HTTP JSON endpoint on
  Ray Serve, until Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

from rlstack import __version__
from rlstack.errors import ConfigError, RLStackError, pip_install


def _parse_json(text: str, flag: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{flag} must be a JSON object, e.g. '{{\"lr\": 0.0003}}'; could not parse {text!r}: {exc}") from exc
    if not isinstance(value, dict):
        raise ConfigError(f"{flag} must be a JSON object, got {type(value).__name__}.")
    return value


def _init_ray(args: argparse.Namespace, experiments: dict[str, dict[str, Any]]) -> None:
    import ray

    from rlstack.experiments import needed_cpus
    from rlstack.trainers.common.ray_start import connect_ray, init_local_ray
    from rlstack.trainers.common.registry import get_trainer_class

    if ray.is_initialized():
        return
    address = args.ray_address or os.environ.get("RAY_ADDRESS")
    if address:
        connect_ray(address)
        return
    # A trial asks for the driver's CPU plus one per worker; on a small machine that can
    # exceed its cores, and the trial would wait forever. Rollout workers of small envs
    # share cores well, so give the local Ray enough logical CPUs for one trial.
    needed = max(needed_cpus(get_trainer_class(spec["run"]), {**(spec.get("config") or {})})
                 for spec in experiments.values())
    num_cpus = args.ray_num_cpus or max(os.cpu_count() or 1, math.ceil(needed))
    init_local_ray(num_cpus=num_cpus, num_gpus=args.ray_num_gpus, include_dashboard=False)


def _train(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    from rlstack.experiments import load_experiments, run_experiments, validate_experiments

    if args.config_file:
        experiments = load_experiments(args.config_file)
        overrides = _parse_json(args.config, "--config")
        for spec in experiments.values():  # --config goes over each experiment's config, key by key
            spec["config"] = _deep_merge(spec.get("config") or {}, overrides)
    else:
        spec: dict[str, Any] = {
            "run": args.run,
            "env": args.env,
            "stop": _parse_json(args.stop, "--stop"),
            "config": _parse_json(args.config, "--config"),
        }
        experiments = {"default": spec}
    for spec in experiments.values():
        config = spec.setdefault("config", {})
        if args.num_workers is not None:
            config["num_workers"] = args.num_workers
        for flag, key in (("num_samples", "num_samples"), ("checkpoint_freq", "checkpoint_freq"),
                          ("keep_checkpoints_num", "keep_checkpoints_num"), ("restore", "restore")):
            if getattr(args, flag) is not None:
                spec[key] = getattr(args, flag)
        if args.checkpoint_at_end:
            spec["checkpoint_at_end"] = True
        spec.setdefault("checkpoint_at_end", True)
    validate_experiments(experiments, framework=args.framework)  # before Ray starts
    _init_ray(args, experiments)
    rows = run_experiments(experiments, framework=args.framework, verbose=1 + args.verbose,
                           resume=args.resume, storage_path=args.storage_path or args.local_dir)
    print()
    print(tabulate(rows, headers="keys", tablefmt="github"))
    return 1 if any(row["status"] == "ERROR" for row in rows) else 0


def _deep_merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    # 1.x merged --config into the checkpoint's config key by key, sub-dicts included.
    merged = dict(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _keep_going(steps: int, max_steps: int, episodes: int, max_episodes: int) -> bool:
    # 1.x's limits: stop at whichever of --steps / --episodes is reached first; 0 = no limit.
    return (not max_steps or steps < max_steps) and (not max_episodes or episodes < max_episodes)


def _build_trainer(args: argparse.Namespace) -> tuple[Any, Any]:
    """The trainer to play with, and its env: the checkpoint's config under its
    ``evaluation_config`` under ``--config`` (1.x's order), restored from the checkpoint."""
    from rlstack.trainers.common import checkpoint_files as ckpt
    from rlstack.trainers.common.registry import get_trainer_class

    user = _parse_json(args.config, "--config")
    no_workers = {"num_workers": 0, "evaluation_num_workers": 0, "evaluation_interval": None}
    if args.checkpoint is None:
        if not args.run or not (args.env or user.get("env")):
            raise ConfigError("Without a checkpoint, pass --run and --env to play with an untrained trainer, "
                              "e.g. rlstack evaluate --run PPO --env CartPole-v1 --episodes 3.")
        trainer_class = get_trainer_class(args.run)
        # The defaults' evaluation_config (greedy actions) under --config, as with a checkpoint.
        evaluation = _deep_merge(trainer_class.get_default_config()["evaluation_config"],
                                 user.get("evaluation_config") or {})
        config = {**_deep_merge(evaluation, user), **no_workers}
        env = args.env or user["env"]
        config.pop("env", None)
        return trainer_class(config, env), env
    metadata, _ = ckpt.read_checkpoint(args.checkpoint)
    algorithm = metadata["algorithm"]
    if args.run and args.run != algorithm:
        raise ConfigError(f"--run {args.run} does not match the checkpoint, which {algorithm} wrote; "
                          f"use --run {algorithm} or leave --run out (it is read from the checkpoint).")
    trainer_class = get_trainer_class(algorithm)
    stored = {k: v for k, v in ckpt.with_moved_paths(metadata["config"]).items()
              if k in trainer_class.get_default_config()}
    config = _deep_merge(stored, stored.get("evaluation_config") or {})
    config = _deep_merge(config, user)
    config.update(no_workers)
    config.pop("env", None)  # from_checkpoint keeps the checkpoint's env unless given one
    env = args.env or user.get("env")
    trainer = trainer_class.from_checkpoint(args.checkpoint, env=env, config_overrides=config)
    return trainer, env or metadata["config"].get("env")


def _evaluate(args: argparse.Namespace) -> int:
    import gymnasium as gym
    import numpy as np

    from tqdm import tqdm

    from rlstack.env.env_context import EnvContext
    from rlstack.env.registry import make_env

    for flag in ("save_info", "use_shelve", "track_progress"):
        if getattr(args, flag):
            raise ConfigError(f"--{flag.replace('_', '-')} (RLlib 1.x's, for its pickle/shelve output) is not "
                              "supported: rlstack's --out writes one .npz of the transitions' columns.")
    trainer, env_name = _build_trainer(args)
    if trainer.is_multi_agent:
        trainer.stop()
        raise ConfigError("rlstack evaluate / rollout play single-agent envs; this trainer is multi-agent. Restore "
                          "it in Python and call trainer.evaluate() (evaluation_duration episodes; its result has "
                          "policy_reward_mean per policy).")
    env_config = dict(trainer.config.get("env_config") or {})
    render_mode = "rgb_array" if args.video_dir else ("human" if args.render else None)
    if isinstance(env_name, str) and env_name in gym.registry and render_mode:
        env_config["render_mode"] = render_mode
    # The same preprocessing (Atari wrappers) the policy was trained with.
    env = make_env(env_name, EnvContext(env_config), trainer.config.get("preprocessor_pref"), trainer.config.get("model"))
    if args.video_dir:
        try:
            env = gym.wrappers.RecordVideo(env, args.video_dir, episode_trigger=lambda _: True, disable_logger=True)
        except gym.error.DependencyNotInstalled as exc:
            trainer.stop()
            raise RLStackError(f"--video-dir needs moviepy to write mp4 files: {pip_install('video')} ({exc})") from exc
    # --explore forces sampling; otherwise the merged config's `explore` decides (the
    # checkpoint's evaluation_config makes it greedy by default).
    explore = True if args.explore else None
    policy = trainer.get_policy()
    columns: dict[str, list] = {"obs": [], "actions": [], "rewards": [], "terminateds": [], "truncateds": [],
                                "new_obs": [], "eps_id": []}
    returns = []
    steps = 0
    episode = 0
    # A progress bar on a terminal (none when output is piped): episodes when --episodes
    # bounds the run, else steps.
    by_episode = bool(args.episodes)
    progress = tqdm(total=args.episodes if by_episode else (args.steps or None), unit="episode" if by_episode
                    else "step", desc="evaluate", disable=None, leave=False)
    try:
        while _keep_going(steps, args.steps, episode, args.episodes):
            obs, _ = env.reset(seed=None if args.seed is None else args.seed + episode)
            total, done = 0.0, False
            # A recurrent policy (use_lstm, use_attention) starts each episode from its
            # initial state and carries the state it returns from step to step, and the
            # previous action(s) and reward(s) if its model reads them.
            state, prev = policy.get_initial_state(), _episode_start_prev(policy)
            while not done and _keep_going(steps, args.steps, episode, args.episodes):
                if state:
                    action, state, _ = trainer.compute_single_action(
                        obs, state=state, prev_action=prev.get("prev_actions"), prev_reward=prev.get("prev_rewards"),
                        explore=explore)
                else:
                    action = trainer.compute_single_action(obs, explore=explore)
                next_obs, reward, terminated, truncated, _ = env.step(action)
                if prev:
                    policy.prev_inputs.push(prev, action, trainer.workers.local_worker().clip_rewards(reward))
                if args.out:
                    row = (obs, action, reward, terminated, truncated, next_obs, episode)
                    for key, value in zip(columns, row):
                        columns[key].append(value)
                total += float(reward)
                steps += 1
                if not by_episode:
                    progress.update()
                done = terminated or truncated
                obs = next_obs
            if done:  # an episode cut by --steps is not reported as one
                returns.append(total)
                progress.write(f"episode {episode + 1}: return {total:.2f}")
            episode += 1
            if by_episode:
                progress.update()
    except gym.error.DependencyNotInstalled as exc:
        raise RLStackError(
            f"Rendering {env_name!r} needs a package that is not installed: {exc}. For every rendering and "
            f"video dependency: {pip_install('video')}."
        ) from exc
    finally:
        progress.close()
        env.close()
        trainer.stop()
    if args.out:
        out = args.out if args.out.endswith(".npz") else args.out + ".npz"  # np.savez adds the suffix
        np.savez(out, **{key: np.asarray(value) for key, value in columns.items()})
        print(f"saved {steps} transitions to {out}")
    if returns:
        print(f"{len(returns)} episodes, {steps} steps, mean return {sum(returns) / len(returns):.2f}")
    else:
        print(f"no episode finished in {steps} steps")
    return 0


def _episode_start_prev(policy: Any) -> dict[str, Any]:
    # The previous actions / rewards a recurrent model reads at an episode's start, as
    # Trainer.compute_single_action takes them (env actions: zeros as the env sees them),
    # one row; {} for a model that reads none.
    spec = policy.prev_inputs
    prev = spec.zeros(1) if spec is not None else {}
    if "prev_actions" in prev:
        zeros = prev["prev_actions"]
        prev["prev_actions"] = policy.unsquash_actions(zeros.reshape(-1, *spec.action_shape)).reshape(zeros.shape)
    return prev


def _ls(args: argparse.Namespace) -> int:
    import gymnasium as gym

    from rlstack.compare import TUNE_CONFIGS, tuned_example_files
    from rlstack.env.registry import EXAMPLE_ENVS, registered_envs
    from rlstack.experiments import load_experiments
    from rlstack.trainers.common.registry import ALGORITHMS

    print("algorithms: " + ", ".join(sorted(ALGORITHMS)))
    print("built-in envs (config['env'] = name): " + ", ".join(sorted(EXAMPLE_ENVS)))
    custom = sorted(registered_envs())
    print("registered envs: " + (", ".join(custom) if custom else "(none in this process; see rlstack.register_env)"))
    print("tuned examples (rlstack train -f FILE, rlstack compare --examples NAME):")
    for path in tuned_example_files():
        experiments = load_experiments(str(path))
        for name, spec in experiments.items():
            stop = ", ".join(f"{key} {value}" for key, value in (spec.get("stop") or {}).items())
            label = path.stem if len(experiments) == 1 else f"{path.stem} ({name})"
            print(f"  {label:<44} {spec.get('run')} on {spec.get('env')}; stop: {stop}")
    print(f"  (files in {TUNE_CONFIGS})")
    ids = sorted(gym.registry)
    print(f"gymnasium envs ({len(ids)}): " + ", ".join(ids))
    return 0


def _plot(args: argparse.Namespace) -> int:
    from rlstack.plotting import plot_results

    axes = ("steps", "time") if args.x == "both" else (args.x,)
    try:
        paths = plot_results(args.results_dir, args.out, x=axes, metric=args.metric)
    except FileNotFoundError as err:
        raise RLStackError(str(err)) from err
    except KeyError as err:
        raise RLStackError(f"--metric / --x: {err.args[0]}") from err
    for path in paths:
        print(path)
    return 0


def _compare(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    from rlstack import compare

    if args.report_only:
        try:
            paths = compare.write_report(args.report_only, args.out, stop_reward=args.stop_reward)
        except FileNotFoundError as err:
            raise RLStackError(str(err)) from err
        table = compare.pd.read_csv(paths["csv"])
    else:
        algos = [a.strip() for a in (args.algos or "").split(",") if a.strip()]
        examples = [e.strip() for e in (args.examples or "").split(",") if e.strip()]
        frameworks = tuple(f.strip() for f in args.frameworks.split(",") if f.strip())
        for framework in frameworks:
            if framework not in ("torch", "tf", "tf2"):
                raise ConfigError(f"--frameworks: unknown framework {framework!r}; use torch, tf or both (torch,tf).")
        experiments, sources = compare.build_experiments(
            algos, examples, frameworks, args.seeds, args.env,
            _parse_json(args.stop, "--stop") if args.stop else None, _parse_json(args.config, "--config"))
        out = args.out or os.path.join(os.path.expanduser("~/ray_results"),
                                       "compare-" + time.strftime("%Y-%m-%d_%H-%M-%S"))
        args.ray_num_gpus = None
        _init_ray(args, experiments)
        table, paths = compare.compare(experiments, out, sources, verbose=1 + args.verbose, with_sb3=args.with_sb3)
    print()
    print(tabulate(table.fillna("-").to_dict("records"), headers="keys", tablefmt="github"))
    print()
    for path in paths.values():
        print(path)
    return 0


def _submit(args: argparse.Namespace) -> int:
    from rlstack import jobs

    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        raise ConfigError("No rlstack command to run; put it after '--', e.g. "
                          "rlstack submit --address http://HEAD:8265 -- train -f tune_configs/cartpole-ppo.yaml")
    # Parse the job's command here: a typo fails now, with its usage, not after the upload.
    build_parser().parse_args(command)
    runtime_env = _parse_json(args.runtime_env_json, "--runtime-env-json") if args.runtime_env_json else {}
    env_vars = {}
    for item in args.env or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--env takes KEY=VALUE, e.g. --env OMP_NUM_THREADS=1; got {item!r}.")
        env_vars[key] = value
    working_dir = args.working_dir
    if working_dir is None and "working_dir" not in runtime_env:
        working_dir = "."
    return jobs.submit(args.address, command, working_dir=working_dir, runtime_env=runtime_env,
                       no_wait=args.no_wait, env_vars=env_vars, force=args.force)


def _serve(args: argparse.Namespace) -> int:
    from rlstack.serve import serve_forever

    return serve_forever(args.checkpoint, env=args.env, policy_id=args.policy_id, explore=args.explore,
                         num_replicas=args.num_replicas, num_cpus_per_replica=args.num_cpus_per_replica,
                         route_prefix=args.route_prefix, host=args.host, port=args.port,
                         max_batch_size=args.max_batch_size, batch_wait_timeout_s=args.batch_wait_timeout_s,
                         max_body_bytes=args.max_body_bytes, ray_address=args.ray_address,
                         direct_ingress=args.direct_ingress)


_SERVE_DESCRIPTION = (
    "Serve a checkpoint's policy over HTTP on Ray Serve until Ctrl-C (or SIGTERM). POST a JSON body "
    "{\"obs\": OBS} (one observation as the env returns it; a Dict observation as an object, a Tuple one as a "
    "list) and get {\"actions\": ACTION}; {\"obs\": [OBS, ...], \"batch\": true} answers a list of actions. A "
    "recurrent policy (use_lstm) also takes \"state\" (default: the initial state) and answers \"state_out\". "
    "GET on the route describes the policy. Requests that arrive together are answered with one "
    "compute_actions call (up to --max-batch-size of them). Actions are greedy unless --explore."
)

_EVALUATE_DESCRIPTION = (
    "Play a checkpoint's policy in its env and print each episode's return. The config is the "
    "checkpoint's, with its evaluation_config and then --config merged over it (as in RLlib 1.x); "
    "actions are greedy unless that config or --explore says otherwise. Stops at whichever of "
    "--steps and --episodes is reached first (0: no limit)."
)


def _add_evaluate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("checkpoint", nargs="?",
                        help="a checkpoint directory written by an rlstack trainer (none: an untrained trainer of "
                             "--run on --env)")
    parser.add_argument("--run", help="the algorithm (read from the checkpoint; must match it when given)")
    parser.add_argument("--env", help="env to play in (default: the checkpoint's)")
    parser.add_argument("--steps", type=int, default=10000,
                        help="stop after this many steps in total (default 10000; 0: no limit)")
    parser.add_argument("--episodes", type=int, default=0,
                        help="stop after this many episodes (default 0: no limit)")
    parser.add_argument("--config", default="{}",
                        help="JSON config merged over the checkpoint's, e.g. '{\"explore\": true}'")
    render = parser.add_mutually_exclusive_group()
    render.add_argument("--render", action="store_true", help="render on screen (render_mode='human')")
    render.add_argument("--no-render", action="store_true",
                        help="do not render (the default; RLlib 1.x rendered unless given this flag)")
    parser.add_argument("--video-dir", help="record an mp4 per episode into this directory")
    parser.add_argument("--out", help="save the transitions to this .npz file (columns obs, actions, rewards, "
                                      "terminateds, truncateds, new_obs, eps_id; not 1.x's pickle)")
    parser.add_argument("--explore", action="store_true", help="sample actions instead of the greedy ones")
    parser.add_argument("--seed", type=int, help="seed of the first episode's reset (episode i: seed + i)")
    parser.add_argument("--local-mode", action="store_true",
                        help="accepted for 1.x scripts; rlstack plays in this process anyway (no Ray workers)")
    for flag in ("--save-info", "--use-shelve", "--track-progress"):
        parser.add_argument(flag, action="store_true", help=argparse.SUPPRESS)
    parser.set_defaults(func=_evaluate)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``rlstack`` command."""
    parser = argparse.ArgumentParser(
        prog="rlstack", description="Train reinforcement-learning agents on Ray. With no command: this help. "
        "`rlstack train` alone trains PPO on CartPole-v1.")
    parser.add_argument("--version", action="version", version=f"rlstack {__version__}")
    commands = parser.add_subparsers(dest="command")

    train = commands.add_parser("train", help="train on Ray Tune until a stop criterion holds")
    train.add_argument("--run", default="PPO", help="algorithm name (default: PPO)")
    train.add_argument("--env", default="CartPole-v1", help="env id or registered name (default: CartPole-v1)")
    train.add_argument("--stop", default='{"episode_reward_mean": 150, "timesteps_total": 100000}',
                       help="JSON stop criteria, e.g. '{\"episode_reward_mean\": 150}'")
    train.add_argument("--config", default="{}", help="JSON config overrides, e.g. '{\"lr\": 0.0003}' (with -f: "
                       "merged over each experiment's config)")
    train.add_argument("-f", "--config-file", help="YAML file of experiments (classic RLlib format)")
    train.add_argument("--framework", choices=["torch", "tf", "tf2"], help="override the config's framework")
    train.add_argument("--num-workers", type=int, help="override the config's num_workers")
    train.add_argument("--num-samples", type=int, help="trials per experiment (samples of the search space)")
    train.add_argument("--checkpoint-freq", type=int, help="checkpoint every N iterations")
    train.add_argument("--checkpoint-at-end", action="store_true", help="checkpoint when a trial ends (default on)")
    train.add_argument("--keep-checkpoints-num", type=int, help="keep only the N latest checkpoints per trial")
    train.add_argument("--restore", help="start the trials from this checkpoint")
    train.add_argument("--resume", action="store_true", help="resume an interrupted experiment of the same name")
    train.add_argument("--storage-path", help="where results go (default ~/ray_results)")
    train.add_argument("--local-dir", help="old name of --storage-path")
    train.add_argument("--ray-address", help="connect to this Ray cluster (e.g. auto) instead of starting one")
    train.add_argument("--ray-num-cpus", type=int, help="CPUs of the local Ray (default: enough for one trial)")
    train.add_argument("--ray-num-gpus", type=int, help="GPUs of the local Ray")
    train.add_argument("-v", "--verbose", action="count", default=0, help="-v: results as they come; -vv: more")
    train.set_defaults(func=_train)

    evaluate_help = "play episodes with a trained policy (RLlib 1.x's `rllib evaluate`)"
    for name, help_text in (("evaluate", evaluate_help), ("rollout", f"the same as evaluate ({evaluate_help[:-1]}'s "
                                                                    "older name `rllib rollout`)")):
        _add_evaluate_arguments(commands.add_parser(name, help=help_text, description=_EVALUATE_DESCRIPTION))

    ls = commands.add_parser("ls", help="list the algorithms, the envs known by name and the tuned examples")
    ls.set_defaults(func=_ls)

    plot = commands.add_parser(
        "plot", help="learning curves (PNG) of a trainer, trial or experiment directory",
        description="Draw mean +- std learning curves over seeds (one colour per algorithm, one line style per "
                    "framework) of every trial under RESULTS_DIR into learning_curve_<metric>_<x>.png files.")
    plot.add_argument("results_dir", help="a trainer's log directory, a Tune trial or experiment directory, or a "
                                          "directory above several")
    plot.add_argument("--x", choices=["steps", "time", "iterations", "both"], default="both",
                      help="x axis: env steps, wall time, iterations, or both steps and time (default)")
    plot.add_argument("--metric", default="episode_reward_mean",
                      help="result column on the y axis (nested keys with /, e.g. info/learner/default_policy/"
                           "learner_stats/entropy; default episode_reward_mean)")
    plot.add_argument("--out", help="where the PNGs go (default RESULTS_DIR)")
    plot.set_defaults(func=_plot)

    compare = commands.add_parser(
        "compare", help="train algorithms x frameworks x seeds on one env; table, curves and an HTML report",
        description="Train each algorithm (--algos, with its tuned example's hyper-parameters on --env when "
                    "tune_configs/ has one, else its defaults) or tuned example (--examples) in each framework with "
                    "each seed on Ray Tune, then write into --out: comparison.md/.csv (runs that reached the stop "
                    "reward, env steps and wall time to it, final return mean +- std, env steps/s, peak trainer "
                    "memory), learning_curve_*.png (mean +- std over seeds, against env steps and wall time) and "
                    "report.html holding both.")
    compare.add_argument("--algos", help="comma-separated algorithm names, e.g. PPO,IMPALA,DQN")
    compare.add_argument("--examples", help="comma-separated tuned examples: names in tune_configs/ "
                                            "(cartpole-ppo) or YAML files")
    compare.add_argument("--env", help="the env of --algos (and of --examples when given), e.g. CartPole-v1")
    compare.add_argument("--frameworks", default="torch,tf", help="comma-separated (default torch,tf)")
    compare.add_argument("--seeds", type=int, default=1, help="runs per algorithm and framework, seeds 0..N-1 "
                                                               "(default 1)")
    compare.add_argument("--stop", help="JSON stop criteria for every run (default: each tuned example's own), "
                                        "e.g. '{\"episode_reward_mean\": 150, \"timesteps_total\": 100000}'")
    compare.add_argument("--config", default="{}", help="JSON keys merged over every run's config")
    compare.add_argument("--with-sb3", action="store_true",
                         help="also train Stable-Baselines3's algorithm of the same name (PPO, A2C, DQN, SAC, TD3, "
                              "DDPG; RL-Zoo's hyper-parameters where it has them) per seed, as reference rows")
    compare.add_argument("--out", help="output directory (default ~/ray_results/compare-DATE)")
    compare.add_argument("--report-only", metavar="RESULTS_DIR",
                         help="train nothing: write the table, PNGs and HTML of the trials under RESULTS_DIR")
    compare.add_argument("--stop-reward", type=float, help="with --report-only: the reward counted as reached")
    compare.add_argument("--ray-address", help="connect to this Ray cluster (e.g. auto) instead of starting one")
    compare.add_argument("--ray-num-cpus", type=int, help="CPUs of the local Ray (default: this machine's)")
    compare.add_argument("-v", "--verbose", action="count", default=0, help="more of Tune's progress output")
    compare.set_defaults(func=_compare)

    submit = commands.add_parser(
        "submit", help="run an rlstack command as a Ray job on a cluster",
        description="Upload the working directory and run `python -m rlstack COMMAND...` as a Ray job; "
                    "follow its logs and exit 0 if it succeeded, 1 if it failed or was stopped. "
                    "On a cluster with token authentication, set RAY_AUTH_MODE=token and the token "
                    "(RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token) in this shell.",
        usage="rlstack submit [--address URL] [--working-dir DIR] [--no-wait] [--force] [--runtime-env-json JSON] "
              "[--env KEY=VALUE] -- COMMAND ...",
    )
    submit.add_argument("--address", help="the Ray Jobs API (dashboard) address, e.g. http://HEAD:8265 "
                                          "(default: RAY_API_SERVER_ADDRESS, RAY_ADDRESS, http://127.0.0.1:8265)")
    submit.add_argument("--working-dir", help="directory uploaded as the job's working directory; .gitignore, "
                                              ".rayignore, .git, .venv and __pycache__ are left out (default: .)")
    submit.add_argument("--runtime-env-json", help="more of the job's Ray runtime env as JSON, "
                                                   "e.g. '{\"pip\": [\"ale-py\"], \"env_vars\": {\"A\": \"1\"}}'")
    submit.add_argument("--env", action="append", metavar="KEY=VALUE", help="an environment variable for the job "
                                                                             "(repeatable)")
    submit.add_argument("--no-wait", action="store_true", help="submit, print the job id and return")
    submit.add_argument("--force", action="store_true", help="upload the working directory even when it is over "
                                                             "100 MiB or holds files named like secrets (.env, "
                                                             "*.pem, id_rsa*, credentials, ...)")
    submit.add_argument("command", nargs=argparse.REMAINDER,
                        help="after '--': the rlstack command the job runs, e.g. -- train -f x.yaml")
    submit.set_defaults(func=_submit)

    serve = commands.add_parser("serve", help="serve a trained policy over HTTP (Ray Serve) until Ctrl-C",
                                description=_SERVE_DESCRIPTION)
    serve.add_argument("checkpoint", help="a checkpoint directory written by an rlstack trainer")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; 0.0.0.0: "
                                                            "every interface)")
    serve.add_argument("--port", type=int, default=8000, help="port to listen on (default 8000)")
    serve.add_argument("--route-prefix", default="/", help="the endpoint's path (default /)")
    serve.add_argument("--num-replicas", type=int, default=1, help="replicas, each a process with the policy "
                                                                   "(default 1)")
    serve.add_argument("--num-cpus-per-replica", type=float, default=1.0,
                       help="CPUs Ray reserves per replica (default 1)")
    serve.add_argument("--max-batch-size", type=int, default=64,
                       help="most requests answered by one compute_actions call (default 64)")
    serve.add_argument("--batch-wait-timeout-s", type=float, default=0.002,
                       help="how long a batch waits for more requests (default 0.002)")
    serve.add_argument("--max-body-bytes", type=int, default=1 << 20,
                       help="largest request body accepted, larger ones get 413 (default 1048576)")
    serve.add_argument("--policy-id", default="default_policy",
                       help="the policy that acts (a multi-agent checkpoint: one of its policy ids)")
    serve.add_argument("--explore", action="store_true", help="sample actions instead of the greedy ones")
    serve.add_argument("--env", help="env to restore the trainer with, when the checkpoint's env was an object "
                                     "rather than a name (default: the checkpoint's)")
    serve.add_argument("--ray-address", help="connect to this Ray cluster (e.g. auto) instead of starting a local "
                                             "Ray")
    serve.add_argument("--direct-ingress", action="store_true",
                       help="Ray Serve's throughput-optimized mode (local Ray only): no proxy, each replica "
                            "answers HTTP itself on --port, --port + 1, ...")
    serve.set_defaults(func=_serve)

    migrate = commands.add_parser(
        "migrate", help="rewrite an RLlib 1.x project (Python and Tune YAML files) for rlstack",
        description="Rewrites RLlib 1.x Python and YAML files for rlstack: what is mechanical is rewritten "
                    "(ray.rllib -> rlstack by the migration rule, gym -> gymnasium, Ray 2.x's Tune and ray.init "
                    "changes, retired gym ids, numpy's removed aliases, gymnasium's reset/step where the env is "
                    "gym's, framework 'tf' where a TensorFlow file sets none) and what needs a person is listed "
                    "by file and line. Exit status: 0 nothing left for a person, 1 places listed (or, with "
                    "--check, files that would change), 2 usage errors.")
    migrate.add_argument("paths", nargs="+", metavar="PATH", help=".py / .yaml files, or folders searched for them")
    mode = migrate.add_mutually_exclusive_group()
    mode.add_argument("--diff", action="store_true", help="print a unified diff instead of writing the files")
    mode.add_argument("--check", action="store_true",
                      help="write nothing; exit 1 when a file would change or a place needs a person (for CI)")
    mode.add_argument("--out", metavar="DIR",
                      help="write the migrated copy of the folder to DIR (its other files copied beside it) and "
                           "leave the originals as they are")
    migrate.add_argument("--format", choices=("text", "json"), default="text",
                         help="json: print the whole report (every change and every place, by file and line) as "
                              "JSON on stdout")
    migrate.add_argument("--report", metavar="FILE",
                         help="also write the whole report (every change made, every place left) to FILE")
    migrate.add_argument("--no-check", action="store_true",
                         help="do not import the rewritten rlstack modules to report the names they lack")
    migrate.set_defaults(func=_migrate)
    return parser


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _migrate(args: argparse.Namespace) -> int:
    try:
        from rlstack.migrate import migrate_paths
    except ImportError as exc:
        raise ConfigError(f"rlstack migrate needs LibCST ({exc}); {pip_install('migrate')}.") from exc
    if args.out is not None:
        out = Path(args.out).resolve()
        for name in args.paths:
            named = Path(name).resolve()
            if out == named or named in out.parents:
                raise ConfigError(f"rlstack migrate --out {args.out}: that is inside {name}, the folder being "
                                  "migrated (a second run would migrate the copy too); name a folder outside it, "
                                  "or leave --out out to rewrite in place.")
    try:
        results = migrate_paths(args.paths, write=not (args.diff or args.check), check_names=not args.no_check,
                                out_dir=args.out)
    except FileNotFoundError as exc:
        raise ConfigError(str(exc)) from exc
    changed = [result for result in results if result.changed]
    findings = [finding for result in results for finding in result.findings]
    if args.format == "json":
        json.dump({"files": [result.as_dict() for result in results], "files_changed": len(changed),
                   "places_need_a_person": len(findings)}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        for result in results:
            if args.diff and result.changed:
                sys.stdout.write(result.diff())
            for finding in result.findings:
                print(finding, file=sys.stderr)
    if args.report:
        lines = []
        for result in results:
            for entry in sorted([*result.changes, *result.findings], key=lambda e: e.line):
                kind = "needs a person" if entry in result.findings else "changed"
                lines.append(f"{entry.path}:{entry.line}: {kind}: {entry.message}")
        Path(args.report).write_text("\n".join(lines) + "\n", encoding="utf-8")
    verb = "would change" if args.diff or args.check else "changed"
    where = f" (written under {args.out})" if args.out else ""
    summary = f"rlstack migrate: {verb} {len(changed)} of {_plural(len(results), 'file')}{where}"
    if findings:
        summary += f"; {_plural(len(findings), 'place')} {'needs' if len(findings) == 1 else 'need'} a person"
        summary += " (listed above)" if args.format == "text" else ""
    print(summary, file=sys.stderr)
    if findings or (args.check and changed):
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``rlstack`` command; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        return args.func(args)
    except RLStackError as exc:
        print(f"rlstack: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
