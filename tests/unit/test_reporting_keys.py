"""RLlib 1.13's keys for what a result holds and when an iteration reports, with 1.13's
meaning: ``in_evaluation`` (True in the evaluation workers' config, for callbacks),
``always_attach_evaluation_results``, ``keep_per_episode_custom_metrics`` and
``min_train_timesteps_per_reporting``; and the 1.13 keys accepted at their no-op values,
given as a dict, as a YAML file and through a config object."""

from __future__ import annotations

import math

import pytest

from rlstack.errors import ConfigError
from rlstack.evaluation.callbacks import DefaultCallbacks
from rlstack.experiments import _experiment_config, _first_values, load_experiments
from rlstack.trainers.common.classic_keys import NO_OP_KEYS
from rlstack.trainers.common.registry import get_trainer_class

PG = get_trainer_class("PG")
TINY = {"num_workers": 0, "train_batch_size": 50, "rollout_fragment_length": 50, "framework": "torch",
        "model": {"fcnet_hiddens": [8]}, "seed": 0}


class ReportsWhereItRuns(DefaultCallbacks):
    """1.x's way for a callback to tell evaluation from training: the worker's config."""

    def on_episode_end(self, *, worker, episode, **kwargs):
        episode.custom_metrics["in_evaluation"] = float(worker.policy_config["in_evaluation"])
        episode.custom_metrics["length"] = episode.length


@pytest.fixture
def trainer_of():
    made = []

    def make(**config):
        pytest.importorskip("torch")
        trainer = PG({**TINY, "callbacks": ReportsWhereItRuns, **config}, env="CartPole-v1")
        made.append(trainer)
        return trainer

    yield make
    for trainer in made:
        trainer.stop()


def test_in_evaluation_is_true_in_the_evaluation_workers_config_only(trainer_of):
    trainer = trainer_of(evaluation_interval=1, evaluation_duration=2)
    result = trainer.train()
    assert trainer.workers.local_worker().policy_config["in_evaluation"] is False
    assert trainer.evaluation_workers.local_worker().policy_config["in_evaluation"] is True
    assert result["custom_metrics"]["in_evaluation_mean"] == 0.0
    assert result["evaluation"]["custom_metrics"]["in_evaluation_mean"] == 1.0
    with pytest.raises(ConfigError, match="evaluation_config.in_evaluation=False"):
        PG.merge_and_validate({"evaluation_config": {"in_evaluation": False}})


def test_always_attach_evaluation_results_keeps_the_last_evaluation_in_every_result(trainer_of):
    trainer = trainer_of(evaluation_interval=2, evaluation_duration=2, always_attach_evaluation_results=True)
    before, evaluated, after = trainer.train(), trainer.train(), trainer.train()
    # Before the first evaluation: 1.13's NaN rewards, so a stopper on them finds the keys.
    assert math.isnan(before["evaluation"]["episode_reward_mean"])
    assert evaluated["evaluation"]["episodes_this_iter"] == 2
    assert after["evaluation"] == evaluated["evaluation"]
    # Without the key, only the iterations that evaluated carry `evaluation` (1.13's default).
    plain = trainer_of(evaluation_interval=2, evaluation_duration=1)
    assert "evaluation" not in plain.train() and "evaluation" in plain.train()


def test_keep_per_episode_custom_metrics_reports_each_episodes_value(trainer_of):
    result = trainer_of(keep_per_episode_custom_metrics=True).train()
    lengths = result["custom_metrics"]["length"]
    assert lengths == result["hist_stats"]["episode_lengths"] and len(lengths) >= 1
    assert "length_mean" not in result["custom_metrics"]
    assert "length_mean" in trainer_of().train()["custom_metrics"]


def test_min_train_timesteps_per_reporting_trains_until_that_many_steps(trainer_of):
    result = trainer_of(min_train_timesteps_per_reporting=120).train()
    # Three training steps of 50 rows each: the first count >= 120.
    assert result["num_env_steps_trained"] == 150 and result["timesteps_this_iter"] == 150
    assert get_trainer_class("CQL").get_default_config()["min_train_timesteps_per_reporting"] == 100  # 1.13's CQL
    with pytest.raises(ConfigError, match="min_train_timesteps_per_reporting must be None or >= 0"):
        PG.merge_and_validate({"min_train_timesteps_per_reporting": -1})


