"""The memory is what learns StatelessCartPole: the tuned PPO+LSTM example's settings
without ``use_lstm`` stay below its bar over 80k env steps, half again the ~52k the LSTM
run needs to reach it (tests/learning/test_tune_configs.py; its budget is 200k: the
full budget without memory costs ~80 s of CI for the same answer, a best of ~55).

Here rather than in tests/learning: it trains in the pytest process, which during the
learning phase would take a core from the asynchronous examples that run alone."""

from __future__ import annotations

import pytest

from rlstack.experiments import load_experiments
from tests.tuned_examples import CONFIG_DIR

NAME = "stateless-cartpole-ppo-lstm"
STEPS = 80_000


def test_without_the_lstm_the_tuned_example_stays_below_its_bar(ray_local):
    pytest.importorskip("torch")
    from rlstack.trainers.ppo import PPOTrainer

    spec = load_experiments(str(CONFIG_DIR / f"{NAME}.yaml"))[NAME]
    bar, budget = spec["stop"]["episode_reward_mean"], min(STEPS, spec["stop"]["timesteps_total"])
    config = {**spec["config"], "framework": "torch", "model": {**spec["config"]["model"], "use_lstm": False}}
    trainer = PPOTrainer(config, spec["env"])
    try:
        best, steps = 0.0, 0
        while steps < budget:
            result = trainer.train()
            steps = result["timesteps_total"]
            best = max(best, result["episode_reward_mean"])
    finally:
        trainer.stop()
    assert best < bar, f"without memory PPO reached {best:.1f} >= {bar} in {steps} steps: the env leaks the velocities"
    # It does learn something from positions alone: the comparison is not with a broken run.
    assert best > 25
