"""RLlib 1.13's config objects (``rlstack/trainers/trainer_config.py`` and each algorithm's
``<algo>_config.py``): 1.13's setters and argument names over the classic dict, checked as
they are set, equal to ``DEFAULT_CONFIG`` when nothing is set, and building the trainer."""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from pathlib import Path

import pytest

from rlstack.errors import ConfigError
from rlstack.trainers.common.config import COMMON_CONFIG
from rlstack.trainers.common.registry import ALGORITHMS, get_trainer_class
from rlstack.trainers.trainer_config import RAY2_TRAINING_ALIASES, SETTER_ARGUMENTS, TrainerConfig, _key_of

# Run name -> (algorithm package, config class): Ray 2.0's names.
CONFIG_CLASSES = {
    "A2C": ("a3c", "A2CConfig"), "A3C": ("a3c", "A3CConfig"), "APEX": ("dqn", "ApexDQNConfig"),
    "APEX_DDPG": ("ddpg", "ApexDDPGConfig"), "APPO": ("appo", "APPOConfig"), "ARS": ("ars", "ARSConfig"),
    "BC": ("marwil", "BCConfig"), "CQL": ("cql", "CQLConfig"), "DDPG": ("ddpg", "DDPGConfig"),
    "DQN": ("dqn", "DQNConfig"), "ES": ("es", "ESConfig"), "IMPALA": ("impala", "IMPALAConfig"),
    "MARWIL": ("marwil", "MARWILConfig"), "PG": ("pg", "PGConfig"), "PPO": ("ppo", "PPOConfig"),
    "SAC": ("sac", "SACConfig"), "TD3": ("td3", "TD3Config"),
}


def config_class(name: str) -> type[TrainerConfig]:
    package, class_name = CONFIG_CLASSES[name]
    return getattr(importlib.import_module(f"rlstack.trainers.{package}"), class_name)


def test_every_algorithm_has_a_config_class():
    assert set(CONFIG_CLASSES) == set(ALGORITHMS)


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_an_unset_config_is_the_algorithms_default_config(name):
    config = config_class(name)()
    assert config.to_dict() == get_trainer_class(name)._default_config
    assert config.trainer_class is get_trainer_class(name)


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_every_key_of_the_default_config_has_one_setter_argument(name):
    config = config_class(name)()
    keys = {}
    for method in SETTER_ARGUMENTS:
        for argument in config.arguments(method):
            key = f"multiagent/{argument}" if method == "multi_agent" else config._arguments(method)[argument]
            keys.setdefault(key, []).append(argument)
    expected = {*(key for key in config.to_dict() if key != "multiagent"),
                *(f"multiagent/{key}" for key in COMMON_CONFIG["multiagent"])}
    assert expected <= set(keys)
    # Two arguments for one key only where Ray 2.x's name sits beside the classic one.
    assert {key: arguments for key, arguments in keys.items() if len(arguments) > 1} == {
        key: [key, alias] for alias, key in RAY2_TRAINING_ALIASES.items() if key in keys}


def test_ppo_training_takes_113s_argument_names():
    from rlstack.trainers.ppo import DEFAULT_CONFIG, PPOConfig

    config = PPOConfig().training(lambda_=0.9, kl_coeff=0.3, sgd_minibatch_size=32, num_sgd_iter=5, clip_param=0.2,
                                  lr_schedule=[[0, 1e-3], [1000, 1e-4]], grad_clip=40.0)
    expected = {**DEFAULT_CONFIG.copy(), "lambda": 0.9, "kl_coeff": 0.3, "sgd_minibatch_size": 32, "num_sgd_iter": 5,
                "clip_param": 0.2, "lr_schedule": [[0, 1e-3], [1000, 1e-4]], "grad_clip": 40.0}
    assert config.to_dict() == expected
    assert config.lambda_ == 0.9 and "lambda_" in config.arguments("training")
    assert "lambda" not in config.arguments("training")
    assert "num_rollout_workers" in inspect.signature(PPOConfig.rollouts).parameters  # for help() and IDEs


