"""check_learning_achieved (1.13's last line of most example scripts) reads what Tune
really returns: tune.run()'s ExperimentAnalysis and tune.Tuner.fit()'s ResultGrid."""

from __future__ import annotations

import pytest
from ray import tune

from rlstack.trainers.ppo import PPOTrainer
from rlstack.utils.test_utils import check_learning_achieved

CONFIG = {"env": "CartPole-v1", "num_workers": 0, "train_batch_size": 200, "sgd_minibatch_size": 64,
          "num_sgd_iter": 2, "model": {"fcnet_hiddens": [16]}, "framework": "torch",
          "evaluation_interval": 1, "evaluation_duration": 2}


def _assert_checks(results):
    check_learning_achieved(results, 5.0)  # any CartPole episode returns >= 5
    check_learning_achieved(results, 5.0, evaluation=True)
    with pytest.raises(ValueError, match=r"`PPO` not learnt to return 100000.0"):
        check_learning_achieved(results, 100000.0)


def test_with_tune_run(ray_local, tmp_path):
    analysis = tune.run(PPOTrainer, config=CONFIG, stop={"training_iteration": 1}, storage_path=str(tmp_path),
                        verbose=0)
    _assert_checks(analysis)


def test_with_tuner_fit(ray_local, tmp_path):
    results = tune.Tuner(PPOTrainer, param_space=CONFIG,
                         run_config=tune.RunConfig(stop={"training_iteration": 1}, storage_path=str(tmp_path),
                                                   verbose=0)).fit()
    _assert_checks(results)
