"""The memory is what learns StatelessCartPole: the tuned PPO+LSTM example's settings
without ``use_lstm`` stay below its bar over 80k env steps, half again the ~52k the LSTM
run needs to reach it (tests/learning/test_tune_configs.py; its budget is 200k: the
full budget without memory costs ~80 s of CI for the same answer, a best of ~55). And
the previous action and reward are what learn a bandit whose good arm is hidden: with
``lstm_use_prev_action`` / ``_reward`` PPO finds win-stay, lose-shift; without them it
cannot beat chance.

Here rather than in tests/learning: it trains in the pytest process, which during the
learning phase would take a core from the asynchronous examples that run alone."""

from __future__ import annotations

import pytest

from rlstack.experiments import load_experiments
from tests.helpers.tuned_examples import CONFIG_DIR

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


def _bandit_best(prev: bool, steps: int, bar: float) -> tuple[float, int]:
    from rlstack.trainers.ppo import PPOTrainer
    from tests.helpers.envs import HiddenArmBandit

    model = {"use_lstm": True, "lstm_cell_size": 16, "max_seq_len": 10, "fcnet_hiddens": [16],
             "lstm_use_prev_action": prev, "lstm_use_prev_reward": prev}
    config = {"framework": "torch", "num_workers": 0, "seed": 0, "num_envs_per_worker": 8,
              "rollout_fragment_length": 50, "train_batch_size": 2000, "sgd_minibatch_size": 500, "num_sgd_iter": 10,
              "lr": 3e-3, "gamma": 0.9, "entropy_coeff": 0.0, "model": model}
    trainer = PPOTrainer(config, HiddenArmBandit)
    try:
        best, done = float("-inf"), 0
        while done < steps and best < bar:
            result = trainer.train()
            done, best = result["timesteps_total"], max(best, result["episode_reward_mean"])
    finally:
        trainer.stop()
    return best, done


def test_previous_action_and_reward_learn_the_hidden_arm_bandit(ray_local):
    """Win-stay, lose-shift earns ~ +9 of 10 pulls; the observation says nothing, so a
    policy without the previous action and reward earns 0 +- ~0.3 (a mean over 100
    episodes). Bar 5 within 20k steps (~8k with seed 0, ~10 s on 2 cores)."""
    pytest.importorskip("torch")
    best, steps = _bandit_best(prev=True, steps=20_000, bar=5.0)
    assert best >= 5.0, f"with the previous action and reward PPO reached only {best:.2f} in {steps} steps"
    best, steps = _bandit_best(prev=False, steps=8_000, bar=5.0)
    assert best < 2.0, f"without the previous action and reward PPO reached {best:.2f}: the env leaks the arm"
