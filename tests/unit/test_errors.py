"""Unit tests for rlstack/errors.py and the trainer registry's error messages."""

from __future__ import annotations

import pytest

import rlstack
from rlstack.errors import (
    CheckpointError,
    ConfigError,
    EnvError,
    FrameworkNotInstalledError,
    RLStackError,
    closest_matches,
    did_you_mean,
)
from rlstack.trainers.common.registry import ALGORITHMS, get_trainer_class

KEYS = ["train_batch_size", "sgd_minibatch_size", "num_sgd_iter", "lr", "lambda"]


def test_closest_matches_best_first():
    assert closest_matches("train_bach_size", KEYS)[0] == "train_batch_size"
    assert closest_matches("sgd_minibatch_sise", KEYS)[0] == "sgd_minibatch_size"


def test_closest_matches_none():
    assert closest_matches("zzzzzz", KEYS) == []
    assert closest_matches("anything", []) == []


def test_closest_matches_limits_count():
    candidates = ["CartPole-v0", "CartPole-v1", "CartPole-v2", "CartPole-v3", "CartPole-v4"]
    assert len(closest_matches("CartPole-v9", candidates)) == 3
    assert len(closest_matches("CartPole-v9", candidates, n=1)) == 1


def test_closest_matches_case_insensitive_fallback_returns_original_spelling():
    # "ppo" vs "PPO" is below the case-sensitive cutoff; the fallback finds it.
    assert closest_matches("ppo", ["PPO", "IMPALA"]) == ["PPO"]
    assert closest_matches("MEANSTDFILTER", ["NoFilter", "MeanStdFilter"])[0] == "MeanStdFilter"


def test_closest_matches_accepts_any_iterable():
    assert closest_matches("lamda", (k for k in KEYS)) == ["lambda"]
    assert closest_matches("lamda", {"lambda": 1, "lr": 2}) == ["lambda"]


def test_did_you_mean_formats_suffix():
    assert did_you_mean("lamda", KEYS) == "; did you mean 'lambda'?"
    assert did_you_mean("zzzz", KEYS) == ""
    two = did_you_mean("CartPole-v9", ["CartPole-v0", "CartPole-v1"])
    assert two.startswith("; did you mean ") and two.endswith("?")
    assert "'CartPole-v0'" in two and "'CartPole-v1'" in two and " or " in two


def _unknown_config_key(tmp_path, monkeypatch):
    from rlstack.trainers.common.config import COMMON_CONFIG, merge_config

    merge_config(COMMON_CONFIG, {"train_bach_size": 1}, "PPO")


def _unknown_env(tmp_path, monkeypatch):
    from rlstack.env import EnvContext, make_env

    make_env("NoSuchEnv-v0", EnvContext())


def _missing_checkpoint(tmp_path, monkeypatch):
    from rlstack.trainers.common.checkpoint_files import read_checkpoint

    read_checkpoint(tmp_path / "missing")


def _torch_not_installed(tmp_path, monkeypatch):
    from rlstack.utils import framework

    monkeypatch.setattr(framework.importlib.util, "find_spec", lambda name: None)
    framework.check_installed("torch")


@pytest.mark.parametrize(
    "trigger, cls, builtin",
    [
        (_unknown_config_key, ConfigError, ValueError),
        (_unknown_env, EnvError, ValueError),
        (_missing_checkpoint, CheckpointError, ValueError),
        (_torch_not_installed, FrameworkNotInstalledError, ImportError),
    ],
    ids=["config", "env", "checkpoint", "framework"],
)
def test_errors_raised_by_rlstack_are_caught_by_builtin_and_base_handlers(trigger, cls, builtin, tmp_path, monkeypatch):
    """Real raising sites raise the specific class, which a generic ``except <builtin>``
    handler and ``except RLStackError`` both catch."""
    with pytest.raises(builtin) as info:
        trigger(tmp_path, monkeypatch)
    assert type(info.value) is cls
    assert isinstance(info.value, RLStackError)
    assert str(info.value)


def test_errors_exported_from_package():
    assert rlstack.ConfigError is ConfigError
    assert rlstack.EnvError is EnvError
    assert rlstack.RLStackError is RLStackError


def test_get_trainer_class_typo_suggests_ppo():
    with pytest.raises(ConfigError) as info:
        get_trainer_class("PP0")
    message = str(info.value)
    assert "'PP0'" in message
    assert "did you mean 'PPO'" in message
    assert "Available: " + ", ".join(sorted(ALGORITHMS)) + "." in message


def test_get_trainer_class_lowercase_suggests_ppo():
    with pytest.raises(ConfigError, match="did you mean 'PPO'"):
        get_trainer_class("ppo")


def test_get_trainer_class_unknown_without_suggestion_lists_available():
    with pytest.raises(ConfigError) as info:
        get_trainer_class("AlphaZero")
    assert "Available: " + ", ".join(sorted(ALGORITHMS)) + "." in str(info.value)
    assert "did you mean" not in str(info.value)
