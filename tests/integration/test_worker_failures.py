"""Worker failures in the style of RLlib's tests: an env that raises only on chosen worker
indices at a chosen step (who failed is kept in a named actor, so a recreated worker does
not fail again), and a worker killed with ``ray.kill``; for PPO, IMPALA, ApeX, A2C
(synchronous sampling) and A3C (a worker dies while its gradients are in flight).
"""

from __future__ import annotations

import uuid

import pytest
import ray

from rlstack.env.registry import register_env
from rlstack.errors import ConfigError, WorkerFailureError
from rlstack.trainers.a3c import A2CTrainer, A3CTrainer
from rlstack.trainers.dqn import ApeXTrainer
from rlstack.trainers.impala import IMPALATrainer
from rlstack.trainers.ppo import PPOTrainer
from tests.helpers.envs import FaultLog, FaultyCartPole
from tests.helpers.training import train_until

register_env("faulty_cartpole", lambda ctx: FaultyCartPole(ctx))

SMALL_MODEL = {"fcnet_hiddens": [16]}
CONFIGS = {
    "PPO": (PPOTrainer, {"num_workers": 2, "num_cpus_per_worker": 0.5, "rollout_fragment_length": 50,
                         "train_batch_size": 200, "sgd_minibatch_size": 100, "num_sgd_iter": 1, "seed": 0,
                         "model": SMALL_MODEL}),
    "IMPALA": (IMPALATrainer, {"num_workers": 2, "num_cpus_per_worker": 0.5, "rollout_fragment_length": 10,
                               "train_batch_size": 40, "min_time_s_per_reporting": 0,
                               "min_sample_timesteps_per_reporting": 200, "seed": 0, "model": SMALL_MODEL}),
    "APEX": (ApeXTrainer, {"num_workers": 2, "num_cpus_per_worker": 0.5, "num_replay_buffer_shards": 1, "seed": 0,
                           "min_time_s_per_reporting": 0, "min_sample_timesteps_per_reporting": 200,
                           "rollout_fragment_length": 10, "learning_starts": 100, "buffer_size": 2000,
                           "train_batch_size": 16, "max_weight_sync_delay": 40, "target_network_update_freq": 200,
                           "hiddens": [16], "model": SMALL_MODEL}),
    "A2C": (A2CTrainer, {"num_workers": 2, "num_cpus_per_worker": 0.5, "rollout_fragment_length": 20,
                         "train_batch_size": 40, "min_time_s_per_reporting": 0, "seed": 0, "model": SMALL_MODEL}),
    # Each worker always has one gradient computation in flight: a kill or an env failure
    # lands on it.
    "A3C": (A3CTrainer, {"num_workers": 2, "num_cpus_per_worker": 0.5, "rollout_fragment_length": 10,
                         "min_time_s_per_reporting": 0, "min_sample_timesteps_per_reporting": 100, "seed": 0,
                         "model": SMALL_MODEL}),
}
ALGORITHMS = list(CONFIGS)


@pytest.fixture
def fault_log(ray_local):
    name = f"fault_log_{uuid.uuid4().hex[:8]}"
    log = ray.remote(num_cpus=0)(FaultLog).options(name=name).remote()
    yield name, log
    ray.kill(log)


