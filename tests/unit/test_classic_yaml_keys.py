"""Classic (1.13) tuned-example YAML files of rlstack's algorithms load unchanged through
`rlstack train -f`'s loader: each key is honoured where 1.x put it (ApeX's `optimizer`
sub-dict, DQN's `replay_buffer_config`, an env grid search) or accepted at its no-op
value; any other value of a no-op key is refused with the reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlstack.errors import ConfigError
from rlstack.experiments import _experiment_config, _first_values, load_experiments, validate_experiments
from rlstack.trainers.common.registry import get_trainer_class

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tuned_1x"
FILES = sorted(FIXTURES.glob("*.yaml"))


def _merged(path: Path, name: str) -> dict:
    spec = load_experiments(str(path))[name]
    return get_trainer_class(spec["run"]).merge_and_validate(_first_values(_experiment_config(spec, None)))


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_every_fixture_file_validates(path):
    experiments = load_experiments(str(path))
    assert len(experiments) >= 3
    validate_experiments(experiments)
    for name, spec in experiments.items():
        config = _merged(path, name)
        assert config["env"] and not config["optimizer"]


def test_apex_optimizer_sub_dict_sets_apex_keys():
    config = _merged(FIXTURES / "apex.yaml", "cartpole-apex")
    assert config["num_replay_buffer_shards"] == 2
    assert (config["buffer_size"], config["learning_starts"]) == (20000, 1000)
    flat = _merged(FIXTURES / "apex.yaml", "cartpole-apex-flat-keys")
    assert (flat["num_replay_buffer_shards"], flat["max_weight_sync_delay"]) == (1, 400)
    assert flat["min_time_s_per_reporting"] == 5 and flat["min_sample_timesteps_per_reporting"] == 1000


def test_replay_buffer_config_maps_onto_dqn_keys():
    prioritized = _merged(FIXTURES / "dqn.yaml", "pong-dqn")
    assert prioritized["prioritized_replay"] is True
    assert (prioritized["buffer_size"], prioritized["learning_starts"]) == (50000, 10000)
    assert prioritized["prioritized_replay_alpha"] == 0.5 and prioritized["replay_buffer_config"] == {}
    uniform = _merged(FIXTURES / "dqn.yaml", "atari-dqn")
    assert uniform["prioritized_replay"] is False and uniform["buffer_size"] == 1000000
    assert uniform["env"] == "BreakoutNoFrameskip-v4"  # the grid's first env


def test_env_grid_search_becomes_a_tune_grid():
    from rlstack.experiments import to_search_space

    spec = load_experiments(str(FIXTURES / "impala.yaml"))["atari-impala"]
    space = to_search_space(_experiment_config(spec, None))
    assert space["env"] == {"grid_search": ["BreakoutNoFrameskip-v4", "QbertNoFrameskip-v4"]}


PPO = get_trainer_class("PPO")
APEX = get_trainer_class("APEX")
DQN = get_trainer_class("DQN")
IMPALA = get_trainer_class("IMPALA")


@pytest.mark.parametrize(("trainer", "config", "fragment"), [
    (APEX, {"optimizer": {"debug": True}}, "optimizer.debug=True is not supported"),
    (APEX, {"optimizer": {"num_replay_buffer_shards": 2}, "num_replay_buffer_shards": 3}, "given twice"),
    (APEX, {"optimizer": {"lr": 0.1}}, "takes num_replay_buffer_shards, max_weight_sync_delay, debug"),
    (PPO, {"optimizer": {"num_replay_buffer_shards": 2}}, "remove the optimizer key"),
    (IMPALA, {"num_multi_gpu_tower_stacks": 4}, "num_multi_gpu_tower_stacks=4 is not supported"),
    (PPO, {"simple_optimizer": "yes"}, "simple_optimizer='yes' is not supported"),
    (IMPALA, {"_tf_policy_handles_more_than_one_loss": 1}, "one loss per optimizer"),
    (PPO, {"num_multi_gpu_tower_stacks": 1}, "Unknown config key 'num_multi_gpu_tower_stacks' for PPO"),
    (DQN, {"replay_buffer_config": {"type": "MultiAgentMixInReplayBuffer"}}, "use one of MultiAgentPrioritized"),
    (DQN, {"replay_buffer_config": {"replay_sequence_length": 20}}, "no recurrent models"),
    (DQN, {"replay_buffer_config": {"capacty": 10}}, "did you mean 'capacity'"),
    (DQN, {"replay_buffer_config": {"no_local_replay_buffer": True}}, "DQN keeps its replay buffer in the driver"),
])
def test_keys_with_an_effect_rlstack_lacks_are_refused(trainer, config, fragment):
    with pytest.raises(ConfigError) as info:
        trainer.merge_and_validate({"num_workers": 1, **config})
    assert fragment in str(info.value)


def test_fake_multi_gpu_examples_run_on_the_cpu_and_real_multi_gpu_is_refused():
    config = _merged(FIXTURES / "ppo.yaml", "cartpole-ppo-fake-gpus")
    assert config["num_gpus"] == 2 and config["_fake_gpus"] is True
    bundles = PPO.default_resource_request(config).bundles
    assert all(bundle.get("GPU", 0) == 0 for bundle in bundles)
    with pytest.raises(ConfigError, match="num_gpus=2: rlstack's learner runs on one GPU"):
        PPO.merge_and_validate({"num_gpus": 2})


def test_a_fake_two_gpu_config_trains_on_the_cpu(ray_local):
    pytest.importorskip("torch")
    trainer = PPO({"num_workers": 0, "train_batch_size": 200, "sgd_minibatch_size": 64, "num_sgd_iter": 2,
                   "model": {"fcnet_hiddens": [16]}, "framework": "torch", "num_gpus": 2, "_fake_gpus": True},
                  "CartPole-v1")
    try:
        result = trainer.train()
        assert result["timesteps_total"] >= 200 and result["info"]["learner_device"].startswith("cpu")
    finally:
        trainer.stop()


def test_no_op_keys_are_accepted_at_their_no_op_values_and_dropped():
    config = IMPALA.merge_and_validate({"_disable_execution_plan_api": False, "num_multi_gpu_tower_stacks": 1,
                                        "simple_optimizer": True, "_tf_policy_handles_more_than_one_loss": True})
    assert not {"_disable_execution_plan_api", "num_multi_gpu_tower_stacks", "simple_optimizer",
                "_tf_policy_handles_more_than_one_loss"} & set(config)


def test_disable_preprocessor_api_is_accepted_for_built_in_models_only():
    from rlstack.trainers.ppo import PPOTrainer

    assert "_disable_preprocessor_api" not in PPOTrainer.merge_and_validate({"_disable_preprocessor_api": True})
    with pytest.raises(ConfigError, match=r"_disable_preprocessor_api=True with a custom_model.*one-hot"):
        PPOTrainer.merge_and_validate({"_disable_preprocessor_api": True, "model": {"custom_model": "mine"}})


def test_classic_pong_a3c_loads_with_rllibs_own_preprocessing(tmp_path):
    # 1.x's pong-a3c: an LSTM model on RLlib's own image preprocessing (42x42 screens).
    (tmp_path / "pong-a3c.yaml").write_text(
        "pong-a3c:\n  env: PongNoFrameskip-v4\n  run: A3C\n  config:\n    num_workers: 16\n"
        "    preprocessor_pref: rllib\n    model: {use_lstm: true, conv_activation: elu, dim: 42, grayscale: true,\n"
        "             zero_mean: false}\n"
    )
    experiments = load_experiments(str(tmp_path / "pong-a3c.yaml"))
    validate_experiments(experiments)
    config = _merged(tmp_path / "pong-a3c.yaml", "pong-a3c")
    assert config["preprocessor_pref"] == "rllib"
    assert (config["model"]["dim"], config["model"]["grayscale"], config["model"]["zero_mean"]) == (42, True, False)


def test_sac_files_keep_1_13s_sub_configs_and_replay_keys():
    pendulum = _merged(FIXTURES / "sac.yaml", "pendulum-sac")
    assert pendulum["prioritized_replay"] is True and pendulum["learning_starts"] == 256
    assert pendulum["Q_model"]["fcnet_hiddens"] == [256, 256] and pendulum["Q_model"]["post_fcnet_hiddens"] == []
    assert pendulum["optimization"]["entropy_learning_rate"] == 0.0003
    cheetah = _merged(FIXTURES / "sac.yaml", "halfcheetah-sac")
    assert cheetah["min_sample_timesteps_per_reporting"] == 1000 and cheetah["learning_starts"] == 10000
    assert get_trainer_class("SAC").merge_and_validate({"soft_horizon": True})["soft_horizon"] is True
    with pytest.raises(ConfigError, match="compress_observations=True is not"):
        get_trainer_class("SAC").merge_and_validate({"compress_observations": True})


@pytest.mark.parametrize("key, default, other", [("remote_env_batch_wait_ms", 0, 10),
                                                  ("compress_observations", False, True)])
def test_1_13_keys_at_their_default_are_accepted_and_other_values_named(key, default, other):
    trainer = get_trainer_class("PPO")
    assert key not in trainer.merge_and_validate({key: default})
    with pytest.raises(ConfigError, match=f"{key}={other} is not supported"):
        trainer.merge_and_validate({key: other})
