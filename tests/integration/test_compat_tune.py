"""check_learning_achieved (1.13's last line of most example scripts) reads what Tune
really returns: tune.run()'s ExperimentAnalysis and tune.Tuner.fit()'s ResultGrid."""

from __future__ import annotations

import os

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


RENAMED_113_SCRIPT = '''
import sys

import gymnasium as gym
import numpy as np
import ray
from ray import tune

from rlstack.env.env_context import EnvContext
from rlstack.policies.sample_batch import DEFAULT_POLICY_ID
from rlstack.trainers.ppo import DEFAULT_CONFIG, PPOTrainer
from rlstack.utils.framework import try_import_torch
from rlstack.utils.metrics import NUM_ENV_STEPS_SAMPLED
from rlstack.utils.metrics.learner_info import LEARNER_INFO, LEARNER_STATS_KEY
from rlstack.utils.test_utils import check_learning_achieved

torch, nn = try_import_torch()


class Corridor(gym.Env):
    """Walk right to the end of a corridor of config["length"] cells."""

    def __init__(self, config: EnvContext):
        self.length = config["length"]
        assert config.worker_index >= 0 and config.num_workers >= 0
        self.action_space = gym.spaces.Discrete(2)
        self.observation_space = gym.spaces.Box(0.0, self.length, shape=(1,), dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        self.pos = 0
        return np.array([self.pos], np.float32), {}

    def step(self, action):
        self.pos = max(0, self.pos + (1 if action == 1 else -1))
        done = self.pos >= self.length
        return np.array([self.pos], np.float32), 1.0 if done else -0.1, done, False, {}


ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
config = DEFAULT_CONFIG.copy()
config.update(env=Corridor, env_config={"length": 3}, num_workers=0, framework="torch", train_batch_size=200,
              sgd_minibatch_size=64, num_sgd_iter=2, model={"fcnet_hiddens": [16]})
results = tune.run(PPOTrainer, config=config, stop={"training_iteration": 2}, storage_path=sys.argv[1], verbose=0)
check_learning_achieved(results, -20.0)
last = results.trials[0].last_result
assert last[NUM_ENV_STEPS_SAMPLED] >= 400
assert "total_loss" in last["info"][LEARNER_INFO][DEFAULT_POLICY_ID][LEARNER_STATS_KEY]
assert "tensorflow" not in sys.modules
print("SCRIPT OK")
'''


def test_a_renamed_113_style_script_runs(tmp_path):
    import subprocess
    import sys

    pytest.importorskip("torch")
    script = tmp_path / "corridor.py"
    script.write_text(RENAMED_113_SCRIPT)
    # The script's own ray.init() starts a single-node Ray on 127.0.0.1 only.
    env = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    proc = subprocess.run([sys.executable, str(script), str(tmp_path / "results")], capture_output=True, text=True,
                          timeout=300, env=env)
    assert proc.returncode == 0 and "SCRIPT OK" in proc.stdout, proc.stderr[-3000:]
