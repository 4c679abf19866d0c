"""Callbacks across processes: remote rollout and evaluation workers, and Tune trials."""

from __future__ import annotations

import numpy as np
from ray import tune

from rlstack.trainers.callbacks import MultiCallbacks
from rlstack.trainers.ppo import PPOTrainer
from tests.helpers.callback_classes import LEGACY_DICT, FullCallbacks, MetricACallbacks, MetricBCallbacks

TINY = {"seed": 0, "train_batch_size": 200, "sgd_minibatch_size": 64, "num_sgd_iter": 2,
        "rollout_fragment_length": 200, "model": {"fcnet_hiddens": [16]}}


def test_remote_workers_run_the_hooks_and_send_custom_metrics_back(ray_local):
    """The hooks run (and check their keyword arguments) in a rollout worker actor and a
    remote evaluation worker; their episodes carry custom metrics and hist data home."""
    trainer = PPOTrainer({**TINY, "num_workers": 1, "callbacks": FullCallbacks, "evaluation_interval": 1,
                          "evaluation_duration": 2, "evaluation_num_workers": 1}, "CartPole-v1")
    result = trainer.train()
    assert result["callback_ok"] and trainer.init_hook_ran
    per_episode = result["hist_stats"]["pole_angle_per_episode"]
    assert len(per_episode) == result["episodes_this_iter"] > 0
    assert result["custom_metrics"]["pole_angle_mean"] == np.mean(per_episode)
    assert result["info"]["learner"]["default_policy"]["custom_metrics"]["train_batch_rows"] == 200
    evaluation = result["evaluation"]
    assert len(evaluation["hist_stats"]["pole_angle_per_episode"]) == evaluation["episodes_this_iter"] == 2
    assert evaluation["custom_metrics"]["pole_angle_max"] == max(evaluation["hist_stats"]["pole_angle_per_episode"])
    trainer.stop()


def test_multi_and_legacy_callbacks_on_remote_workers(ray_local):
    trainer = PPOTrainer({**TINY, "num_workers": 1, "callbacks": MultiCallbacks([MetricACallbacks, MetricBCallbacks])},
                         "CartPole-v1")
    result = trainer.train()
    assert result["b_ok"] and result["custom_metrics"]["a_mean"] == 1.0
    trainer.stop()
    trainer = PPOTrainer({**TINY, "num_workers": 1, "callbacks": LEGACY_DICT}, "CartPole-v1")
    result = trainer.train()
    assert result["legacy_ok"] and result["custom_metrics"]["legacy_steps_mean"] == result["episode_len_mean"]
    trainer.stop()


def test_callbacks_class_in_a_tune_trial(ray_local, tmp_path):
    tuner = tune.Tuner(
        PPOTrainer,
        param_space={**TINY, "env": "CartPole-v1", "num_workers": 0, "callbacks": FullCallbacks},
        run_config=tune.RunConfig(stop={"training_iteration": 1}, storage_path=str(tmp_path), name="callbacks",
                                  checkpoint_config=tune.CheckpointConfig(checkpoint_at_end=True), verbose=0),
    )
    results = tuner.fit()
    assert not results.errors
    metrics = results[0].metrics
    assert metrics["callback_ok"] is True and "pole_angle_mean" in metrics["custom_metrics"]
    restored = PPOTrainer.from_checkpoint(results[0].checkpoint)
    assert restored.config["callbacks"] == "tests.helpers.callback_classes.FullCallbacks"
    restored.stop()
