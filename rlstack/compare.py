"""``rlstack compare``: several algorithms, frameworks and seeds on one problem, then a
table, learning-curve PNGs and one self-contained HTML report.

What runs is a set of experiments built by :func:`build_experiments`: each algorithm
(``--algos``) or tuned example (``--examples``, a name in ``tune_configs/`` or a YAML
file) becomes one Tune experiment whose trials are the grid frameworks × seeds, so Tune
runs as many of them side by side as the machine's CPUs hold. An algorithm given by name
takes the hyper-parameters of the tuned example that trains it on that env, when
``tune_configs/`` has one, and its defaults otherwise (the table says which).

Everything lands in one directory (``--out``)::

    <out>/<experiment>/<trial>/...     Tune's results, one experiment per algorithm
    <out>/sb3/SB3-<ALGO>_<env>_seed<k>  with --with-sb3: Stable-Baselines3's reference runs
    <out>/comparison.md, .csv          the table (also printed)
    <out>/learning_curve_*.png         mean ± std over seeds, against env steps and wall time
    <out>/report.html                  the table and the curves in one file (PNGs inlined)

:func:`summarize` and :func:`write_report` work on any results directory, so a comparison
can be re-drawn without training again (``rlstack compare --report-only DIR``).
"""

from __future__ import annotations

import base64
import copy
import datetime
import html
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rlstack import analysis
from rlstack.errors import ConfigError, pip_install

__all__ = ["TUNE_CONFIGS", "build_experiments", "summarize", "write_report", "compare"]

# The tuned examples ship inside the package (a checkout's top-level tune_configs/ points here).
TUNE_CONFIGS = Path(__file__).resolve().parent / "tune_configs"

TABLE_COLUMNS = ["algorithm", "framework", "runs", "reached", "env steps to reward", "time to reward (s)",
                 "final return", "env steps/s", "peak trainer RSS (MB)", "config"]


def tuned_example_files() -> list[Path]:
    """The tuned examples' YAML files; an install without them is broken, and saying so
    beats comparing at defaults the user did not ask for."""
    files = sorted(TUNE_CONFIGS.glob("*.yaml"))
    if not files:
        raise ConfigError(f"rlstack's tuned examples are missing: no YAML file in {TUNE_CONFIGS}. The package was "
                          "installed without its data files; reinstall it "
                          f"({pip_install('torch', '--force-reinstall')}).")
    return files


def _tuned_examples() -> list[tuple[Path, str, dict[str, Any]]]:
    from rlstack.experiments import load_experiments

    return [(path, name, spec) for path in tuned_example_files()
            for name, spec in load_experiments(str(path)).items()]


def _example(name_or_path: str) -> tuple[str, dict[str, Any], str]:
    """``(experiment name, spec, where)`` of a tuned example given by name or file."""
    from rlstack.experiments import load_experiments

    path = Path(name_or_path).expanduser()
    if not path.suffix:
        path = TUNE_CONFIGS / f"{name_or_path}.yaml"
    if not path.is_file():
        known = [p.stem for p in tuned_example_files()]
        raise ConfigError(f"--examples: no tuned example {name_or_path!r} (neither a YAML file nor a name in "
                          f"{TUNE_CONFIGS}); known names: {', '.join(known) or 'none'}.")
    experiments = load_experiments(str(path))
    if len(experiments) != 1:
        raise ConfigError(f"--examples: {path} holds {len(experiments)} experiments ({', '.join(experiments)}); "
                          "compare takes files of one experiment each.")
    (name, spec), = experiments.items()
    return name, copy.deepcopy(dict(spec)), path.name


def _tuned_for(algorithm: str, env: str) -> tuple[dict[str, Any], dict[str, Any], str] | None:
    """The config and stop of the tuned example of ``algorithm`` on ``env``, if any."""
    for path, _, spec in _tuned_examples():
        config = spec.get("config") or {}
        if (str(spec.get("run")).upper() == algorithm.upper() and spec.get("env") == env
                and "multiagent" not in config and config.get("input", "sampler") == "sampler"
                and not config.get("num_gpus") and not config.get("model", {}).get("use_lstm")):
            return copy.deepcopy(config), dict(spec.get("stop") or {}), path.name
    return None


# The longest an iteration runs in a comparison unless the config says otherwise.
REPORT_EVERY_S = 2


