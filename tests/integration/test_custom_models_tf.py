"""1.13-style TF custom models in trainers: a Keras model trains, reports its metrics,
acts, restores and runs on remote workers; the action-masking example never picks a
masked action."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("tensorflow")

from rlstack.errors import EnvFailureError  # noqa: E402
from rlstack.examples.env.action_mask_env import ActionMaskEnv  # noqa: E402
from rlstack.examples.models.tf_action_mask_model import ActionMaskModel  # noqa: E402
from rlstack.trainers.ppo import PPOTrainer  # noqa: E402
from tests.helpers.custom_models import KerasMetricsModel  # noqa: E402

SMALL = {"framework": "tf", "num_workers": 0, "train_batch_size": 200, "sgd_minibatch_size": 64, "num_sgd_iter": 2,
         "rollout_fragment_length": 100, "seed": 3}
MASK_ENV_CONFIG = {"action_space": gym.spaces.Discrete(100)}


def _by_position(weights: dict) -> list:
    # Custom-model weights are keyed "<index>:<name>"; Keras names differ between copies.
    return [weights[key] for key in sorted(weights, key=lambda key: int(key.split(":")[0]))]


def _greedy(trainer: PPOTrainer, observations: list) -> list:
    return [int(trainer.compute_single_action(obs, explore=False)) for obs in observations]


def test_keras_model_trains_reports_metrics_and_restores(tmp_path):
    config = {**SMALL, "model": {"custom_model": KerasMetricsModel}}
    trainer = PPOTrainer(config, "CartPole-v1")
    before = {k: v.copy() for k, v in trainer.get_weights()["default_policy"].items()}
    for _ in range(2):
        result = trainer.train()
    stats = result["info"]["learner"]["default_policy"]["learner_stats"]
    assert stats["model"] == {"foo": 42.0}
    # 1.13's torch place too, as a plain float: results reach Tune's driver, which must not
    # need TensorFlow to read them.
    assert result["info"]["learner"]["default_policy"]["model"] == {"foo": 42.0}
    assert type(result["info"]["learner"]["default_policy"]["model"]["foo"]) is float
    assert np.isfinite(stats["total_loss"])
    after = trainer.get_weights()["default_policy"]
    assert all(not np.array_equal(before[k], after[k]) for k in before)
    env = gym.make("CartPole-v1")
    observations = [env.reset(seed=s)[0] for s in range(10)]
    assert all(trainer.compute_single_action(obs, explore=True) in (0, 1) for obs in observations)
    actions = _greedy(trainer, observations)
    checkpoint = trainer.save(str(tmp_path))
    trainer.stop()

    restored = PPOTrainer(config, "CartPole-v1")
    restored.restore(checkpoint)
    assert _greedy(restored, observations) == actions
    for mine, theirs in zip(_by_position(after), _by_position(restored.get_weights()["default_policy"])):
        np.testing.assert_array_equal(mine, theirs)
    restored.stop()


def test_keras_model_acts_on_a_remote_worker(ray_local):
    trainer = PPOTrainer({**SMALL, "num_workers": 1, "model": {"custom_model": KerasMetricsModel}}, "CartPole-v1")
    result = trainer.train()
    assert result["timesteps_total"] >= 200
    assert result["info"]["learner"]["default_policy"]["learner_stats"]["model"]["foo"] == 42.0
    learner = trainer.get_weights()["default_policy"]
    remote = trainer.workers.foreach_worker(lambda w: w.get_weights(), local=False)[0]
    assert len(remote) == len(learner)
    for mine, theirs in zip(_by_position(learner), _by_position(remote)):
        np.testing.assert_array_equal(mine, theirs)
    trainer.stop()


def _mask_trainer(**custom_model_config) -> PPOTrainer:
    return PPOTrainer({**SMALL, "env_config": MASK_ENV_CONFIG, "evaluation_duration": 3,
                       "model": {"custom_model": ActionMaskModel, "fcnet_hiddens": [16],
                                 "custom_model_config": custom_model_config}}, ActionMaskEnv)


def test_action_mask_model_never_picks_a_masked_action():
    trainer = _mask_trainer()
    for _ in range(2):  # the env raises on a masked action, so finishing proves none was sent
        result = trainer.train()
    assert result["timesteps_total"] >= 400
    env = ActionMaskEnv(MASK_ENV_CONFIG)
    obs, _ = env.reset(seed=0)
    for explore in (False, True):
        for _ in range(20):
            obs, _ = env.reset()
            for _ in range(10):
                action = trainer.compute_single_action(obs, explore=explore)
                assert obs["action_mask"][action] == 1.0
    assert trainer.evaluate()["evaluation"]["episodes_this_iter"] >= 3
    trainer.stop()


def test_without_masking_the_env_refuses_the_policys_actions():
    trainer = _mask_trainer(no_masking=True)
    with pytest.raises(EnvFailureError, match="masked out"):
        trainer.train()
    trainer.stop()


@pytest.mark.parametrize("algorithm", ["A2C", "IMPALA"])
def test_keras_model_with_other_actor_critics(algorithm):
    from rlstack.trainers.a3c import A2CTrainer
    from rlstack.trainers.impala import IMPALATrainer

    config = {"framework": "tf", "num_workers": 0, "seed": 0, "min_time_s_per_reporting": 0,
              "train_batch_size": 40, "rollout_fragment_length": 10, "model": {"custom_model": KerasMetricsModel}}
    if algorithm == "IMPALA":
        config["min_sample_timesteps_per_reporting"] = 0
    trainer = (A2CTrainer if algorithm == "A2C" else IMPALATrainer)(config, "CartPole-v1")
    before = {k: v.copy() for k, v in trainer.get_weights()["default_policy"].items()}
    result = trainer.train()
    assert result["info"]["learner"]["default_policy"]["learner_stats"]["model"] == {"foo": 42.0}
    after = trainer.get_weights()["default_policy"]
    assert any(not np.array_equal(before[k], after[k]) for k in before)
    trainer.stop()


def test_custom_action_dist_with_the_builtin_network_in_a_trainer():
    from tests.unit.test_tf_modelv2 import _AlwaysLast

    # rollout_inference="framework": the numpy acting copy of the built-in network does not
    # know custom distributions yet (see numpy_inference_applies).
    trainer = PPOTrainer({**SMALL, "rollout_inference": "framework",
                          "model": {"custom_action_dist": _AlwaysLast, "fcnet_hiddens": [16]}}, "CartPole-v1")
    result = trainer.train()
    assert result["timesteps_total"] >= 200
    env = gym.make("CartPole-v1")
    assert {trainer.compute_single_action(env.reset(seed=s)[0], explore=True) for s in range(20)} == {1}
    trainer.stop()
