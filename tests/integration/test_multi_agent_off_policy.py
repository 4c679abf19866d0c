"""Replay-based trainers in multi-agent runs: each policy keeps its own replay
buffer (1.13's "independent" replay) and target network, learns on its own rows, saves its
buffer in checkpoints; SAC, TD3 and DDPG learn per policy on continuous agents."""

from __future__ import annotations

import numpy as np
import pytest

from rlstack.trainers.ddpg import DDPGTrainer
from rlstack.trainers.dqn import ApexTrainer, DQNTrainer
from rlstack.trainers.sac import SACTrainer
from rlstack.trainers.td3 import TD3Trainer
from tests.integration.test_multi_agent import TWO_POLICIES, assert_same

SMALL_REPLAY = {"num_workers": 0, "seed": 0, "learning_starts": 100, "train_batch_size": 32,
                "rollout_fragment_length": 50, "min_sample_timesteps_per_reporting": 100,
                "env_config": {"num_agents": 4}}


def test_dqn_keeps_a_replay_buffer_per_policy_and_saves_them(tmp_path, framework):
    trainer = DQNTrainer({**SMALL_REPLAY, "framework": framework, "store_buffer_in_checkpoints": True,
                          "multiagent": {**TWO_POLICIES, "policies_to_train": ["pol0"]},
                          "model": {"fcnet_hiddens": [16]}}, "MultiAgentCartPole")
    pol1_before = trainer.get_policy("pol1").get_weights()
    for _ in range(3):
        result = trainer.train()
    buffers = result["replay_buffer"]
    # Each buffer holds the rows of its two agents: together every agent step sampled.
    assert set(buffers) == {"pol0", "pol1"} and min(b["num_entries"] for b in buffers.values()) > 0
    assert sum(b["num_entries"] for b in buffers.values()) == result["num_agent_steps_sampled"]
    assert set(result["info"]["learner"]) == {"pol0"} and "mean_q" in result["info"]["learner"]["pol0"]["learner_stats"]
    assert_same(trainer.get_policy("pol1").get_weights(), pol1_before)  # not trained, not even its target
    path = trainer.save(str(tmp_path / "checkpoint"))
    saved = {pid: trainer.buffer_of(pid).get_state() for pid in ("pol0", "pol1")}
    trainer.stop()
    restored = DQNTrainer.from_checkpoint(path)
    for pid in ("pol0", "pol1"):
        for key, value in saved[pid].items():
            np.testing.assert_array_equal(restored.buffer_of(pid).get_state()[key], value)
    restored.stop()


@pytest.mark.parametrize("trainer_class", [SACTrainer, TD3Trainer, DDPGTrainer], ids=["SAC", "TD3", "DDPG"])
def test_continuous_control_trainers_learn_per_policy(trainer_class):
    trainer = trainer_class({**SMALL_REPLAY, "env_config": {"num_agents": 2},
                             "multiagent": {"policies": ["a", "b"],
                                            "policy_mapping_fn": lambda agent_id, *args, **kw: "ab"[agent_id]}},
                            "MultiAgentPendulum")
    before = {pid: trainer.get_policy(pid).get_weights() for pid in ("a", "b")}
    result = trainer.train()
    result = trainer.train()
    assert set(result["info"]["learner"]) == {"a", "b"}
    for pid in ("a", "b"):
        after = trainer.get_policy(pid).get_weights()
        assert any(not np.array_equal(before[pid][k], v) for k, v in after.items())
    torque = trainer.compute_single_action(np.zeros(3, np.float32), policy_id="b", explore=False)
    assert torque.shape == (1,) and -2.0 <= torque[0] <= 2.0
    trainer.stop()


def test_apex_replays_and_learns_per_policy(ray_local):
    trainer = ApexTrainer({"num_workers": 1, "num_replay_buffer_shards": 1, "seed": 0, "learning_starts": 200,
                           "buffer_size": 5000, "train_batch_size": 64, "min_time_s_per_reporting": 0,
                           "min_sample_timesteps_per_reporting": 200, "target_network_update_freq": 256,
                           "model": {"fcnet_hiddens": [16]}, "env_config": {"num_agents": 4},
                           "multiagent": {**TWO_POLICIES, "policies_to_train": ["pol0"]}}, "MultiAgentCartPole")
    pol1_before = trainer.get_policy("pol1").get_weights()
    learned = {}
    for _ in range(60):
        result = trainer.train()
        learned.update(result["info"]["learner"])
        if "pol0" in learned and result["num_target_updates"] >= 1:
            break
    assert set(learned) == {"pol0"} and "mean_q" in learned["pol0"]["learner_stats"]
    (shard,) = result["replay_shards"]
    assert set(shard) == {"pol0", "pol1"} and shard["pol1"]["num_sampled"] == 0 < shard["pol0"]["num_sampled"]
    assert result["agent_timesteps_total"] > result["timesteps_total"]
    assert_same(trainer.get_policy("pol1").get_weights(), pol1_before)
    trainer.stop()
