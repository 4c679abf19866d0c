"""1.x config keys that 1.x itself still took with a deprecation warning (``eager``,
``use_pytorch``, ``monitor``, ...): replaced by their successors with a warning naming
both, in a trainer's config and in a `rlstack train -f` YAML file alike."""

from __future__ import annotations

import logging

import pytest

from rlstack.experiments import _experiment_config, _first_values, load_experiments
from rlstack.trainers.ppo import PPOTrainer
from rlstack.utils import deprecation


@pytest.fixture(autouse=True)
def _warn_again(monkeypatch):
    """Each test sees the once-per-process warnings afresh."""
    monkeypatch.setattr(deprecation, "_WARNED", set())


def _merged(config: dict, caplog) -> dict:
    with caplog.at_level(logging.WARNING, logger="rlstack"):
        return PPOTrainer.merge_and_validate({"num_workers": 0, **config})


@pytest.mark.parametrize("config, framework, replacement", [
    ({"eager": True}, "tf", "framework='tf'"),
    ({"eager": True, "framework": "tf2"}, "tf", "framework='tf2'"),
    ({"eager": False}, "tf", "framework='tf'"),            # 1.x's default framework was TF
    ({"eager": False, "framework": "torch"}, "torch", "framework='torch'"),
    ({"use_pytorch": True}, "torch", "framework='torch'"),
    ({"use_pytorch": False}, "tf", "framework='tf'"),
    ({"framework": "tfe"}, "tf", "framework='tf'"),
])
def test_framework_switches_of_1x_pick_the_framework_with_a_warning(config, framework, replacement, caplog):
    merged = _merged(config, caplog)
    assert merged["framework"] == framework
    assert "eager" not in merged and "use_pytorch" not in merged
    old = next(iter(k for k in config if k != "framework"), "framework='tfe'")
    assert f"`{old}` has been deprecated. Use `{replacement}` instead." in caplog.text


@pytest.mark.parametrize("config, expected, warning", [
    ({"monitor": True}, {"record_env": True}, "`monitor` has been deprecated. Use `record_env=True`"),
    ({"evaluation_num_episodes": 4}, {"evaluation_duration": 4, "evaluation_duration_unit": "episodes"},
     "`evaluation_num_episodes` has been deprecated. Use `evaluation_duration=4, evaluation_duration_unit='episodes'`"),
    ({"min_iter_time_s": 2}, {"min_time_s_per_reporting": 2},
     "`min_iter_time_s` has been deprecated. Use `min_time_s_per_reporting=2`"),
])
def test_keys_1_13_warned_about_become_their_successors(config, expected, warning, caplog):
    merged = _merged(config, caplog)
    assert {key: merged[key] for key in expected} == expected
    assert warning in caplog.text


def test_lstm_use_prev_action_reward_sets_both_model_keys(caplog):
    merged = _merged({"model": {"use_lstm": True, "lstm_use_prev_action_reward": True}}, caplog)
    assert merged["model"]["lstm_use_prev_action"] is True and merged["model"]["lstm_use_prev_reward"] is True
    assert "lstm_use_prev_action_reward" not in merged["model"]
    assert "`model.lstm_use_prev_action_reward` has been deprecated. Use `model.lstm_use_prev_action=True, " \
           "model.lstm_use_prev_reward=True` instead." in caplog.text


def test_the_warning_comes_once_per_process(caplog):
    _merged({"use_pytorch": True}, caplog)
    _merged({"use_pytorch": True}, caplog)
    assert caplog.text.count("`use_pytorch` has been deprecated") == 1


def test_a_deprecated_key_wins_over_its_successor_given_beside_it_as_in_1x(caplog):
    # A script that copies a whole 1.x config (defaults and all) and sets the old key.
    merged = _merged({"evaluation_num_episodes": 3, "evaluation_duration": 10, "evaluation_duration_unit": "episodes"},
                     caplog)
    assert merged["evaluation_duration"] == 3
    assert "evaluation_num_episodes=3 replaced evaluation_duration=10 given beside it, as in RLlib 1.x" in caplog.text
    assert PPOTrainer.merge_and_validate({"monitor": True, "record_env": False})["record_env"] is True


def test_a_yaml_experiment_file_gets_the_same_mapping(tmp_path, caplog):
    path = tmp_path / "cartpole-ppo.yaml"
    path.write_text("cartpole-ppo:\n  env: CartPole-v1\n  run: PPO\n  config:\n    eager: true\n"
                    "    num_workers: 0\n    monitor: false\n")
    spec = load_experiments(str(path))["cartpole-ppo"]
    merged = _merged(_first_values(_experiment_config(spec, None)), caplog)
    assert merged["framework"] == "tf" and merged["record_env"] is False
    assert "`eager` has been deprecated" in caplog.text
    # `rlstack train -f FILE --framework torch` overrides the file's own switch.
    assert PPOTrainer.merge_and_validate(_first_values(_experiment_config(spec, "torch")))["framework"] == "torch"