def test_common_setters_map_113s_renamed_arguments_to_the_classic_keys():
    from rlstack.trainers.ppo import PPOConfig

    def callbacks_class():
        return None

    d = (PPOConfig()
         .rollouts(num_rollout_workers=3, create_env_on_local_worker=True, synchronize_filter=False)
         .resources(num_cpus_for_local_worker=2)
         .offline_data(input_="sampler")
         .evaluation(custom_evaluation_function=callbacks_class)
         .reporting(metrics_num_episodes_for_smoothing=7)
         .multi_agent(count_steps_by="agent_steps")
         .framework("tf")
         .environment("CartPole-v1", env_config={"a": 1})
         .debugging(seed=3)).to_dict()
    assert (d["num_workers"], d["create_env_on_driver"], d["synchronize_filters"], d["num_cpus_for_driver"]) == (
        3, True, False, 2)
    assert d["input"] == "sampler" and d["custom_eval_function"] is callbacks_class
    assert d["metrics_smoothing_episodes"] == 7 and d["multiagent"]["count_steps_by"] == "agent_steps"
    assert (d["framework"], d["env"], d["env_config"], d["seed"]) == ("tf", "CartPole-v1", {"a": 1}, 3)


def test_a_tf_config_only_makes_its_dict():
    from rlstack.trainers.ppo import PPOConfig

    tf_loaded = "tensorflow" in sys.modules
    assert PPOConfig().framework("tf").to_dict()["framework"] == "tf"
    assert PPOConfig().framework(framework="tf").framework(eager_tracing=False).to_dict()["eager_tracing"] is False
    assert tf_loaded or "tensorflow" not in sys.modules


def test_an_unknown_argument_is_a_type_error_naming_the_valid_ones():
    from rlstack.trainers.ppo import PPOConfig

    with pytest.raises(TypeError, match=r"PPOConfig\.training\(\).*'lrr'.*did you mean 'lr'") as info:
        PPOConfig().training(lrr=1)
    assert "sgd_minibatch_size" in str(info.value)  # the valid ones, PPO's own included
    with pytest.raises(TypeError, match=r"argument of \.rollouts\(\)"):
        PPOConfig().training(num_rollout_workers=1)
    with pytest.raises(TypeError, match=r"set by \.rollouts\(num_rollout_workers=\.\.\.\)"):
        PPOConfig().rollouts(num_workers=1)
    with pytest.raises(TypeError, match="clip_param"):  # PG has no PPO keys
        config_class("PG")().training(clip_param=0.2)


def test_setters_chain_on_one_object():
    from rlstack.trainers.ppo import PPOConfig

    config = PPOConfig()
    assert config.training(lr=1e-3) is config
    for method in SETTER_ARGUMENTS:
        assert getattr(config, method)() is config


def test_copy_is_independent():
    from rlstack.trainers.ppo import PPOConfig

    config = PPOConfig().training(model={"fcnet_hiddens": [32]})
    copied = config.copy()
    copied.training(lr=0.5, model={"fcnet_hiddens": [8]}).multi_agent(policies={"a", "b"})
    copied.model["fcnet_activation"] = "relu"
    assert config.lr == PPOConfig().lr and config.model["fcnet_hiddens"] == [32]
    assert config.model["fcnet_activation"] == PPOConfig().model["fcnet_activation"]
    assert config.to_dict()["multiagent"]["policies"] == {}
    assert copied.to_dict()["model"]["fcnet_hiddens"] == [8]


def test_a_bad_value_fails_at_its_setter_with_the_dicts_config_error():
    from rlstack.trainers.ppo import PPOConfig, PPOTrainer

    cases = [  # (setter, arguments, the same keys as a dict)
        ("training", {"lr": -1}, {"lr": -1}),
        ("resources", {"num_gpus": 2}, {"num_gpus": 2}),
        ("rollouts", {"num_rollout_workers": -1}, {"num_workers": -1}),
        ("rollouts", {"compress_observations": True}, {"compress_observations": True}),  # a 1.x no-op key
        ("multi_agent", {"replay_mode": "lockstep"}, {"multiagent": {"replay_mode": "lockstep"}}),
        ("exploration", {"exploration_config": {"type": "EpsilonGreedy"}},
         {"exploration_config": {"type": "EpsilonGreedy"}}),
        ("training", {"model": {"fcnet_hidens": [8]}}, {"model": {"fcnet_hidens": [8]}}),
    ]
    for method, arguments, as_dict in cases:
        with pytest.raises(ConfigError) as from_dict:
            PPOTrainer.merge_and_validate(as_dict)
        config = PPOConfig()
        with pytest.raises(ConfigError) as from_object:
            getattr(config, method)(**arguments)
        assert str(from_dict.value) in str(from_object.value), (method, arguments)
        assert f"PPOConfig.{method}(" in str(from_object.value)
        assert config.to_dict() == PPOConfig().to_dict()  # a refused call changes nothing
    # A value that disagrees only with another key's waits for that key: the next call may
    # set it, and to_dict() / build() check the whole config.
    assert PPOConfig().training(train_batch_size=100, sgd_minibatch_size=50).to_dict()["train_batch_size"] == 100
    chained = PPOConfig().training(train_batch_size=100).training(sgd_minibatch_size=50)
    assert chained.to_dict()["train_batch_size"] == 100
    conflicting = PPOConfig().training(train_batch_size=100)
    with pytest.raises(ConfigError, match="sgd_minibatch_size"):
        conflicting.to_dict()
    with pytest.raises(ConfigError, match="sgd_minibatch_size"):
        conflicting.build()