def build_experiments(algos: list[str] | None = None, examples: list[str] | None = None,
                      frameworks: tuple[str, ...] = ("torch", "tf"), seeds: int = 1, env: str | None = None,
                      stop: dict[str, Any] | None = None, config: dict[str, Any] | None = None,
                      ) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """The Tune experiments of a comparison and, per experiment, where its config came from.

    Args:
        algos: Algorithm names (``PPO``...), each trained on ``env``.
        examples: Tuned examples by name (``cartpole-ppo``) or YAML file.
        frameworks: Every experiment runs in each (a grid over ``framework``).
        seeds: Seeds 0 .. seeds-1 (a grid over ``seed``).
        env: The env of ``algos`` (and of the examples, when given).
        stop: Stop criteria for every experiment; default: each tuned example's own.
        config: Keys merged over every experiment's config.

    Raises:
        ConfigError: Nothing to run, an unknown algorithm or example, no stop criterion.
    """
    from rlstack.trainers.common.registry import get_trainer_class

    if not algos and not examples:
        raise ConfigError("compare needs --algos (e.g. PPO,IMPALA,DQN) or --examples (e.g. cartpole-ppo).")
    if seeds < 1:
        raise ConfigError(f"--seeds must be at least 1, got {seeds}.")
    if not frameworks:
        raise ConfigError("--frameworks needs at least one of torch, tf.")
    experiments: dict[str, dict[str, Any]] = {}
    sources: dict[str, str] = {}
    for algorithm in algos or []:
        trainer = get_trainer_class(algorithm)  # ConfigError naming the algorithms there are
        if not env:
            raise ConfigError("--algos needs --env (e.g. --env CartPole-v1).")
        tuned = _tuned_for(algorithm, env)
        base, tuned_stop, source = tuned if tuned else ({}, {}, f"{trainer._name} defaults")
        spec = {"run": algorithm, "env": env, "config": base, "stop": stop or tuned_stop}
        experiments[f"{algorithm.lower()}-{env}"] = spec
        sources[f"{algorithm.lower()}-{env}"] = source
    for example in examples or []:
        name, spec, source = _example(example)
        if env:
            spec["env"] = env
        if stop:
            spec["stop"] = stop
        experiments[name] = spec
        sources[name] = source
    for name, spec in experiments.items():
        if not spec.get("stop"):
            raise ConfigError(f"{name}: no stop criterion (its algorithm has no tuned example on this env); give "
                              "--stop, e.g. '{\"episode_reward_mean\": 150, \"timesteps_total\": 100000}'.")
        merged = {**(spec.get("config") or {}), **(config or {})}
        # Points for the curves: asynchronous algorithms report every 10-30 s by default
        # (IMPALA, APPO, A3C, Ape-X), so a run that reaches the bar in 10 s is one point.
        # How often an iteration ends changes when results are read, not what is learned.
        merged.setdefault("min_time_s_per_reporting", REPORT_EVERY_S)
        merged["framework"] = {"grid_search": list(frameworks)}
        merged["seed"] = {"grid_search": list(range(seeds))}
        spec["config"] = merged
        spec["checkpoint_at_end"] = False
    return experiments, sources


def _first_reaching(trial: pd.DataFrame, metric: str, bar: float) -> pd.Series | None:
    reached = trial[trial[metric] >= bar] if metric in trial else trial.iloc[0:0]
    return reached.iloc[0] if len(reached) else None


def summarize(frame: pd.DataFrame, stop_reward: float | None = None, metric: str = "episode_reward_mean",
              sources: dict[str, str] | None = None) -> pd.DataFrame:
    """One row per algorithm and framework: how many runs reached ``stop_reward`` and the
    mean env steps and wall time they took to, the final ``metric`` (mean ± std over the
    runs), env steps/s and the trainer process's peak RSS (``perf/rss_mb``).

    ``sources`` maps an algorithm (as in the frame) to where its config came from."""
    rows = []
    keys = frame.reindex(columns=["algorithm", "framework"]).fillna("").astype(str)
    for (algorithm, framework), group in frame.groupby([keys["algorithm"], keys["framework"]], sort=True):
        trials = [t.sort_values("training_iteration") for _, t in group.groupby("trial")]
        firsts = [_first_reaching(t, metric, stop_reward) for t in trials] if stop_reward is not None else []
        firsts = [f for f in firsts if f is not None]
        finals = np.array([float(t[metric].dropna().iloc[-1]) if t[metric].notna().any() else np.nan
                           for t in trials]) if metric in group else np.array([np.nan])
        speeds = [float(t["timesteps_total"].iloc[-1]) / float(t["time_total_s"].iloc[-1])
                  for t in trials if "time_total_s" in t and float(t["time_total_s"].iloc[-1]) > 0]
        rss = group["perf/rss_mb"].max() if "perf/rss_mb" in group else np.nan
        rows.append({
            "algorithm": algorithm,
            "framework": framework,
            "runs": len(trials),
            "reached": f"{len(firsts)}/{len(trials)}" if stop_reward is not None else "-",
            "env steps to reward": round(float(np.mean([f["timesteps_total"] for f in firsts]))) if firsts else None,
            "time to reward (s)": round(float(np.mean([f["time_total_s"] for f in firsts])), 1) if firsts else None,
            "final return": (f"{np.nanmean(finals):.1f} ± {np.nanstd(finals):.1f}"
                             if np.isfinite(finals).any() else None),
            "env steps/s": round(float(np.mean(speeds))) if speeds else None,
            "peak trainer RSS (MB)": round(float(rss)) if np.isfinite(rss) else None,
            "config": (sources or {}).get(algorithm, ""),
        })
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)


