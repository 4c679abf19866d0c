"""Config errors a user meets first: each names the key and the fix."""

from __future__ import annotations

import re

import pytest

from rlstack.errors import ConfigError, EnvError
from rlstack.trainers.ppo import DEFAULT_CONFIG, PPOTrainer
from rlstack.trainers.common.registry import ALGORITHMS, get_trainer_class

SMALL = {"num_workers": 0, "train_batch_size": 200, "sgd_minibatch_size": 64, "num_sgd_iter": 1}


def test_misspelled_key_names_key_and_suggestion():
    with pytest.raises(ConfigError) as info:
        PPOTrainer({**SMALL, "lr_shedule": [[0, 1e-3]]}, "CartPole-v1")
    message = str(info.value)
    assert "'lr_shedule'" in message and "PPO" in message and "'lr_schedule'" in message


def test_misspelled_model_key():
    with pytest.raises(ConfigError, match="fcnet_hidden.*did you mean 'fcnet_hiddens'"):
        PPOTrainer({**SMALL, "model": {"fcnet_hidden": [32]}}, "CartPole-v1")


def test_misspelled_key_inside_evaluation_config():
    with pytest.raises(ConfigError, match="'explor'.*'explore'"):
        PPOTrainer({**SMALL, "evaluation_config": {"explor": False}}, "CartPole-v1")


def test_unknown_framework():
    with pytest.raises(ConfigError, match="Unknown framework 'jax'.*'torch', 'tf'"):
        PPOTrainer({**SMALL, "framework": "jax"}, "CartPole-v1")


def test_1_13s_framework_none_with_the_algorithms_own_policy_says_to_set_torch_or_tf():
    with pytest.raises(ConfigError, match=r"framework=None, but policy 'default_policy' is PPO's own policy.*"
                                          r"set config\['framework'\] to 'torch' or 'tf'"):
        PPOTrainer({**SMALL, "framework": None}, "CartPole-v1")


def test_minibatch_larger_than_train_batch():
    with pytest.raises(ConfigError, match=r"sgd_minibatch_size \(512\) must be <= train_batch_size \(200\)"):
        PPOTrainer({**SMALL, "sgd_minibatch_size": 512}, "CartPole-v1")


def test_unknown_env_names_env_and_suggests():
    with pytest.raises(EnvError, match="Unknown env 'CartPole-v9'.*did you mean.*CartPole"):
        PPOTrainer(SMALL, "CartPole-v9")


def test_missing_env():
    with pytest.raises(ConfigError, match="No env given"):
        PPOTrainer(SMALL)


@pytest.mark.parametrize(
    ("key", "value", "fragment"),
    [
        ("num_workers", -1, "num_workers must be an integer >= 0"),
        ("gamma", 1.5, "gamma must be in [0, 1]"),
        ("batch_mode", "episodes", "batch_mode='episodes' is not allowed"),
        ("observation_filter", "Mean", "observation_filter='Mean' is not allowed"),
        ("clip_param", 0, "clip_param must be > 0"),
    ],
)
def test_impossible_values(key, value, fragment):
    with pytest.raises(ConfigError) as info:
        PPOTrainer({**SMALL, key: value}, "CartPole-v1")
    assert fragment in str(info.value)


def test_unknown_algorithm_lists_available():
    available = "Available: " + ", ".join(sorted(ALGORITHMS)) + "."
    with pytest.raises(ConfigError, match=r"Unknown algorithm .PP0.; did you mean .PPO.\?.*" + re.escape(available)):
        get_trainer_class("PP0")


def test_merged_config_is_complete_and_deep_merged():
    trainer = PPOTrainer({**SMALL, "model": {"fcnet_hiddens": [16]}, "framework": "tf2"}, env="CartPole-v1")
    try:
        assert set(DEFAULT_CONFIG) <= set(trainer.config)
        assert trainer.config["model"]["fcnet_hiddens"] == [16]
        assert trainer.config["model"]["fcnet_activation"] == "tanh"  # kept from the defaults
        assert trainer.config["framework"] == "tf"  # alias normalised
        assert trainer.config["env"] == "CartPole-v1"
    finally:
        trainer.stop()


