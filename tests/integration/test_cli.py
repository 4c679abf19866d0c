"""The `rlstack` command: train -f with a grid search on Tune, rollout, ls, and errors."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from rlstack.cli import main
from rlstack.trainers.common.registry import ALGORITHMS


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
                seed: 0
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

    # Two CartPole-v1 episodes end within 1,000 steps (500 at most each), whatever the policy learned.
    proc = _rlstack("rollout", str(checkpoint), "--episodes", "2", "--video-dir", "videos", "--steps", "1000",
                    "--seed", "0", cwd=tmp_path)
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


def test_ls_lists_algorithms_built_in_envs_and_the_tuned_examples(capsys):
    assert main(["ls"]) == 0
    out = capsys.readouterr().out
    assert "algorithms: " + ", ".join(sorted(ALGORITHMS)) + "\n" in out and "CartPole-v1" in out
    assert "built-in envs (config['env'] = name): " in out
    for env in ("StatelessCartPole", "MultiAgentCartPole", "RockPaperScissors", "RepeatAfterMeEnv"):
        assert env in out
    assert "  cartpole-ppo " in out and "PPO on CartPole-v1; stop: episode_reward_mean 150" in out
    assert "cartpole-appo (cartpole-appo-gae)" in out


def test_the_tuned_examples_ship_inside_the_package_and_their_absence_is_an_error(monkeypatch, tmp_path):
    import rlstack.compare as compare
    from rlstack.errors import ConfigError

    assert compare.TUNE_CONFIGS.parent == Path(compare.__file__).parent
    assert (compare.TUNE_CONFIGS / "cartpole-ppo.yaml").is_file()
    monkeypatch.setattr(compare, "TUNE_CONFIGS", tmp_path / "tune_configs")
    with pytest.raises(ConfigError, match="tuned examples are missing: no YAML file in .*reinstall"):
        compare.tuned_example_files()
    assert main(["ls"]) == 2


def test_bare_rlstack_prints_its_help_and_version_says_the_version(tmp_path):
    import rlstack

    bare = _rlstack(cwd=tmp_path)
    assert bare.returncode == 0, bare.stderr
    assert bare.stdout.startswith("usage: rlstack") and "train" in bare.stdout and "migrate" in bare.stdout
    version = _rlstack("--version", cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.strip() == f"rlstack {rlstack.__version__}"


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


# ----- evaluate / rollout with 1.x's flags ------------------------------------------------------

@pytest.fixture(scope="module")
def ppo_checkpoint(ray_local, tmp_path_factory):
    """A PPO checkpoint after one tiny training iteration."""
    from rlstack.trainers.ppo import PPOTrainer

    trainer = PPOTrainer({"num_workers": 0, "train_batch_size": 200, "sgd_minibatch_size": 64, "num_sgd_iter": 2,
                          "model": {"fcnet_hiddens": [16]}, "framework": "torch"}, "CartPole-v1")
    trainer.train()
    path = trainer.save(str(tmp_path_factory.mktemp("ckpt")))
    trainer.stop()
    return str(getattr(path, "path", path))


def test_evaluate_plays_episodes_and_writes_episode_columns(ppo_checkpoint, tmp_path, capsys):
    out = tmp_path / "rollouts"
    assert main(["evaluate", ppo_checkpoint, "--run", "PPO", "--env", "CartPole-v1", "--episodes", "3",
                 "--no-render", "--out", str(out), "--seed", "0"]) == 0
    stdout = capsys.readouterr().out
    assert "episode 3: return" in stdout and "3 episodes" in stdout and f"to {out}.npz" in stdout
    with np.load(f"{out}.npz", allow_pickle=False) as data:
        assert sorted(set(data["eps_id"].tolist())) == [0, 1, 2]
        assert data["terminateds"].sum() + data["truncateds"].sum() == 3
        first = data["eps_id"] == 0
        # new_obs is the next row's obs within an episode.
        np.testing.assert_array_equal(data["new_obs"][first][:-1], data["obs"][first][1:])
        assert data["rewards"].sum() == len(data["rewards"])  # CartPole: 1 per step


def test_evaluate_stops_at_steps_and_episodes_zero_means_no_limit(ppo_checkpoint, tmp_path, capsys):
    out = tmp_path / "steps.npz"
    assert main(["evaluate", ppo_checkpoint, "--steps", "30", "--episodes", "0", "--out", str(out)]) == 0
    with np.load(out, allow_pickle=False) as data:
        assert len(data["rewards"]) == 30
    # The older name takes the same flags.
    assert main(["rollout", ppo_checkpoint, "--steps", "0", "--episodes", "1", "--out", str(out)]) == 0
    assert "1 episodes" in capsys.readouterr().out


def test_evaluate_config_merges_over_the_checkpoint_and_its_evaluation_config(ppo_checkpoint):
    from rlstack.cli import _build_trainer, build_parser

    trainer, env = _build_trainer(build_parser().parse_args(["evaluate", ppo_checkpoint]))
    try:
        # The checkpoint's evaluation_config ({"explore": False}) applies, as in 1.x.
        assert trainer.config["explore"] is False and env == "CartPole-v1" and trainer.iteration == 1
        assert trainer.config["model"]["fcnet_hiddens"] == [16] and trainer.config["num_workers"] == 0
    finally:
        trainer.stop()
    args = build_parser().parse_args(["evaluate", ppo_checkpoint, "--config", '{"explore": true, "gamma": 0.5}'])
    trainer, _ = _build_trainer(args)
    try:
        assert trainer.config["explore"] is True and trainer.config["gamma"] == 0.5
        assert trainer.config["train_batch_size"] == 200  # the rest is the checkpoint's
    finally:
        trainer.stop()


def test_evaluate_without_a_checkpoint_plays_an_untrained_trainer(ray_local, capsys):
    assert main(["evaluate", "--run", "PPO", "--env", "CartPole-v1", "--episodes", "1",
                 "--config", '{"model": {"fcnet_hiddens": [8]}}']) == 0
    assert "1 episodes" in capsys.readouterr().out


@pytest.mark.parametrize(("extra", "fragment"), [
    (["--run", "DQN"], "--run DQN does not match the checkpoint, which PPO wrote"),
    (["--use-shelve"], "--use-shelve (RLlib 1.x's"),
    (["--config", "[1]"], "--config must be a JSON object"),
])
def test_evaluate_errors_say_what_to_do(ppo_checkpoint, capsys, extra, fragment):
    assert main(["evaluate", ppo_checkpoint, *extra]) == 2
    assert fragment in capsys.readouterr().err


def test_render_and_no_render_exclude_each_other(ppo_checkpoint):
    with pytest.raises(SystemExit):
        main(["evaluate", ppo_checkpoint, "--render", "--no-render"])


def test_untrained_trainer_acts_greedily_unless_config_says_explore(ray_local):
    from rlstack.cli import _build_trainer, build_parser

    for extra, explore in (([], False), (["--config", '{"explore": true}'], True)):
        args = build_parser().parse_args(["evaluate", "--run", "PPO", "--env", "CartPole-v1", *extra])
        trainer, env = _build_trainer(args)
        try:
            assert trainer.config["explore"] is explore and env == "CartPole-v1"
        finally:
            trainer.stop()
