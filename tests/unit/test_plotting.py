"""rlstack.analysis's tidy frames and learning curves, and the PNGs `rlstack plot` draws,
on result files written here (no training)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rlstack import analysis
from rlstack.cli import main
from rlstack.plotting import plot_results

pytest.importorskip("matplotlib")


def write_trial(root, name, framework, seed, slope, iterations=10):
    trial = root / name
    trial.mkdir(parents=True)
    with open(trial / "result.json", "w") as f:
        for i in range(1, iterations + 1):
            f.write(json.dumps({"training_iteration": i, "timesteps_total": 1000 * i, "time_total_s": 2.0 * i,
                                "episode_reward_mean": slope * i + seed, "info": {"learner": {"loss": 1.0 / i}},
                                "config": {"framework": framework, "seed": seed, "lr": 0.001}}) + "\n")


@pytest.fixture
def experiment(tmp_path):
    root = tmp_path / "exp"
    for algorithm, slope in (("PPO", 20.0), ("DQN", 10.0)):
        for framework in ("torch", "tf"):
            for seed in (0, 2):
                write_trial(root, f"{algorithm}_CartPole-v1_{framework}_{seed}", framework, seed, slope)
    return root


def test_the_frame_is_one_row_per_iteration_per_trial_with_config_columns(experiment):
    frame = analysis.load(experiment)
    assert len(frame) == 2 * 2 * 2 * 10
    assert {"trial", "algorithm", "framework", "seed", "config/lr", "info/learner/loss"} <= set(frame.columns)
    assert sorted(frame["algorithm"].unique()) == ["DQN", "PPO"]


def test_curves_average_the_seeds_of_each_algorithm_and_framework(experiment):
    curves = analysis.curves(analysis.load(experiment), x="steps", points=10)
    assert len(curves) == 4 * 10 and set(curves["trials"]) == {2}
    ppo = curves[(curves["algorithm"] == "PPO") & (curves["framework"] == "torch")]
    # Seeds 0 and 2 are 20 * i and 20 * i + 2: mean 20 * i + 1, std 1.
    np.testing.assert_allclose(ppo["mean"], 20.0 * ppo["x"] / 1000 + 1)
    np.testing.assert_allclose(ppo["std"], 1.0)
    with pytest.raises(KeyError, match="episode_reward_mean"):
        analysis.curves(analysis.load(experiment), metric="nope")


def test_plot_writes_a_png_per_x_axis(experiment, tmp_path, capsys):
    paths = plot_results(experiment, tmp_path / "figures")
    assert [p.name for p in paths] == ["learning_curve_episode_reward_mean_steps.png",
                                       "learning_curve_episode_reward_mean_time.png"]
    for path in paths:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000
    assert main(["plot", str(experiment), "--x", "time", "--metric", "info/learner/loss"]) == 0
    assert (experiment / "learning_curve_info_learner_loss_time.png").exists()
    assert main(["plot", str(tmp_path / "nothing")]) == 2
    assert "No result.json" in capsys.readouterr().err
