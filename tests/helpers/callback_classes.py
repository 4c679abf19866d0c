"""Callbacks classes used by the tests (importable by Ray workers, unlike test modules' locals).

:class:`PoleAngleCallbacks` is the custom-metrics example of classic RLlib done again:
the mean absolute pole angle of each CartPole episode as a custom metric, the angles as
histogram data; each hook checks that it got classic RLlib's keyword arguments.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlstack.env import BaseEnv
from rlstack.evaluation import Episode, RolloutWorker
from rlstack.policies.policy import Policy
from rlstack.trainers.callbacks import DefaultCallbacks


def _check_episode_kwargs(worker: Any, base_env: Any, policies: Any, episode: Any, env_index: Any) -> None:
    assert isinstance(worker, RolloutWorker), worker
    assert isinstance(base_env, BaseEnv), base_env
    assert set(policies) == {"default_policy"} and isinstance(policies["default_policy"], Policy), policies
    assert isinstance(episode, Episode), episode
    assert env_index == episode.env_id and 0 <= env_index < len(base_env.get_sub_environments()), env_index


class PoleAngleCallbacks(DefaultCallbacks):
    """Custom metric ``pole_angle``: the episode's mean |pole angle| after each step."""

    def __init__(self, legacy_callbacks_dict: dict | None = None) -> None:
        super().__init__(legacy_callbacks_dict)
        # Episodes this instance saw end (in this process): (episode, its angles).
        self.finished: list[tuple[Episode, list[float]]] = []

    def on_episode_start(self, *, worker, base_env, policies, episode, env_index=None, **kwargs):
        _check_episode_kwargs(worker, base_env, policies, episode, env_index)
        assert episode.length == 0 and episode.last_observation_for() is not None
        episode.user_data["pole_angles"] = []
        episode.hist_data["pole_angles"] = []

    def on_episode_step(self, *, worker, base_env, policies, episode, env_index=None, **kwargs):
        _check_episode_kwargs(worker, base_env, policies, episode, env_index)
        assert episode.length > 0
        episode.user_data["pole_angles"].append(float(abs(episode.last_observation_for()[2])))

    def on_episode_end(self, *, worker, base_env, policies, episode, env_index=None, **kwargs):
        _check_episode_kwargs(worker, base_env, policies, episode, env_index)
        angles = episode.user_data["pole_angles"]
        assert len(angles) == episode.length
        episode.custom_metrics["pole_angle"] = float(np.mean(angles))
        episode.hist_data["pole_angles"] = list(angles)
        # One value per episode, so a test can recompute the custom metric's summary.
        episode.hist_data["pole_angle_per_episode"] = [float(np.mean(angles))]
        self.finished.append((episode, list(angles)))


class FullCallbacks(PoleAngleCallbacks):
    """:class:`PoleAngleCallbacks` plus the trainer and learner hooks."""

    def on_trainer_init(self, *, trainer, **kwargs):
        trainer.init_hook_ran = True

    def on_learn_on_batch(self, *, policy, train_batch, result, **kwargs):
        assert isinstance(policy, Policy), policy
        result["train_batch_rows"] = train_batch.count
        result["policy_class"] = type(policy).__name__

    def on_train_result(self, *, trainer, result, **kwargs):
        assert "training_iteration" in result and "episode_reward_mean" in result
        result["callback_ok"] = True


class LearnOnBatchCallbacks(DefaultCallbacks):
    """Reports the train batch's size from ``on_learn_on_batch``."""

    def on_learn_on_batch(self, *, policy, train_batch, result, **kwargs):
        result["train_batch_rows"] = train_batch.count


class MetricACallbacks(DefaultCallbacks):
    """Custom metric ``a`` = 1 for each episode."""

    def on_episode_end(self, *, episode, **kwargs):
        episode.custom_metrics["a"] = 1.0


class MetricBCallbacks(DefaultCallbacks):
    """Custom metric ``b`` = the episode's length, and the train-result flag ``b_ok``."""

    def on_episode_end(self, *, episode, **kwargs):
        episode.custom_metrics["b"] = float(episode.length)

    def on_train_result(self, *, result, **kwargs):
        result["b_ok"] = True


# Classic RLlib's legacy dict form: functions of one info dict.

def legacy_episode_start(info: dict) -> None:
    assert set(info) == {"env", "policy", "episode"}, set(info)
    info["episode"].user_data["steps"] = 0


def legacy_episode_step(info: dict) -> None:
    assert set(info) == {"env", "episode"}, set(info)
    info["episode"].user_data["steps"] += 1


def legacy_episode_end(info: dict) -> None:
    assert set(info) == {"env", "policy", "episode"}, set(info)
    assert isinstance(info["env"], BaseEnv)
    episode = info["episode"]
    episode.custom_metrics["legacy_steps"] = float(episode.user_data["steps"])


def legacy_postprocess(info: dict) -> None:
    assert set(info) == {"episode", "agent_id", "pre_batch", "post_batch", "all_pre_batches"}, set(info)
    info["post_batch"]["legacy_seen"] = np.ones(info["post_batch"].count, dtype=np.float32)


def legacy_sample_end(info: dict) -> None:
    assert set(info) == {"worker", "samples"}, set(info)


def legacy_train_result(info: dict) -> None:
    assert set(info) == {"trainer", "result"}, set(info)
    info["result"]["legacy_ok"] = True


LEGACY_DICT = {
    "on_episode_start": legacy_episode_start,
    "on_episode_step": legacy_episode_step,
    "on_episode_end": legacy_episode_end,
    "on_postprocess_traj": legacy_postprocess,
    "on_sample_end": legacy_sample_end,
    "on_train_result": legacy_train_result,
}
