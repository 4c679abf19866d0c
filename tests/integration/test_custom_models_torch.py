"""Classic RLlib 1.13 custom ModelV2s on torch trainers: PPO trains and acts with a
wrapped FullyConnectedNetwork, the model's metrics reach the results, checkpoints
restore it, a remote worker acts with it, and action masking keeps every chosen action
allowed (the env raises on a masked one)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("torch")

from rlstack.errors import EnvFailureError  # noqa: E402
from rlstack.examples.env.action_mask_env import ActionMaskEnv  # noqa: E402
from rlstack.trainers.ppo import PPOTrainer  # noqa: E402
from tests.helpers import torch_modelv2_models as models  # noqa: E402

TINY = {"framework": "torch", "num_workers": 0, "train_batch_size": 200, "sgd_minibatch_size": 64,
        "num_sgd_iter": 2, "rollout_fragment_length": 100, "seed": 1, "model": {"fcnet_hiddens": [16]}}
MASK_ENV = {"action_space": gym.spaces.Discrete(100), "max_episode_len": 20}


def _greedy(trainer, observations):
    return [int(trainer.compute_single_action(obs, explore=False)) for obs in observations]


def test_wrapped_fc_model_trains_acts_and_reports_metrics():
    trainer = PPOTrainer({**TINY, "model": {"fcnet_hiddens": [16], "custom_model": models.WrappedFCModel}},
                         "CartPole-v1")
    before = {k: v.copy() for k, v in trainer.get_weights()["default_policy"].items()}
    for _ in range(2):
        result = trainer.train()
    after = trainer.get_weights()["default_policy"]
    assert any(not np.array_equal(before[k], after[k]) for k in before)
    info = result["info"]["learner"]["default_policy"]
    assert np.isfinite(info["learner_stats"]["total_loss"]) and info["model"] == {}
    obs, _ = gym.make("CartPole-v1").reset(seed=0)
    assert trainer.compute_single_action(obs) in (0, 1)
    trainer.stop()


def test_custom_loss_metrics_reach_the_results():
    trainer = PPOTrainer({**TINY, "model": {"custom_model": models.CustomLossModel,
                                            "custom_model_config": {"coeff": 0.5}}}, "CartPole-v1")
    result = trainer.train()
    assert result["info"]["learner"]["default_policy"]["model"]["extra_loss"] > 0
    trainer.stop()


def test_checkpoint_restores_a_custom_model(tmp_path):
    config = {**TINY, "model": {"fcnet_hiddens": [16], "custom_model": models.WrappedFCModel}}
    trainer = PPOTrainer(config, "CartPole-v1")
    trainer.train()
    env = gym.make("CartPole-v1")
    observations = [env.reset(seed=i)[0] for i in range(20)]
    expected = _greedy(trainer, observations)
    path = trainer.save(str(tmp_path))
    trainer.stop()
    restored = PPOTrainer({**config, "seed": 7}, "CartPole-v1")
    restored.restore(path)
    assert _greedy(restored, observations) == expected
    restored.stop()


def test_remote_worker_acts_with_a_custom_model_and_action_dist(ray_local):
    from rlstack.models.catalog import ModelCatalog

    ModelCatalog.register_custom_action_dist("remote_temperature_categorical", models.TemperatureCategorical)
    trainer = PPOTrainer({**TINY, "num_workers": 1,
                          "model": {"fcnet_hiddens": [16], "custom_model": models.WrappedFCModel,
                                    "custom_action_dist": "remote_temperature_categorical"}}, "CartPole-v1")
    result = trainer.train()
    assert result["timesteps_total"] == 200 and result["num_healthy_workers"] == 1
    # The worker's model was sized by the distribution (n + 1 outputs).
    sizes = trainer.workers.foreach_worker(lambda w: w.policy.model.num_outputs, local=False)
    assert sizes == [3]
    names = trainer.workers.foreach_worker(lambda w: sorted(w.get_weights()), local=False)[0]
    assert names == sorted(trainer.get_weights()["default_policy"])
    trainer.stop()


def test_action_masking_never_sends_a_masked_action():
    from rlstack.examples.models.action_mask_model import TorchActionMaskModel

    trainer = PPOTrainer({**TINY, "env_config": MASK_ENV, "evaluation_duration": 3,
                          "model": {"fcnet_hiddens": [16], "custom_model": TorchActionMaskModel}}, ActionMaskEnv)
    for _ in range(2):
        result = trainer.train()  # the env raises on a masked action
    assert result["timesteps_total"] == 400
    env = ActionMaskEnv(MASK_ENV)
    for seed in range(10):
        obs, _ = env.reset(seed=seed)
        allowed = obs["action_mask"]
        assert allowed[int(trainer.compute_single_action(obs, explore=False))] == 1.0
        assert all(allowed[int(trainer.compute_single_action(obs, explore=True))] == 1.0 for _ in range(30))
    assert trainer.evaluate()["evaluation"]["episodes_this_iter"] >= 3
    trainer.stop()


def test_without_masking_the_env_refuses_the_actions():
    from rlstack.examples.models.action_mask_model import TorchActionMaskModel

    trainer = PPOTrainer({**TINY, "env_config": MASK_ENV,
                          "model": {"fcnet_hiddens": [16], "custom_model": TorchActionMaskModel,
                                    "custom_model_config": {"no_masking": True}}}, ActionMaskEnv)
    with pytest.raises(EnvFailureError, match="masked out"):
        trainer.train()
    trainer.stop()


@pytest.mark.parametrize("algorithm", ["A2C", "IMPALA", "DQN"])
def test_other_algorithms_learn_with_a_custom_model_and_its_custom_loss(algorithm):
    from rlstack.trainers.common.registry import get_trainer_class

    config = {"framework": "torch", "num_workers": 0, "seed": 0, "min_time_s_per_reporting": 0,
              "model": {"custom_model": models.CustomLossModel, "custom_model_config": {"coeff": 0.5}}}
    config.update({
        "A2C": {"train_batch_size": 100, "rollout_fragment_length": 25},
        "IMPALA": {"train_batch_size": 40, "rollout_fragment_length": 10, "min_sample_timesteps_per_reporting": 200},
        "DQN": {"rollout_fragment_length": 4, "min_sample_timesteps_per_reporting": 200, "learning_starts": 100,
                "buffer_size": 1000, "train_batch_size": 16, "hiddens": [16]},
    }[algorithm])
    trainer = get_trainer_class(algorithm)(config, "CartPole-v1")
    before = {k: v.copy() for k, v in trainer.get_weights()["default_policy"].items()}
    result = trainer.train()
    after = trainer.get_weights()["default_policy"]
    assert any(not np.array_equal(before[k], after[k]) for k in before)
    # custom_loss ran in the learner's loss (its metric is set there).
    assert result["info"]["learner"]["default_policy"]["model"]["extra_loss"] > 0
    trainer.stop()


def test_a_layer_named_like_a_modelv2_method_is_refused_with_its_name():
    import torch

    from rlstack.errors import ConfigError
    from rlstack.models.torch.torch_modelv2 import TorchModelV2

    class ValueAsLayer(TorchModelV2, torch.nn.Module):
        def __init__(self, obs_space, action_space, num_outputs, model_config, name):
            TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name)
            torch.nn.Module.__init__(self)
            self.logits = torch.nn.Linear(4, num_outputs)
            self.value = torch.nn.Linear(4, 1)  # 1.x users' name; ModelV2.value() is rlstack's

        def forward(self, input_dict, state, seq_lens):
            self._obs = input_dict["obs"]
            return self.logits(self._obs), state

        def value_function(self):
            return self.value(self._obs).squeeze(-1)

    with pytest.raises(ConfigError, match=r"custom_model ValueAsLayer sets self.value, the name of ModelV2.value\(\).*"
                                          r"rename the attribute"):
        PPOTrainer({**TINY, "model": {"custom_model": ValueAsLayer}}, "CartPole-v1")