def _markdown(table: pd.DataFrame) -> str:
    from tabulate import tabulate

    return tabulate(table.fillna("-").to_dict("records"), headers="keys", tablefmt="github")


def write_report(results_dir: str | os.PathLike, out_dir: str | os.PathLike | None = None,
                 stop_reward: float | None = None, metric: str = "episode_reward_mean",
                 sources: dict[str, str] | None = None, title: str | None = None) -> dict[str, Path]:
    """Writes the table (Markdown, CSV), the learning-curve PNGs (env steps, wall time)
    and ``report.html`` of every trial under ``results_dir`` into ``out_dir`` (default
    ``results_dir``); returns their paths by kind (``markdown``, ``csv``, ``png_steps``,
    ``png_time``, ``html``)."""
    from rlstack.plotting import plot_curves

    frame = analysis.load(results_dir)
    out = Path(out_dir if out_dir is not None else results_dir).expanduser()
    out.mkdir(parents=True, exist_ok=True)
    table = summarize(frame, stop_reward, metric, sources)
    paths: dict[str, Path] = {"markdown": out / "comparison.md", "csv": out / "comparison.csv"}
    paths["markdown"].write_text(_markdown(table) + "\n")
    table.to_csv(paths["csv"], index=False)
    name = metric.replace("/", "_")
    for axis in ("steps", "time"):
        paths[f"png_{axis}"] = plot_curves(frame, out / f"learning_curve_{name}_{axis}.png", x=axis, metric=metric)
    envs = sorted(frame["env"].dropna().astype(str).unique()) if "env" in frame else []
    title = title or f"rlstack comparison on {', '.join(envs) or 'its envs'}"
    images = "\n".join(
        f'<figure><img alt="{metric} against {axis}" src="data:image/png;base64,'
        f'{base64.b64encode(paths[f"png_{axis}"].read_bytes()).decode()}"><figcaption>{html.escape(metric)} '
        f'against {"env steps" if axis == "steps" else "wall time"}, mean ± std over seeds</figcaption></figure>'
        for axis in ("steps", "time"))
    bar = f"reached: runs whose {html.escape(metric)} reached {stop_reward:g}; " if stop_reward is not None else ""
    paths["html"] = out / "report.html"
    paths["html"].write_text(f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:1300px}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}}img{{max-width:100%}}</style></head>
<body><h1>{html.escape(title)}</h1>
<p>{len(frame["trial"].unique())} runs from {html.escape(str(Path(results_dir).expanduser()))},
written {datetime.datetime.now().strftime("%Y-%m-%d %H:%M")}. {bar}steps and time to the reward are means over
the runs that reached it; final return is mean ± std over all runs; config: the tuned example or defaults used.</p>
{table.fillna("-").to_html(index=False, escape=True)}
{images}
</body></html>
""")
    return paths


def compare(experiments: dict[str, dict[str, Any]], out_dir: str | os.PathLike, sources: dict[str, str],
            verbose: int = 1, with_sb3: bool = False) -> tuple[pd.DataFrame, dict[str, Path]]:
    """Runs the experiments (Ray already started) with their results under ``out_dir``,
    then writes the report there. Returns the table and the report's paths.

    ``with_sb3``: also trains Stable-Baselines3's algorithm of the same name (PPO, A2C,
    DQN, SAC, TD3, DDPG) with each seed on the same env and stop criteria, as reference
    rows ``SB3-<ALGO>`` (rlstack/compare_sb3.py)."""
    from tqdm import tqdm

    from rlstack import compare_sb3
    from rlstack.experiments import run_experiments, validate_experiments

    validate_experiments(experiments)
    sb3_runs = []
    if with_sb3:
        for spec in experiments.values():
            if compare_sb3.check_available([spec["run"]], spec["stop"]):
                sb3_runs += [(spec["run"].upper(), spec["env"], seed, spec["stop"])
                             for seed in spec["config"]["seed"]["grid_search"]]
    out = Path(out_dir).expanduser().resolve()
    out.mkdir(parents=True, exist_ok=True)
    rewards = {spec["stop"].get("episode_reward_mean") for spec in experiments.values()}
    stop_reward = rewards.pop() if len(rewards) == 1 else None
    by_algorithm = {spec["run"]: sources[name] for name, spec in experiments.items()}
    with tqdm(total=len(experiments) + len(sb3_runs), desc="compare", unit="run", disable=None) as progress:
        for name, spec in experiments.items():
            progress.set_postfix_str(name)
            run_experiments({name: spec}, verbose=verbose, storage_path=str(out))
            progress.update()
        for algorithm, env, seed, stop in sb3_runs:
            progress.set_postfix_str(f"SB3 {algorithm} seed {seed}")
            compare_sb3.run(algorithm, env, seed, stop, out)
            by_algorithm[f"SB3-{algorithm}"] = compare_sb3.source(algorithm, env)
            progress.update()
    paths = write_report(out, stop_reward=stop_reward, sources=by_algorithm)
    return pd.read_csv(paths["csv"]), paths
