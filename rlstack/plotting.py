"""Learning-curve figures (``rlstack plot``): mean ± std over seeds, one colour per
algorithm, one line style per framework, against env steps or wall time.

Built on :func:`rlstack.analysis.curves`; matplotlib comes with the ``plot`` extra and
draws off-screen (Agg), so this works on machines without a display.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from rlstack import analysis
from rlstack.errors import RLStackError, pip_install

__all__ = ["plot_curves", "plot_results"]

LINE_STYLES = {"torch": "-", "tf": "--", "tf2": "-.", "": ":"}
X_LABELS = {"timesteps_total": "env steps", "time_total_s": "wall time (s)", "training_iteration": "iteration"}


def _pyplot():
    try:
        import matplotlib
    except ImportError as err:
        raise RLStackError(f"plots need matplotlib: {pip_install('plot')}") from err
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def plot_curves(frame: pd.DataFrame, path: str | os.PathLike, x: str = "steps",
                metric: str = "episode_reward_mean", title: str | None = None) -> Path:
    """Draws the learning curves of ``frame`` (what :func:`rlstack.analysis.load`
    returns) into the PNG file ``path`` and returns its path."""
    plt = _pyplot()
    column = analysis.X_AXES.get(x, x)
    data = analysis.curves(frame, x=column, metric=metric)
    algorithms = sorted(data["algorithm"].unique())
    colours = plt.get_cmap("tab10" if len(algorithms) <= 10 else "tab20")
    curves = data.groupby(["algorithm", "framework"], sort=True)
    many = curves.ngroups > 8  # the legend goes beside the axes rather than over the curves
    figure, axes = plt.subplots(figsize=(12 if many else 8, 5), dpi=110)
    for (algorithm, framework), curve in curves:
        colour = colours(algorithms.index(algorithm) % colours.N)
        trials = int(curve["trials"].iloc[0])
        label = f"{algorithm} ({framework or 'framework?'}), {trials} run{'s' if trials != 1 else ''}"
        # Markers where points are few: a run that reached its stop at its first report is
        # one point, which a line alone would not show.
        marker = "o" if len(curve) <= 12 else None
        axes.plot(curve["x"], curve["mean"], LINE_STYLES.get(framework, ":"), color=colour, label=label, linewidth=1.8,
                  marker=marker, markersize=4)
        if trials > 1:
            axes.fill_between(curve["x"], curve["mean"] - curve["std"], curve["mean"] + curve["std"], color=colour,
                              alpha=0.18, linewidth=0)
    axes.set_xlabel(X_LABELS.get(column, column))
    axes.set_ylabel(metric)
    axes.set_title(title or f"{metric} against {X_LABELS.get(column, column)} (mean ± std over runs)")
    axes.grid(alpha=0.3)
    if many:
        axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    else:
        axes.legend(loc="best", fontsize=9, frameon=False)
    figure.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    plt.close(figure)
    return path


def plot_results(results_dir: str | os.PathLike, out_dir: str | os.PathLike | None = None,
                 x: tuple[str, ...] = ("steps", "time"), metric: str = "episode_reward_mean") -> list[Path]:
    """Reads every trial under ``results_dir`` and writes one PNG per x axis
    (``learning_curve_<metric>_<x>.png``, into ``out_dir``, default ``results_dir``).

    Raises:
        FileNotFoundError: No results under ``results_dir``.
        KeyError: ``metric`` is not a result column (the message lists the ones there are).
    """
    frame = analysis.load(results_dir)
    out = Path(out_dir if out_dir is not None else results_dir).expanduser()
    name = metric.replace("/", "_")
    return [plot_curves(frame, out / f"learning_curve_{name}_{axis}.png", x=axis, metric=metric) for axis in x]
