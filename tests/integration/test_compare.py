"""`rlstack compare` end to end, reduced: two algorithms x two frameworks x two
seeds on CartPole for a few hundred steps; every file it writes and every row of its table."""

from __future__ import annotations

import base64
import json
import subprocess
import sys

import pandas as pd
import pytest

pytest.importorskip("matplotlib")
pytest.importorskip("tensorflow")


def test_compare_writes_table_curves_and_report_for_every_algorithm_framework_and_seed(tmp_path):
    out = tmp_path / "cmp"
    stop = {"episode_reward_mean": 15, "timesteps_total": 400}  # random CartPole play averages ~22
    completed = subprocess.run(
        [sys.executable, "-m", "rlstack", "compare", "--algos", "PPO,PG", "--frameworks", "torch,tf", "--seeds", "2",
         "--env", "CartPole-v1", "--stop", json.dumps(stop), "--out", str(out), "--ray-num-cpus", "2", "--with-sb3",
         "--config", json.dumps({"num_workers": 0, "train_batch_size": 200})],
        capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    for name in ("comparison.md", "comparison.csv", "learning_curve_episode_reward_mean_steps.png",
                 "learning_curve_episode_reward_mean_time.png", "report.html"):
        assert (out / name).stat().st_size > 0, name
        assert str(out / name) in completed.stdout
    table = pd.read_csv(out / "comparison.csv")
    assert sorted(zip(table["algorithm"], table["framework"])) == [("PG", "tf"), ("PG", "torch"), ("PPO", "tf"),
                                                                   ("PPO", "torch"), ("SB3-PPO", "torch")]
    assert set(table["runs"]) == {2} and set(table["reached"]) == {"2/2"}
    assert (table["env steps to reward"] > 0).all() and (table["env steps/s"] > 0).all()
    assert (table["peak trainer RSS (MB)"] > 50).all()
    # PPO's hyper-parameters came from its tuned example on CartPole-v1, PG's too.
    # (SB3's PPO, the reference row --with-sb3 adds, with RL-Zoo's hyper-parameters.)
    assert dict(zip(table["algorithm"], table["config"])) == {"PG": "cartpole-pg.yaml", "PPO": "cartpole-ppo.yaml",
                                                             "SB3-PPO": "RL-Zoo"}
    markdown = (out / "comparison.md").read_text()
    assert markdown.count("\n| P") == 4 and markdown.count("\n| SB3-PPO") == 1 and "env steps to reward" in markdown
    report = (out / "report.html").read_text()
    assert report.count("data:image/png;base64,") == 2 and report.count("<tr") == 6  # header + 5 rows
    png = report.split("data:image/png;base64,")[1].split('"')[0]
    assert base64.b64decode(png)[:8] == b"\x89PNG\r\n\x1a\n"
    # One Tune trial directory per algorithm, framework and seed.
    trials = sorted(p.parent.name.split("_")[0] for p in out.rglob("result.json"))
    assert trials == ["PG"] * 4 + ["PPO"] * 4 + ["SB3-PPO"] * 2


def test_report_only_redraws_a_finished_comparison_and_bad_input_is_named(tmp_path, capsys):
    from rlstack.cli import main

    assert main(["compare", "--algos", "NOPE", "--env", "CartPole-v1"]) == 2
    assert "NOPE" in capsys.readouterr().err
    assert main(["compare", "--examples", "no-such-example"]) == 2
    assert "no-such-example" in capsys.readouterr().err
    assert main(["compare", "--env", "CartPole-v1"]) == 2
    assert "--algos" in capsys.readouterr().err
    assert main(["compare", "--algos", "PPO", "--env", "CartPole-v1", "--frameworks", "jax"]) == 2
    assert "jax" in capsys.readouterr().err
    assert main(["compare", "--report-only", str(tmp_path / "empty")]) == 2
    assert "result.json" in capsys.readouterr().err