def _trainer(algorithm, log_name, **overrides):
    trainer_class, config = CONFIGS[algorithm]
    env_config = {"bad_workers": [1], "fail_at_step": 60, "fault_log": log_name}
    return trainer_class({**config, "env_config": env_config, **overrides}, "faulty_cartpole")


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_without_fault_tolerance_a_failure_is_a_clear_error(fault_log, algorithm):
    name, log = fault_log
    trainer = _trainer(algorithm, name)
    try:
        with pytest.raises(WorkerFailureError) as info:
            for _ in range(12):
                trainer.train()
        message = str(info.value)
        assert "worker 1 of 2 failed" in message
        assert "injected failure in worker 1" in message
        assert "recreate_failed_workers" in message and "ignore_worker_failures" in message
    finally:
        trainer.stop()


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_ignore_worker_failures_goes_on_with_one_worker_fewer(fault_log, algorithm):
    name, log = fault_log
    trainer = _trainer(algorithm, name, ignore_worker_failures=True)
    try:
        result = train_until(trainer, lambda r: r["num_healthy_workers"] < 2)
        assert result["num_healthy_workers"] == 1
        assert result["num_remote_worker_restarts"] == 0
        assert ray.get(log.failures.remote()) == 1
        before = result["timesteps_total"]
        result = trainer.train()
        result = trainer.train()
        assert result["timesteps_total"] > before  # worker 2 samples on
        assert result["num_healthy_workers"] == 1
    finally:
        trainer.stop()


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_recreate_failed_workers_brings_the_worker_back(fault_log, algorithm):
    name, log = fault_log
    trainer = _trainer(algorithm, name, recreate_failed_workers=True)
    try:
        result = train_until(trainer, lambda r: r["num_remote_worker_restarts"] > 0)
        assert result["num_remote_worker_restarts"] == 1
        assert result["num_healthy_workers"] == 2
        # The new worker 1 samples with the learner's weights and does not fail again.
        new_worker = trainer.workers.remote_workers()[0]
        weights = ray.get(new_worker.get_weights.remote())
        assert set(weights) == set(trainer.get_policy().get_weights())
        before = result["timesteps_total"]
        for _ in range(2):
            result = trainer.train()
        assert result["timesteps_total"] > before
        assert result["num_remote_worker_restarts"] == 1
        assert ray.get(log.failures.remote()) == 1
    finally:
        trainer.stop()


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_killed_worker_is_recreated(ray_local, algorithm):
    trainer_class, config = CONFIGS[algorithm]
    trainer = trainer_class({**config, "recreate_failed_workers": True}, "CartPole-v1")
    try:
        trainer.train()
        ray.kill(trainer.workers.remote_workers()[1])
        result = train_until(trainer, lambda r: r["num_remote_worker_restarts"] > 0)
        assert result["num_remote_worker_restarts"] == 1
        assert result["num_healthy_workers"] == 2
        before = result["timesteps_total"]
        result = trainer.train()
        assert result["timesteps_total"] > before
    finally:
        trainer.stop()


@pytest.mark.parametrize("algorithm", ["A2C", "A3C"])
def test_a_killed_worker_is_dropped_with_ignore_worker_failures(ray_local, algorithm):
    trainer_class, config = CONFIGS[algorithm]
    trainer = trainer_class({**config, "ignore_worker_failures": True}, "CartPole-v1")
    try:
        trainer.train()
        ray.kill(trainer.workers.remote_workers()[1])
        result = train_until(trainer, lambda r: r["num_healthy_workers"] < 2)
        assert result["num_healthy_workers"] == 1
        assert result["num_remote_worker_restarts"] == 0
        before = result["timesteps_total"]
        for _ in range(2):
            result = trainer.train()
        assert result["timesteps_total"] > before  # worker 1 samples on
        assert result["num_healthy_workers"] == 1
    finally:
        trainer.stop()


def test_a_killed_worker_without_fault_tolerance_names_the_worker(ray_local):
    trainer_class, config = CONFIGS["PPO"]
    trainer = trainer_class(config, "CartPole-v1")
    try:
        trainer.train()
        ray.kill(trainer.workers.remote_workers()[0])
        with pytest.raises(WorkerFailureError, match=r"Rollout worker 1 of 2 failed: its process died"):
            trainer.train()
    finally:
        trainer.stop()


def test_evaluation_workers_are_recreated_too(fault_log):
    name, log = fault_log
    trainer_class, config = CONFIGS["PPO"]
    env_config = {"bad_workers": [1], "fail_at_step": 20, "fault_log": name}
    trainer = trainer_class({**config, "num_workers": 0, "env_config": {}, "recreate_failed_workers": True,
                             "evaluation_interval": 1, "evaluation_num_workers": 1, "evaluation_duration": 2,
                             "evaluation_config": {"env_config": env_config}}, "faulty_cartpole")
    try:
        result = trainer.train()
        assert trainer.evaluation_workers.num_remote_worker_restarts == 1
        assert ray.get(log.failures.remote()) == 1
        result = trainer.train()
        assert result["evaluation"]["episodes_this_iter"] == 2
    finally:
        trainer.stop()


@pytest.mark.parametrize(("override", "fragment"), [
    ({"recreate_failed_workers": "yes"}, "recreate_failed_workers must be True or False"),
    ({"num_consecutive_worker_failures_tolerance": -1}, "num_consecutive_worker_failures_tolerance must be"),
    ({"worker_health_probe_timeout_s": 0}, "worker_health_probe_timeout_s must be a number of seconds > 0"),
])
def test_fault_tolerance_keys_are_checked(override, fragment):
    with pytest.raises(ConfigError, match=fragment):
        PPOTrainer({"num_workers": 0, **override}, "CartPole-v1")
