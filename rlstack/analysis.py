"""Reading results back: ``rlstack.analysis.load(path)`` -> ``pandas.DataFrame``.

``path`` may be a trainer's log directory, a Tune trial directory, or a Tune experiment
directory (then one frame with a ``trial`` column for all its trials), or any directory
above several of those.

The frame is tidy: one row per training iteration per trial, every result key a column,
nested keys flattened with ``/`` (``info/learner/default_policy/learner_stats/entropy``, the trial's
config as ``config/lr``...), plus ``trial`` (the trial's directory name), ``algorithm``
(its ``run`` name: the directory name up to the first ``_``), ``framework``, ``seed`` and
``env`` (from its config: the result rows' or ``params.json``). :func:`curves` turns it into mean ± std learning curves over seeds,
which ``rlstack plot`` draws (rlstack/plotting.py)::

    frame = rlstack.analysis.load("~/ray_results/my-experiment")
    frame.groupby(["algorithm", "framework"])["episode_reward_mean"].max()
    curves = rlstack.analysis.curves(frame, x="timesteps_total")
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd

from rlstack.trainers.common.result_logger import flatten


def _env_name(env: object) -> str:
    # "CartPole-v1", or a class's name where the config held a class ("<class 'a.b.Env'>").
    text = str(env)
    if text.startswith("<class '"):
        return text[len("<class '"):].rstrip("'>").rsplit(".", 1)[-1]
    return text


def _params(directory: Path) -> dict:
    # The trial's config: params.json, which Tune and standalone trainers write beside
    # result.json (whose rows carry a config only under Tune).
    try:
        with open(directory / "params.json") as f:
            params = json.load(f)
    except (OSError, ValueError):
        return {}
    return params if isinstance(params, dict) else {}


def _load_trial(directory: Path) -> pd.DataFrame:
    params = _params(directory)
    rows = []
    with open(directory / "result.json") as f:
        for line in f:
            line = line.strip()
            if line:
                result = json.loads(line)
                row = flatten(result)
                config = result.get("config") if isinstance(result.get("config"), dict) else params
                row.update(flatten(config, "config/"))  # flatten() leaves a result's config out
                rows.append(row)
    frame = pd.DataFrame(rows)
    frame.insert(0, "trial", directory.name)
    frame.insert(1, "algorithm", directory.name.split("_", 1)[0])
    frame.insert(2, "framework", frame["config/framework"] if "config/framework" in frame else None)
    frame.insert(3, "seed", frame["config/seed"] if "config/seed" in frame else None)
    frame.insert(4, "env", frame["config/env"].map(_env_name) if "config/env" in frame else None)
    return frame


def load(path: str | os.PathLike) -> pd.DataFrame:
    """Loads every result under ``path`` into one DataFrame, one row per iteration.

    Nested keys are flattened with ``/`` (``info/learner/default_policy/...``).

    Raises:
        FileNotFoundError: If no ``result.json`` is found under ``path``.
    """
    root = Path(path).expanduser()
    if (root / "result.json").exists():
        return _load_trial(root)
    trials = sorted({p.parent for p in root.rglob("result.json")})
    if not trials:
        raise FileNotFoundError(f"No result.json under {str(root)!r}: not a trainer, trial or experiment directory.")
    return pd.concat([_load_trial(t) for t in trials], ignore_index=True)


# The x axes curves() and `rlstack plot` know, by their short names.
X_AXES = {"steps": "timesteps_total", "time": "time_total_s", "iterations": "training_iteration"}


def curves(frame: pd.DataFrame, x: str = "timesteps_total", metric: str = "episode_reward_mean",
           points: int = 100) -> pd.DataFrame:
    """Learning curves, mean ± std over the trials (seeds) of each algorithm and framework.

    Each trial's ``metric`` is interpolated onto a common grid of ``points`` values of
    ``x`` from the smallest to the largest ``x`` every trial of the group reached, so each
    point averages all of them.

    Args:
        frame: What :func:`load` returned.
        x: A column (or ``"steps"``, ``"time"``, ``"iterations"``).
        metric: The column on the y axis.
        points: Grid points per curve.

    Returns:
        Columns ``algorithm``, ``framework``, ``x``, ``mean``, ``std`` (0 for one trial),
        ``trials``.

    Raises:
        KeyError: ``x`` or ``metric`` is not a column; the message lists the ones there are.
    """
    x = X_AXES.get(x, x)
    for column in (x, metric):
        if column not in frame:
            numeric = sorted(c for c in frame.columns if pd.api.types.is_numeric_dtype(frame[c]) and "/" not in c)
            raise KeyError(f"no column {column!r} in the results; top-level numeric columns: {numeric}")
    rows = []
    keys = frame.reindex(columns=["algorithm", "framework", "env"]).fillna("").astype(str)
    if keys["env"].nunique() > 1:  # several envs: one curve per algorithm and env
        keys["algorithm"] = keys["algorithm"] + " on " + keys["env"]
    for (algorithm, framework), group in frame.groupby([keys["algorithm"], keys["framework"]], sort=True):
        trials = [t[[x, metric]].dropna().sort_values(x) for _, t in group.groupby("trial")]
        trials = [t for t in trials if len(t)]
        if not trials:
            continue
        low = max(float(t[x].iloc[0]) for t in trials)
        high = min(float(t[x].iloc[-1]) for t in trials)
        grid = np.linspace(low, high, points) if high > low else np.array([high])
        values = np.stack([np.interp(grid, t[x].to_numpy(float), t[metric].to_numpy(float)) for t in trials])
        for k, at in enumerate(grid):
            rows.append({"algorithm": algorithm, "framework": framework, "x": float(at),
                         "mean": float(values[:, k].mean()), "std": float(values[:, k].std()),
                         "trials": len(trials)})
    return pd.DataFrame(rows, columns=["algorithm", "framework", "x", "mean", "std", "trials"])
