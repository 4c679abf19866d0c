"""The comparison table of `rlstack compare` on result files written here: what
'reached', steps and time to the reward, final return and speed mean for each row."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from rlstack import analysis
from rlstack.compare import build_experiments, summarize
from rlstack.errors import ConfigError


def write_trial(root, name, framework, seed, rewards, rss=100.0):
    trial = root / name
    trial.mkdir(parents=True)
    with open(trial / "result.json", "w") as f:
        for i, reward in enumerate(rewards, 1):
            f.write(json.dumps({"training_iteration": i, "timesteps_total": 1000 * i, "time_total_s": 4.0 * i,
                                "episode_reward_mean": reward, "perf": {"rss_mb": rss + i},
                                "config": {"framework": framework, "seed": seed}}) + "\n")


def test_rows_count_the_runs_that_reached_the_reward_and_average_what_they_took(tmp_path):
    write_trial(tmp_path, "PPO_CartPole-v1_a", "torch", 0, [20, 160, 180])       # reached at 2,000 steps
    write_trial(tmp_path, "PPO_CartPole-v1_b", "torch", 1, [20, 40, 150, 170])   # at 3,000
    write_trial(tmp_path, "DQN_CartPole-v1_c", "torch", 0, [10, 20, 30], rss=300)  # never
    table = summarize(analysis.load(tmp_path), stop_reward=150, sources={"PPO": "cartpole-ppo.yaml"})
    ppo = table[table["algorithm"] == "PPO"].iloc[0]
    assert (ppo["runs"], ppo["reached"], ppo["env steps to reward"], ppo["time to reward (s)"]) == (2, "2/2", 2500, 10.0)
    assert ppo["final return"] == "175.0 ± 5.0" and ppo["env steps/s"] == 250
    assert ppo["peak trainer RSS (MB)"] == 104 and ppo["config"] == "cartpole-ppo.yaml"
    dqn = table[table["algorithm"] == "DQN"].iloc[0]
    assert dqn["reached"] == "0/1" and pd.isna(dqn["env steps to reward"]) and dqn["peak trainer RSS (MB)"] == 303


def test_experiments_grid_frameworks_and_seeds_and_take_the_tuned_hyper_parameters():
    experiments, sources = build_experiments(["PPO", "DQN"], None, ("torch", "tf"), 3, "CartPole-v1")
    ppo = experiments["ppo-CartPole-v1"]
    assert ppo["config"]["framework"] == {"grid_search": ["torch", "tf"]}
    assert ppo["config"]["seed"] == {"grid_search": [0, 1, 2]}
    assert ppo["stop"]["episode_reward_mean"] == 150 and sources["ppo-CartPole-v1"] == "cartpole-ppo.yaml"
    # Every run reports at least every 2 s, so an IMPALA run that reaches the bar in 10 s
    # still draws a curve; a config that sets the key keeps its own.
    assert ppo["config"]["min_time_s_per_reporting"] == 2
    experiments, sources = build_experiments(["PPO"], None, ("torch",), 1, "Pendulum-v1",
                                             stop={"timesteps_total": 1000},
                                             config={"lr": 0.01, "min_time_s_per_reporting": 10})
    (spec,) = experiments.values()
    assert spec["stop"] == {"timesteps_total": 1000} and spec["config"]["lr"] == 0.01
    assert spec["config"]["min_time_s_per_reporting"] == 10
    assert list(sources.values()) == ["PPO defaults"]
    with pytest.raises(ConfigError, match="--stop"):
        build_experiments(["PPO"], None, ("torch",), 1, "Pendulum-v1")
    with pytest.raises(ConfigError, match="--seeds"):
        build_experiments(["PPO"], None, ("torch",), 0, "CartPole-v1")
