"""Callbacks and custom metrics (classic RLlib's ``agents.callbacks``), in one process."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from rlstack.errors import ConfigError
from rlstack.evaluation.rollout_worker import RolloutWorker
from rlstack.policies.numpy_policy import NumpyPolicy
from rlstack.sample_batch import SampleBatch
from rlstack.evaluation.callbacks import make_callbacks, overridden_hooks
from rlstack.trainers.callbacks import DefaultCallbacks, MemoryTrackingCallbacks, MultiCallbacks
from rlstack.trainers.common.config import merge_config, validate_common_config
from rlstack.trainers.ppo import DEFAULT_CONFIG, PPOTrainer
from tests.helpers.callback_classes import (
    LEGACY_DICT,
    FullCallbacks,
    LearnOnBatchCallbacks,
    MetricACallbacks,
    MetricBCallbacks,
    PoleAngleCallbacks,
)

TINY = {"num_workers": 0, "seed": 0, "train_batch_size": 200, "sgd_minibatch_size": 64, "num_sgd_iter": 2,
        "rollout_fragment_length": 200, "model": {"fcnet_hiddens": [16]}}
PPO_TORCH = "rlstack.trainers.ppo.ppo_torch_policy:PPOTorchPolicy"


def _worker(callbacks, env="CartPole-v1", **overrides) -> RolloutWorker:
    config = merge_config(DEFAULT_CONFIG, {**TINY, "callbacks": callbacks, **overrides}, "PPO")
    validate_common_config(config)
    return RolloutWorker(env, PPO_TORCH, config, postprocess_fn=PPOTrainer.postprocess_fn)


class _FirstEnvFailsOnce(gym.Wrapper):
    """CartPole whose first instance raises at its 5th step."""

    made = 0

    def __init__(self, config):
        super().__init__(gym.make("CartPole-v1"))
        type(self).made += 1
        self.fails = type(self).made == 1
        self.steps = 0

    def step(self, action):
        self.steps += 1
        if self.fails and self.steps == 5:
            raise RuntimeError("injected failure")
        return self.env.step(action)


# ----- the callbacks objects ----------------------------------------------------------------


def test_overridden_hooks_names_only_what_does_something():
    assert overridden_hooks(DefaultCallbacks()) == frozenset()
    assert overridden_hooks(LearnOnBatchCallbacks()) == {"on_learn_on_batch"}
    assert overridden_hooks(FullCallbacks()) == {"on_trainer_init", "on_episode_start", "on_episode_step",
                                                 "on_episode_end", "on_learn_on_batch", "on_train_result"}
    legacy = DefaultCallbacks({"on_episode_end": print, "on_postprocess_traj": print})
    assert overridden_hooks(legacy) == {"on_episode_end", "on_postprocess_trajectory"}
    multi = MultiCallbacks([MetricACallbacks, LearnOnBatchCallbacks])()
    assert overridden_hooks(multi) == {"on_episode_end", "on_learn_on_batch"}


def test_make_callbacks_accepts_the_four_forms():
    assert type(make_callbacks(PoleAngleCallbacks)) is PoleAngleCallbacks
    assert type(make_callbacks("tests.helpers.callback_classes.PoleAngleCallbacks")) is PoleAngleCallbacks
    multi = make_callbacks(MultiCallbacks([MetricACallbacks, MetricBCallbacks]))
    assert [type(c) for c in multi._callback_list] == [MetricACallbacks, MetricBCallbacks]
    legacy = make_callbacks(LEGACY_DICT)
    assert type(legacy) is DefaultCallbacks and legacy.legacy_callbacks == LEGACY_DICT
    assert repr(MultiCallbacks([MetricACallbacks])) == "MultiCallbacks([tests.helpers.callback_classes.MetricACallbacks])"


@pytest.mark.parametrize("value, expected", [
    (PoleAngleCallbacks(), "instance of PoleAngleCallbacks"),
    (42, "callbacks=42 is not allowed"),
    (dict, "callbacks=<class 'dict'> is not allowed"),
    ("no_such_module_xyz.Callbacks", "cannot import module 'no_such_module_xyz'"),
    ("tests.helpers.callback_classes.NoSuchClass", "has no attribute 'NoSuchClass'"),
    ("Callbacks", "not a dotted import path"),
    ({"on_episode_ended": print}, "unknown keys ['on_episode_ended']"),
    ({"on_episode_end": 3}, "not callable"),
    (MultiCallbacks([MetricACallbacks()]), "pass the classes, not instances"),
])
def test_bad_callbacks_value_says_what_was_given_and_what_is_allowed(value, expected):
    config = merge_config(DEFAULT_CONFIG, {"callbacks": value}, "PPO")
    with pytest.raises(ConfigError) as error:
        validate_common_config(config)
    assert expected in str(error.value)
    if isinstance(value, int) or value is dict:
        assert "DefaultCallbacks subclass" in str(error.value) and "MultiCallbacks" in str(error.value)


def test_callbacks_none_means_no_callbacks_as_in_1_13():
    from rlstack.evaluation.callbacks import make_callbacks

    config = merge_config(DEFAULT_CONFIG, {"callbacks": None}, "PPO")
    validate_common_config(config)
    assert type(make_callbacks(config["callbacks"])) is DefaultCallbacks


# ----- hooks on a rollout worker ------------------------------------------------------------


def test_no_overridden_episode_hook_means_no_episode_objects_and_numpy_acting():
    worker = _worker(LearnOnBatchCallbacks)
    assert worker._tracker is None
    assert isinstance(worker.sampling_policy, NumpyPolicy)
    assert worker.sample().count == 200


def test_episode_hooks_see_what_the_policy_saw():
    worker = _worker(PoleAngleCallbacks, num_envs_per_worker=2, rollout_fragment_length=150)
    batch = worker.sample()
    finished = worker.callbacks.finished
    assert finished
    stats = worker.get_metrics()
    assert [s.length for s in stats] == [e.length for e, _ in finished]
    whole = 0
    for (episode, angles), stat in zip(finished, stats):
        assert stat.custom_metrics == {"pole_angle": pytest.approx(np.mean(angles))}
        assert stat.hist_data["pole_angles"] == angles
        assert episode.total_reward == stat.episode_return == episode.length  # CartPole: 1 per step
        assert episode.agent_rewards[("agent0", "default_policy")] == episode.total_reward
        rows = batch[SampleBatch.EPS_ID] == episode.episode_id
        if rows.sum() == episode.length:  # the whole episode is in this batch
            whole += 1
            # The step hook saw s_1..s_T; the batch holds s_0..s_{T-1} in order.
            np.testing.assert_allclose(angles[:-1], np.abs(batch[SampleBatch.OBS][rows][1:, 2]), rtol=1e-6)
            assert episode.last_action_for() == batch[SampleBatch.ACTIONS][rows][-1]
            assert episode.prev_action_for() == batch[SampleBatch.ACTIONS][rows][-2]
            assert episode.last_done_for()
        np.testing.assert_array_equal(episode.last_raw_obs_for(), episode.last_observation_for())
        assert episode.last_reward_for() == episode.prev_reward_for() == 1.0
        assert isinstance(episode.last_info_for(), dict)
        assert episode.get_agents() == ["agent0"] and episode.policy_for("agent0") == "default_policy"
    assert whole > 0


def test_postprocess_sample_end_and_sub_env_hooks():
    calls: dict[str, list] = {"postprocess": [], "sample_end": [], "sub_env": [], "create_policy": []}

    class Recorder(DefaultCallbacks):
        def on_sub_environment_created(self, *, worker, sub_environment, env_context, **kwargs):
            calls["sub_env"].append((env_context.worker_index, env_context.vector_index, sub_environment))

        def on_create_policy(self, *, policy_id, policy):
            calls["create_policy"].append(policy_id)

        def on_postprocess_trajectory(self, *, worker, episode, agent_id, policy_id, policies, postprocessed_batch,
                                      original_batches, **kwargs):
            policy, original = original_batches[agent_id]
            assert (agent_id, policy_id, set(policies)) == ("agent0", "default_policy", {"default_policy"})
            assert policy is policies["default_policy"]
            assert SampleBatch.ADVANTAGES in postprocessed_batch and SampleBatch.ADVANTAGES not in original
            assert set(postprocessed_batch[SampleBatch.EPS_ID]) == {episode.episode_id}
            postprocessed_batch["seen_by_callback"] = np.ones(postprocessed_batch.count, dtype=np.float32)
            # Classic RLlib's example counts pieces per episode as a custom metric.
            episode.custom_metrics["num_batches"] = episode.custom_metrics.get("num_batches", 0) + 1
            calls["postprocess"].append(postprocessed_batch.count)

        def on_sample_end(self, *, worker, samples, **kwargs):
            calls["sample_end"].append(samples.count)

    worker = _worker(Recorder, num_envs_per_worker=3, rollout_fragment_length=50)
    batch = worker.sample()
    assert [(w, v) for w, v, _ in calls["sub_env"]] == [(0, 0), (0, 1), (0, 2)]
    assert [env for _, _, env in calls["sub_env"]] == worker.async_env.get_sub_environments() == worker.async_env.get_unwrapped()
    assert calls["create_policy"] == ["default_policy"]
    assert sum(calls["postprocess"]) == batch.count == 150 and calls["sample_end"] == [150]
    assert (batch["seen_by_callback"] == 1).all()
    ended = worker.get_metrics()
    assert ended and all(e.custom_metrics["num_batches"] == 1 for e in ended)


def test_a_restarted_sub_env_drops_its_broken_episode_from_the_hooks():
    events: list[tuple[str, int, int]] = []

    class Events(DefaultCallbacks):
        def on_sub_environment_created(self, *, env_context, **kwargs):
            events.append(("created", env_context.vector_index, -1))

        def on_episode_start(self, *, episode, env_index=None, **kwargs):
            events.append(("start", env_index, episode.episode_id))

        def on_episode_end(self, *, episode, env_index=None, **kwargs):
            events.append(("end", env_index, episode.episode_id))

    _FirstEnvFailsOnce.made = 0
    worker = _worker(Events, env=_FirstEnvFailsOnce, num_envs_per_worker=2, rollout_fragment_length=100,
                     restart_failed_sub_environments=True)
    batch = worker.sample()
    assert [e for e in events if e[0] == "created"] == [("created", 0, -1), ("created", 1, -1), ("created", 0, -1)]
    broken_id = next(eid for kind, index, eid in events if kind == "start" and index == 0)
    assert ("end", 0, broken_id) not in events and broken_id not in batch[SampleBatch.EPS_ID]
    started = [eid for kind, _, eid in events if kind == "start"]
    ended = [eid for kind, _, eid in events if kind == "end"]
    assert len(started) == len(set(started)) and set(ended) < set(started)
    assert len(ended) == len(worker.get_metrics()) > 0


def test_memory_tracking_callbacks_report_worker_memory():
    import tracemalloc

    worker = _worker(MemoryTrackingCallbacks, rollout_fragment_length=60)
    try:
        worker.sample()
    finally:
        tracemalloc.stop()
    episodes = worker.get_metrics()
    assert episodes and all(e.custom_metrics["tracemalloc/worker/rss"] > 0 for e in episodes)
    assert sum(name.endswith("/size") for name in episodes[0].custom_metrics) == 10


def test_legacy_dict_gets_classic_info_dicts():
    worker = _worker(LEGACY_DICT, rollout_fragment_length=100)
    batch = worker.sample()
    assert (batch["legacy_seen"] == 1).all()
    episodes = worker.get_metrics()
    assert episodes and all(e.custom_metrics == {"legacy_steps": float(e.length)} for e in episodes)


def test_multi_callbacks_calls_each_class():
    worker = _worker(MultiCallbacks([MetricACallbacks, MetricBCallbacks]), rollout_fragment_length=100)
    worker.sample()
    episodes = worker.get_metrics()
    assert episodes and all(e.custom_metrics == {"a": 1.0, "b": float(e.length)} for e in episodes)


# ----- results of a trainer ---------------------------------------------------------------------


def test_custom_metrics_hist_stats_learner_metrics_and_train_result():
    trainer = PPOTrainer({**TINY, "callbacks": FullCallbacks, "evaluation_interval": 1, "evaluation_duration": 2},
                         "CartPole-v1")
    assert trainer.init_hook_ran
    result = trainer.train()
    assert result["callback_ok"] is True
    # Summaries over the smoothing window, recomputed from the per-episode values.
    per_episode = result["hist_stats"]["pole_angle_per_episode"]
    assert len(per_episode) == len(result["hist_stats"]["episode_reward"]) == result["episodes_this_iter"] > 0
    episode_metrics = {key: value for key, value in result["custom_metrics"].items() if key != "default_policy"}
    assert episode_metrics == pytest.approx({"pole_angle_mean": np.mean(per_episode),
                                             "pole_angle_min": np.min(per_episode),
                                             "pole_angle_max": np.max(per_episode)})
    # on_learn_on_batch's results, by policy id (1.13's torch place).
    assert result["custom_metrics"]["default_policy"] == {"train_batch_rows": 200, "policy_class": "PPOTorchPolicy"}
    assert np.mean(result["hist_stats"]["episode_reward"]) == pytest.approx(result["episode_reward_mean"])
    assert result["hist_stats"]["episode_lengths"] == result["hist_stats"]["episode_reward"]  # CartPole
    assert len(result["hist_stats"]["pole_angles"]) == sum(result["hist_stats"]["episode_lengths"])
    learner = result["info"]["learner"]["default_policy"]
    assert learner["custom_metrics"] == {"train_batch_rows": 200, "policy_class": "PPOTorchPolicy"}
    assert "learner_stats" in learner
    evaluation = result["evaluation"]
    assert evaluation["episodes_this_iter"] == 2
    assert set(evaluation["custom_metrics"]) == {"pole_angle_mean", "pole_angle_min", "pole_angle_max"}
    assert len(evaluation["hist_stats"]["pole_angle_per_episode"]) == 2
    trainer.stop()


def test_without_callbacks_results_carry_empty_custom_metrics():
    trainer = PPOTrainer(TINY, "CartPole-v1")
    result = trainer.train()
    assert result["custom_metrics"] == {}
    assert set(result["hist_stats"]) == {"episode_reward", "episode_lengths"}
    assert result["info"]["learner"]["default_policy"]["custom_metrics"] == {}
    trainer.stop()


def test_dotted_path_multi_and_legacy_forms_in_a_trainer():
    trainer = PPOTrainer({**TINY, "callbacks": "tests.helpers.callback_classes.MetricACallbacks"}, "CartPole-v1")
    assert trainer.train()["custom_metrics"] == {"a_mean": 1.0, "a_min": 1.0, "a_max": 1.0}
    trainer.stop()
    trainer = PPOTrainer({**TINY, "callbacks": MultiCallbacks([MetricACallbacks, MetricBCallbacks])}, "CartPole-v1")
    result = trainer.train()
    assert result["b_ok"] and {"a_mean", "b_mean", "b_min", "b_max"} <= set(result["custom_metrics"])
    assert result["custom_metrics"]["b_mean"] == pytest.approx(result["episode_len_mean"])
    trainer.stop()
    trainer = PPOTrainer({**TINY, "callbacks": LEGACY_DICT}, "CartPole-v1")
    result = trainer.train()
    assert result["legacy_ok"] and result["custom_metrics"]["legacy_steps_mean"] == result["episode_len_mean"]
    trainer.stop()


@pytest.mark.parametrize("algorithm", ["PPO", "DQN"])
def test_on_learn_on_batch_in_both_frameworks(framework, algorithm):
    from rlstack.trainers.dqn import DQNTrainer

    if algorithm == "PPO":
        trainer = PPOTrainer({**TINY, "framework": framework, "callbacks": LearnOnBatchCallbacks}, "CartPole-v1")
        expected_rows = 200
    else:
        trainer = DQNTrainer({"num_workers": 0, "seed": 0, "framework": framework, "rollout_fragment_length": 4,
                              "min_sample_timesteps_per_reporting": 200, "learning_starts": 100, "buffer_size": 1000,
                              "train_batch_size": 16, "hiddens": [16], "model": {"fcnet_hiddens": [16]},
                              "callbacks": LearnOnBatchCallbacks}, "CartPole-v1")
        expected_rows = 16
    result = trainer.train()
    assert result["info"]["learner"]["default_policy"]["custom_metrics"] == {"train_batch_rows": expected_rows}
    # And among the custom metrics by policy id, where 1.13's torch policies put it.
    assert result["custom_metrics"]["default_policy"] == {"train_batch_rows": expected_rows}
    trainer.stop()


# ----- configs travel: checkpoints and reset_config ----------------------------------------------


def test_checkpoint_restores_an_importable_callbacks_class(tmp_path, caplog):
    trainer = PPOTrainer({**TINY, "callbacks": MetricACallbacks}, "CartPole-v1")
    trainer.train()
    path = trainer.save(str(tmp_path / "importable"))
    trainer.stop()
    restored = PPOTrainer.from_checkpoint(path)
    assert restored.config["callbacks"] == "tests.helpers.callback_classes.MetricACallbacks"
    assert "a_mean" in restored.train()["custom_metrics"]
    restored.stop()

    class LocalCallbacks(DefaultCallbacks):  # not importable: a checkpoint keeps only its repr
        pass

    trainer = PPOTrainer({**TINY, "callbacks": LocalCallbacks, "evaluation_config": {"callbacks": LocalCallbacks}},
                         "CartPole-v1")
    path = trainer.save(str(tmp_path / "local"))
    trainer.stop()
    with caplog.at_level(logging.WARNING, logger="rlstack"):
        restored = PPOTrainer.from_checkpoint(path)
    assert restored.config["callbacks"] is DefaultCallbacks and "callbacks" not in restored.config["evaluation_config"]
    assert "LocalCallbacks" in caplog.text and "config_overrides" in caplog.text
    restored.stop()
    restored = PPOTrainer.from_checkpoint(path, config_overrides={"callbacks": LocalCallbacks})
    assert restored.config["callbacks"] is LocalCallbacks
    restored.stop()
    # `rlstack evaluate` passes the stored config back as overrides: its repr entries go too.
    stored = json.loads((Path(path) / "rlstack_checkpoint.json").read_text())["config"]
    restored = PPOTrainer.from_checkpoint(path, config_overrides={"evaluation_config": stored["evaluation_config"],
                                                                  "callbacks": stored["callbacks"]})
    assert restored.config["callbacks"] is DefaultCallbacks
    restored.stop()


def test_reset_config_keeps_workers_with_the_same_multi_callbacks():
    config = {**TINY, "callbacks": MultiCallbacks([MetricACallbacks])}
    trainer = PPOTrainer(config, "CartPole-v1")
    assert trainer.reset_config({**config, "env": "CartPole-v1", "lr": 1e-3})
    assert "a_mean" in trainer.train()["custom_metrics"]
    assert not trainer.reset_config({**config, "env": "CartPole-v1", "callbacks": MetricBCallbacks})
    trainer.stop()
