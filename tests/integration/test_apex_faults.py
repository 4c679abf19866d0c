"""A dead ApeX replay shard (its actor killed with ``ray.kill``, or its process with
SIGKILL): with
``recreate_failed_workers`` it is recreated empty in place and training goes on, the
result counting ``num_replay_shard_restarts`` and ``replay_shard_rows_lost`` and a warning
naming the shard; without it ``train()`` raises an error naming the shard and the key.
Ape-X DQN (2 workers, 2 shards, CartPole) and a smoke check that Ape-X DDPG shares the path.
"""

from __future__ import annotations

import logging
import os
import signal

import pytest
import ray

from rlstack.errors import WorkerFailureError
from rlstack.trainers.ddpg import ApexDDPGTrainer
from rlstack.trainers.dqn import ApeXTrainer
from tests.helpers.distributed_replay_configs import DISTRIBUTED_REPLAY_TINY
from tests.helpers.training import train_until

APEX = {**DISTRIBUTED_REPLAY_TINY, "num_workers": 2, "min_sample_timesteps_per_reporting": 200,
        "max_weight_sync_delay": 40, "target_network_update_freq": 200, "hiddens": [16],
        "model": {"fcnet_hiddens": [16]}}
SHARD_CAPACITY = APEX["buffer_size"] // APEX["num_replay_buffer_shards"]


def test_a_killed_replay_shard_is_recreated_and_training_goes_on(ray_local, caplog):
    trainer = ApeXTrainer({**APEX, "recreate_failed_workers": True}, "CartPole-v1")
    try:
        result = train_until(trainer, lambda r: r["num_env_steps_trained"] > 0)
        assert result["num_replay_shard_restarts"] == 0 and result["replay_shard_rows_lost"] == 0
        held = result["replay_shards"][1]["num_entries"]
        assert held > 0
        dead = trainer.replay_shards[1]
        with caplog.at_level(logging.WARNING, logger="rlstack.trainers.common.distributed_replay"):
            ray.kill(dead)
            result = train_until(trainer, lambda r: r["num_replay_shard_restarts"] > 0)
        assert result["num_replay_shard_restarts"] == 1
        # What it held at the last report and what was routed to it since, at most its capacity.
        assert held <= result["replay_shard_rows_lost"] <= SHARD_CAPACITY
        assert trainer.replay_shards[1] is not dead
        assert any("Replay shard 1 of 2 died" in record.getMessage() for record in caplog.records)
        lost = result["replay_shard_rows_lost"]
        sampled, trained = result["timesteps_total"], result["num_env_steps_trained"]
        for _ in range(2):
            result = trainer.train()
        assert result["timesteps_total"] > sampled and result["num_env_steps_trained"] > trained
        assert result["num_replay_shard_restarts"] == 1 and result["replay_shard_rows_lost"] == lost
        assert result["num_healthy_workers"] == 2 and result["num_remote_worker_restarts"] == 0
        assert result["replay_shards"][1]["num_entries"] > 0  # the new shard is fed and replayed from
    finally:
        trainer.stop()


def test_a_killed_replay_shard_without_fault_tolerance_names_the_shard(ray_local):
    trainer = ApeXTrainer(APEX, "CartPole-v1")
    try:
        trainer.train()
        # The shard's process dies under it (as from the OOM killer), not through Ray.
        os.kill(ray.get(trainer.replay_shards[0].__ray_call__.remote(lambda shard: os.getpid())), signal.SIGKILL)
        with pytest.raises(WorkerFailureError, match=r"Replay shard 0 \(of 2, num_replay_buffer_shards\) died: its "
                                                     r"process died.*recreate_failed_workers=True"):
            for _ in range(5):
                trainer.train()
    finally:
        trainer.stop()


def test_apex_ddpg_recreates_a_killed_replay_shard_too(ray_local):
    config = {**DISTRIBUTED_REPLAY_TINY, "num_workers": 2, "actor_hiddens": [16], "critic_hiddens": [16],
              "target_network_update_freq": 160, "recreate_failed_workers": True,
              "exploration_config": {"type": "PerWorkerGaussianNoise", "random_timesteps": 50}}
    trainer = ApexDDPGTrainer(config, "Pendulum-v1")
    try:
        trainer.train()
        ray.kill(trainer.replay_shards[0])
        result = train_until(trainer, lambda r: r["num_replay_shard_restarts"] > 0)
        assert result["num_replay_shard_restarts"] == 1 and result["replay_shard_rows_lost"] > 0
        before = result["timesteps_total"]
        assert trainer.train()["timesteps_total"] > before
    finally:
        trainer.stop()