def test_113_arguments_without_an_rlstack_key_are_accepted_only_where_they_change_nothing():
    from rlstack.trainers.common.classic_keys import NO_OP_KEYS
    from rlstack.trainers.ppo import PPOConfig

    config = PPOConfig().rollouts(sample_async=False).debugging(log_sys_usage=True).python_environment(
        extra_python_environs_for_driver={}).reporting(metrics_episode_collection_timeout_s=60)
    # Kept as given, as 1.13's to_dict() wrote them, and dropped by the trainer's merge as a
    # dict or YAML file with them is.
    written = config.to_dict()
    assert (written["sample_async"], written["log_sys_usage"], written["metrics_episode_collection_timeout_s"]) == (
        False, True, 60)
    assert get_trainer_class("PPO").merge_and_validate(written) == get_trainer_class("PPO").merge_and_validate({})
    assert config.sample_async is False
    with pytest.raises(ConfigError, match="sample_async=True is not supported"):
        PPOConfig().rollouts(sample_async=True)
    with pytest.raises(ConfigError, match="runtime_env"):
        PPOConfig().python_environment(extra_python_environs_for_worker={"OMP_NUM_THREADS": "1"})
    with pytest.raises(ConfigError, match="fake_sampler=True is not supported"):
        PPOConfig().fake_sampler = True
    # A3C has sample_async as a key of its own.
    assert config_class("A3C")().rollouts(sample_async=False).to_dict()["sample_async"] is False
    # Every setter argument sets a common key or is one of classic_keys' no-op keys.
    for arguments in SETTER_ARGUMENTS.values():
        for argument in arguments:
            key = _key_of(argument)
            assert key in COMMON_CONFIG or key in COMMON_CONFIG["multiagent"] or key in NO_OP_KEYS, argument


def test_attributes_read_and_write_the_config_checked():
    from rlstack.trainers.ppo import PPOConfig

    config = PPOConfig()
    assert (config.lr, config.num_workers, config.num_rollout_workers, config.lambda_) == (
        config.to_dict()["lr"], 2, 2, 1.0)
    config.num_rollout_workers = 0
    config.lambda_ = 0.5
    config.policies = {"a"}
    assert (config.to_dict()["num_workers"], config.to_dict()["lambda"]) == (0, 0.5)
    assert config.to_dict()["multiagent"]["policies"] == {"a"}
    with pytest.raises(ConfigError, match="lr must be > 0"):
        config.lr = -1
    with pytest.raises(AttributeError, match="did you mean 'lr'"):
        config.lrr = 1
    with pytest.raises(AttributeError, match="did you mean 'lr'"):
        config.lrr  # noqa: B018


def test_evaluation_config_may_be_a_config_object():
    from rlstack.trainers.ppo import PPOConfig

    evaluation = PPOConfig().exploration(explore=True).environment(env_config={"difficulty": 2})
    config = PPOConfig().evaluation(evaluation_interval=1, evaluation_config=evaluation)
    assert config.to_dict()["evaluation_config"] == {"explore": True, "env_config": {"difficulty": 2}}


def test_dict_round_trip_and_classic_key_checks():
    from rlstack.trainers.ppo import PPOConfig

    config = PPOConfig.from_dict({"lr": 1e-3, "timesteps_per_iteration": 100, "model": {"fcnet_hiddens": [16]}})
    d = config.to_dict()
    assert (d["lr"], d["min_sample_timesteps_per_reporting"], d["model"]["fcnet_hiddens"]) == (1e-3, 100, [16])
    assert PPOConfig.from_dict(d).to_dict() == d
    with pytest.raises(ConfigError, match="Unknown config key 'lr_shedule' for PPO; did you mean 'lr_schedule'"):
        PPOConfig().update_from_dict({"lr_shedule": [[0, 1e-3]]})


