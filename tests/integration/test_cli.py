"""The `rlstack` command: train -f with a grid search on Tune, rollout, ls, and errors."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from rlstack.cli import main


def _rlstack(*args: str, cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rlstack", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd)


def test_train_grid_search_from_yaml_then_rollout(tmp_path):
    (tmp_path / "exp.yaml").write_text(textwrap.dedent(
        """
        tiny-grid:
            run: PPO
            env: CartPole-v1
            stop: {training_iteration: 2}
            checkpoint_freq: 1
            keep_checkpoints_num: 1
            config:
                num_workers: 0
                train_batch_size: 200
                sgd_minibatch_size: 100
                num_sgd_iter: 1
                model: {fcnet_hiddens: [8]}
                lr: {grid_search: [0.001, 0.0001]}
        """
    ))
    proc = _rlstack("train", "-f", "exp.yaml", "--storage-path", "results", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "TERMINATED" in proc.stdout and proc.stdout.count("tiny-grid") >= 2
    experiment = tmp_path / "results" / "tiny-grid"
    trials = [p for p in experiment.iterdir() if p.is_dir() and p.name.startswith("PPO_")]
    assert len(trials) == 2
    for trial in trials:
        assert (trial / "progress.csv").exists() and (trial / "result.json").exists()
        checkpoints = sorted(trial.glob("checkpoint_*"))
        assert len(checkpoints) == 1  # keep_checkpoints_num: 1
    checkpoint = sorted(trials[0].glob("checkpoint_*"))[0]

    proc = _rlstack("rollout", str(checkpoint), "--episodes", "2", "--video-dir", "videos", "--steps", "300",
                    cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    videos = sorted((tmp_path / "videos").glob("*.mp4"))
    assert len(videos) == 2 and all(v.stat().st_size > 1000 for v in videos)

    out = tmp_path / "transitions.npz"
    proc = _rlstack("rollout", str(checkpoint), "--episodes", "2", "--out", str(out), "--seed", "0", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "episode 2: return" in proc.stdout and "2 episodes" in proc.stdout
    with np.load(out, allow_pickle=False) as data:
        steps = len(data["rewards"])
        assert steps > 0 and data["obs"].shape == (steps, 4)
        assert data["terminateds"].sum() + data["truncateds"].sum() == 2


def test_ls_lists_algorithms_and_envs(capsys):
    assert main(["ls"]) == 0
    out = capsys.readouterr().out
    assert "algorithms: A2C, A3C, APEX, DQN, IMPALA, PPO" in out and "CartPole-v1" in out


@pytest.mark.parametrize(
    ("yaml", "fragment"),
    [
        ("e:\n  run: PPO\n  env: CartPole-v1\n  chekpoint_freq: 1\n", "Experiment key 'chekpoint_freq'"),
        ("e:\n  run: PP0\n  env: CartPole-v1\n", "Unknown algorithm 'PP0'"),
        ("e:\n  run: PPO\n  env: CartPole-v1\n  config: {lr_shedule: 1}\n", "Unknown config key 'lr_shedule' for PPO"),
        ("e:\n  run: PPO\n  env: CartPole-v1\n  stop: 150\n", "stop must be a dict"),
        ("e:\n  run: PPO\n  config: {lr: {uniform: 0.1}}\n", "uniform needs a list"),
    ],
)
def test_bad_yaml_is_a_clear_error(tmp_path, capsys, yaml, fragment):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml)
    assert main(["train", "-f", str(path)]) == 2
    assert fragment in capsys.readouterr().err