# 1.13's keys rlstack has no key for, at the values 1.13's TrainerConfig.to_dict() writes
# (its defaults), and a value with an effect rlstack lacks.
NO_OP_AT_1_13_DEFAULTS = {
    "_disable_action_flattening": (False, True), "disable_env_checking": (False, None),
    "eager_max_retraces": (20, 5), "extra_python_environs_for_driver": ({}, {"A": "1"}),
    "extra_python_environs_for_worker": ({}, {"A": "1"}), "fake_sampler": (False, True),
    "log_sys_usage": (True, False), "metrics_episode_collection_timeout_s": (180, None),
    "collect_metrics_timeout": (180, None), "sample_async": (False, True), "sample_collector": (None, "mine"),
}


@pytest.mark.parametrize("key", sorted(NO_OP_AT_1_13_DEFAULTS))
def test_1_13_keys_without_effect_are_accepted_in_a_dict_and_other_values_refused(key):
    accepted, refused = NO_OP_AT_1_13_DEFAULTS[key]
    assert key not in PG.merge_and_validate({key: accepted})
    if NO_OP_KEYS[key][0] is None:  # any value means the same
        assert key not in PG.merge_and_validate({key: refused})
    else:
        with pytest.raises(ConfigError, match=f"{key}={refused!r} is not supported by rlstack's PG"):
            PG.merge_and_validate({key: refused})


def test_a_1_13_yaml_file_with_those_keys_and_the_new_ones_loads(tmp_path):
    (tmp_path / "cartpole-pg.yaml").write_text(
        "cartpole-pg:\n  env: CartPole-v1\n  run: PG\n  config:\n"
        "    disable_env_checking: true\n    eager_max_retraces: 20\n    extra_python_environs_for_driver: {}\n"
        "    extra_python_environs_for_worker: {}\n    fake_sampler: false\n    log_sys_usage: true\n"
        "    metrics_episode_collection_timeout_s: 60\n    collect_metrics_timeout: 60\n    sample_async: false\n"
        "    _disable_action_flattening: false\n    always_attach_evaluation_results: true\n"
        "    keep_per_episode_custom_metrics: true\n    min_train_timesteps_per_reporting: 400\n"
        "    model: {no_final_linear: true, _time_major: false, _disable_action_flattening: false,\n"
        "            _disable_preprocessor_api: false}\n")
    spec = load_experiments(str(tmp_path / "cartpole-pg.yaml"))["cartpole-pg"]
    config = PG.merge_and_validate(_first_values(_experiment_config(spec, None)))
    assert not {"disable_env_checking", "sample_async", "log_sys_usage", "collect_metrics_timeout"} & set(config)
    assert (config["always_attach_evaluation_results"], config["keep_per_episode_custom_metrics"],
            config["min_train_timesteps_per_reporting"], config["model"]["no_final_linear"]) == (True, True, 400, True)


def test_marwil_and_bc_take_use_gae_without_effect_and_a2c_keeps_sample_async():
    for name in ("MARWIL", "BC"):
        assert "use_gae" not in get_trainer_class(name).merge_and_validate({"use_gae": False})
    with pytest.raises(ConfigError, match="Unknown config key 'use_gae' for PG"):
        PG.merge_and_validate({"use_gae": True})
    assert get_trainer_class("A2C").merge_and_validate({"sample_async": False})["sample_async"] is False


def test_no_final_linear_trains(framework):
    trainer = PG({**TINY, "framework": framework, "model": {"fcnet_hiddens": [8, 6], "no_final_linear": True}},
                 env="CartPole-v1")
    try:
        result = trainer.train()
        assert result["num_env_steps_trained"] == 50
        assert "logits/kernel" not in trainer.get_policy().get_weights()
        assert trainer.get_policy().get_weights()["fc_1/kernel"].shape == (8, 2)
    finally:
        trainer.stop()