def test_renamed_classic_key_is_accepted():
    trainer = PPOTrainer({**SMALL, "timesteps_per_iteration": 400}, "CartPole-v1")
    try:
        assert trainer.config["min_sample_timesteps_per_reporting"] == 400
    finally:
        trainer.stop()


def test_default_config_copy_is_independent():
    config = DEFAULT_CONFIG.copy()
    config["num_workers"] = 7
    assert DEFAULT_CONFIG["num_workers"] == 2


def test_default_config_copy_is_deep():
    config = DEFAULT_CONFIG.copy()
    config["model"]["fcnet_hiddens"] = [8]
    assert DEFAULT_CONFIG["model"]["fcnet_hiddens"] == [256, 256]


@pytest.mark.parametrize(
    ("override", "fragment"),
    [
        ({"clip_rewards": -1}, "clip_rewards must be None (the default), False (off), True"),
        ({"preprocessor_pref": "opencv"}, "preprocessor_pref='opencv' is not supported; use 'deepmind'"),
        ({"model": {"grayscale": "yes"}}, "model.grayscale must be True or False"),
        ({"model": {"dim": 0}}, "model.dim must be a positive integer"),
        ({"evaluation_duration": "auto"}, "'auto' with evaluation_parallel_to_training=True"),
        ({"exploration_config": {"type": "EpsilonGreedy"}}, "explore by sampling"),
        ({"optimizer": {"type": "SGD"}}, "remove the optimizer key"),
        ({"model": {"use_lstm": True, "max_seq_len": 0}}, "model.max_seq_len must be an integer >= 1"),
        ({"model": {"framestack": "yes"}}, "model.framestack must be True or False"),
        ({"no_done_at_end": 1}, "no_done_at_end must be True or False, got 1"),
        ({"sgd_minibatch_size": "128"}, "sgd_minibatch_size must be an integer >= 1, got '128'"),
        ({"clip_param": None}, "clip_param must be a number, got None"),
        ({"lr_schedule": [[0, "fast"]]}, "lr_schedule entry [0, 'fast'] is not a pair of numbers"),
    ],
)
def test_more_impossible_values(override, fragment):
    with pytest.raises(ConfigError) as info:
        PPOTrainer({**SMALL, **override}, "CartPole-v1")
    assert fragment in str(info.value)


def test_bad_value_in_evaluation_config_is_named():
    trainer = PPOTrainer({**SMALL, "evaluation_config": {"num_envs_per_worker": 0}}, "CartPole-v1")
    with pytest.raises(ConfigError, match="In evaluation_config: num_envs_per_worker must be an integer >= 1"):
        trainer.evaluate()
    trainer.stop()


def test_missing_framework_says_what_to_install():
    import subprocess
    import sys

    script = (
        "import sys\n"
        "sys.modules['tensorflow'] = None  # as if TensorFlow were not installed\n"
        "from rlstack.trainers.ppo import PPOTrainer\n"
        "try:\n"
        "    PPOTrainer({'num_workers': 0, 'framework': 'tf'}, 'CartPole-v1')\n"
        "except ImportError as exc:\n"
        "    print('ERROR', exc)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert "ERROR framework='tf' needs TensorFlow" in proc.stdout, proc.stderr[-2000:]
    assert "pip install 'rlstack-ray[tf] @ git+https://github.com/rlstack-dev/rlstack'" in proc.stdout


def test_tf_session_args_reject_tf1_options_and_bad_thread_counts():
    with pytest.raises(ConfigError, match="tf_session_args has no key 'gpu_options'.*remove it"):
        PPOTrainer({**SMALL, "tf_session_args": {"gpu_options": {"allow_growth": True}}}, "CartPole-v1")
    with pytest.raises(ConfigError, match=r"local_tf_session_args.intra_op_parallelism_threads must be .* got -1"):
        PPOTrainer({**SMALL, "local_tf_session_args": {"intra_op_parallelism_threads": -1}}, "CartPole-v1")


def test_tf_session_args_merge_key_by_key():
    from rlstack.trainers.common.config import merge_config

    config = merge_config(DEFAULT_CONFIG, {"local_tf_session_args": {"inter_op_parallelism_threads": 4}}, "PPO")
    assert config["local_tf_session_args"] == {"intra_op_parallelism_threads": None, "inter_op_parallelism_threads": 4}
