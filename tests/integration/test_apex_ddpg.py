"""Ape-X DDPG: DDPG's policy on the distributed replay (3 numpy-acting workers with
per-worker noise scales, 2 replay shards, a learner thread), both frameworks: it samples,
trains, reports the distributed-replay keys, checkpoints the workers' exploration state and
restores to the same greedy actions; without remote workers it is refused."""

from __future__ import annotations

import time

import numpy as np
import pytest

from rlstack.errors import ConfigError
from rlstack.trainers.ddpg import APEX_DDPG_DEFAULT_CONFIG, ApexDDPGTrainer
from rlstack.utils.exploration import per_worker_epsilon
from tests.helpers.distributed_replay_configs import DISTRIBUTED_REPLAY_TINY

TINY = {
    **DISTRIBUTED_REPLAY_TINY,
    "actor_hiddens": [16],
    "critic_hiddens": [16],
    "target_network_update_freq": 160,
    "exploration_config": {"type": "PerWorkerGaussianNoise", "random_timesteps": 50},
}


def test_defaults_are_classic_apex_ddpg():
    config = APEX_DDPG_DEFAULT_CONFIG
    assert config["exploration_config"]["type"] == "PerWorkerOrnsteinUhlenbeckNoise"
    assert (config["n_step"], config["num_workers"], config["train_batch_size"]) == (3, 32, 512)
    assert config["worker_side_prioritization"] and config["num_replay_buffer_shards"] == 4


def test_apex_ddpg_needs_remote_workers():
    with pytest.raises(ConfigError, match="num_workers"):
        ApexDDPGTrainer({"num_workers": 0}, "Pendulum-v1")


def test_apex_ddpg_trains_checkpoints_and_restores(ray_local, framework, tmp_path):
    trainer = ApexDDPGTrainer({**TINY, "framework": framework}, "Pendulum-v1")
    results = [trainer.train() for _ in range(3)]
    # The learner thread runs asynchronously; give a slow first compile a few more rounds.
    while results[-1]["num_env_steps_trained"] == 0 and len(results) < 15:
        results.append(trainer.train())
    result = results[-1]
    assert result["num_env_steps_trained"] > 0 and result["num_healthy_workers"] == 3
    assert len(result["replay_shards"]) == 2 and result["sample_throughput"] > 0
    stats = result["info"]["learner"]["default_policy"]["learner_stats"]
    assert np.isfinite(stats["critic_loss"]) and np.isfinite(stats["actor_loss"])
    # Each worker acts with its own constant noise scale; the driver's copy with none.
    scales = trainer.workers.foreach_worker(lambda w: w.sampling_policy.exploration.scale(10**6), local=False)
    assert scales == pytest.approx([per_worker_epsilon(i, 3) for i in range(1, 4)])
    assert trainer.learner_policy.exploration.scale(10**6) == 0.0

    # The learner thread keeps learning after train() returns: let it drain its queue so
    # the weights saved are the ones acted with (it never calls task_done, so
    # unfinished_tasks counts every batch ever queued).
    deadline = time.monotonic() + 60
    while trainer.learner.num_steps < trainer.learner.inqueue.unfinished_tasks:
        trainer.learner.check()
        assert time.monotonic() < deadline, "the learner thread did not drain its queue"
        time.sleep(0.01)
    path = trainer.save(str(tmp_path / "ckpt"))
    observations = np.random.default_rng(0).uniform(-1, 1, (8, 3)).astype(np.float32)
    expected = [trainer.compute_single_action(obs, explore=False) for obs in observations]
    trainer.stop()
    restored = ApexDDPGTrainer({**TINY, "framework": framework}, "Pendulum-v1")
    try:
        restored.restore(path)
        actions = [restored.compute_single_action(obs, explore=False) for obs in observations]
        np.testing.assert_allclose(np.array(actions), np.array(expected), rtol=1e-5, atol=1e-6)
    finally:
        restored.stop()