def test_tune_search_spaces_and_later_input_files_wait_for_the_trainer(tmp_path):
    from ray import tune

    from rlstack.trainers.ppo import PPOConfig

    config = PPOConfig().training(lr=tune.grid_search([1e-3, 1e-4]), model={"fcnet_hiddens": tune.choice([[8], [16]])})
    assert config.to_dict()["lr"] == {"grid_search": [1e-3, 1e-4]}
    files = str(tmp_path / "recorded" / "*.json")
    config = PPOConfig().environment("CartPole-v1").offline_data(input_=files)  # recorded later, perhaps
    assert config.to_dict()["input"] == files
    with pytest.raises(ConfigError):
        config.build()


def test_the_execution_plan_switch_reaches_the_dict():
    config = TrainerConfig().experimental(_disable_execution_plan_api=True, _disable_preprocessor_api=False)
    assert config.to_dict()["_disable_execution_plan_api"] is True
    assert "_disable_execution_plan_api" not in TrainerConfig().to_dict()


def test_the_config_modules_import_no_framework():
    import subprocess

    code = ("import sys\nfrom rlstack.trainers.ppo import PPOConfig\nfrom rlstack.trainers.dqn import DQNConfig\n"
            "PPOConfig().framework('tf').to_dict(); DQNConfig().to_dict()\n"
            "print([m for m in ('torch', 'tensorflow') if m in sys.modules])")
    root = str(Path(__file__).resolve().parents[2])
    proc = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": root}, capture_output=True,
                          text=True, timeout=120)
    assert proc.stdout.strip() == "[]", proc.stdout + proc.stderr[-2000:]


def test_the_113_module_paths_and_ray2_spellings():
    from rlstack.trainers.impala import IMPALAConfig, ImpalaConfig
    from rlstack.trainers.pg.pg import PGConfig
    from rlstack.trainers.ppo.ppo import PPOConfig

    assert PPOConfig is config_class("PPO") and PGConfig is config_class("PG") and ImpalaConfig is IMPALAConfig
    sac = config_class("SAC")().training(num_steps_sampled_before_learning_starts=10, q_model_config={"fcnet_hiddens": [8]})
    assert sac.to_dict()["learning_starts"] == 10 and sac.to_dict()["Q_model"]["fcnet_hiddens"] == [8]


# ----- the trainer from the object ---------------------------------------------------------------

def test_ppo_builds_and_trains():
    from rlstack.trainers.ppo import PPOConfig, PPOTrainer

    trainer = (PPOConfig().environment("CartPole-v1").framework("torch").rollouts(num_rollout_workers=0)
               .training(lr=3e-4, train_batch_size=200, sgd_minibatch_size=64, num_sgd_iter=1).build())
    try:
        assert isinstance(trainer, PPOTrainer)
        result = trainer.train()
        assert "episode_reward_mean" in result and result["timesteps_total"] >= 200
        assert trainer.config["lr"] == 3e-4 and trainer.config["sgd_minibatch_size"] == 64
    finally:
        trainer.stop()


def test_a_trainer_takes_a_config_object():
    from rlstack.trainers.pg import PGConfig, PGTrainer

    trainer = PGTrainer(config=PGConfig().rollouts(num_rollout_workers=0).training(train_batch_size=100),
                        env="CartPole-v1")
    try:
        assert "episode_reward_mean" in trainer.train() and trainer.config["train_batch_size"] == 100
    finally:
        trainer.stop()


def test_dqn_builds_and_trains():
    from rlstack.trainers.dqn import DQNConfig, DQNTrainer

    trainer = (DQNConfig().framework("torch").rollouts(num_rollout_workers=0)
               .training(learning_starts=64, train_batch_size=32, hiddens=[16], model={"fcnet_hiddens": [16]})
               .reporting(min_sample_timesteps_per_reporting=128).build(env="CartPole-v1"))
    try:
        assert isinstance(trainer, DQNTrainer)
        result = trainer.train()
        assert "episode_reward_mean" in result and result["timesteps_total"] >= 128
    finally:
        trainer.stop()


def test_sac_builds_and_trains():
    from rlstack.trainers.sac import SACConfig, SACTrainer

    trainer = (SACConfig().environment("Pendulum-v1").framework("torch").rollouts(num_rollout_workers=0)
               .training(num_steps_sampled_before_learning_starts=64, train_batch_size=32,
                         q_model_config={"fcnet_hiddens": [16]}, policy_model_config={"fcnet_hiddens": [16]})
               .reporting(min_sample_timesteps_per_reporting=100).build())
    try:
        assert isinstance(trainer, SACTrainer)
        result = trainer.train()
        assert "episode_reward_mean" in result and result["num_env_steps_trained"] > 0
    finally:
        trainer.stop()
