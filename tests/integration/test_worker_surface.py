"""RLlib 1.13's WorkerSet accessors on remote workers, and a standalone trainer whose
workers cannot be placed (placement_timeout_s)."""

from __future__ import annotations

import time

import numpy as np
import pytest
import ray

from rlstack.errors import PlacementTimeoutError
from rlstack.trainers.ppo import PPOTrainer
from tests.unit.test_trainer_surface import SMALL, TaskEnv


def test_curriculum_pattern_and_foreach_policy_on_remote_workers(ray_local):
    trainer = PPOTrainer({**SMALL, "num_workers": 2, "num_envs_per_worker": 2}, TaskEnv)
    try:
        workers = trainer.workers
        # 1.13's curriculum pattern: the task is set in each remote worker's sub-envs.
        workers.foreach_worker(lambda w: w.foreach_env(lambda env: env.set_task(2)))
        assert workers.foreach_env(lambda env: env.task) == [[], [2, 2], [2, 2]]  # the driver holds no env
        assert workers.foreach_env_with_context(lambda env, ctx: (ctx.worker_index, ctx.vector_index)) == [
            [], [(1, 0), (1, 1)], [(2, 0), (2, 1)]]
        assert workers.foreach_worker_with_index(lambda w, index: (index, w.worker_index)) == [(0, 0), (1, 1), (2, 2)]
        assert trainer.train()["episode_reward_mean"] == 2.0
        # Remote workers act through a numpy copy of the learner's policy (rollout_inference="auto").
        kinds = workers.foreach_policy(lambda policy, policy_id: (policy_id, type(policy).__name__))
        assert kinds == [("default_policy", "PPOTorchPolicy"), ("default_policy", "NumpyPolicy"),
                         ("default_policy", "NumpyPolicy")]
        learner, *remote = workers.foreach_policy(lambda policy, policy_id: policy.get_weights())
        for weights in remote:
            assert weights.keys() == learner.keys()
            for name in learner:
                np.testing.assert_allclose(weights[name], learner[name], rtol=1e-6)
    finally:
        trainer.stop()


def _wait_for_all_cpus() -> float:
    # Actors and placement groups are freed asynchronously after stop().
    total = ray.cluster_resources()["CPU"]
    deadline = time.monotonic() + 30
    while ray.available_resources().get("CPU", 0) < total and time.monotonic() < deadline:
        time.sleep(0.2)
    return ray.available_resources().get("CPU", 0)


def test_workers_that_cannot_be_placed_fail_after_placement_timeout_and_free_their_share(ray_local):
    total = _wait_for_all_cpus()
    assert total == ray.cluster_resources()["CPU"]
    start = time.monotonic()
    with pytest.raises(PlacementTimeoutError) as info:
        PPOTrainer({**SMALL, "num_workers": 3, "placement_timeout_s": 2}, "CartPole-v1")
    assert time.monotonic() - start < 60
    message = str(info.value)
    assert "placement_timeout_s=2" in message and "3 rollout workers" in message and "stop()" in message
    # The pending placement group was removed (a pending one would take the CPUs the next
    # trainer frees, and never be placed).
    from ray.util import placement_group_table

    assert [group["state"] for group in placement_group_table().values() if group["state"] != "REMOVED"] == []
    assert _wait_for_all_cpus() == total
    # Two workers fit on the 2 CPUs again.
    trainer = PPOTrainer({**SMALL, "num_workers": 2, "placement_timeout_s": 30}, "CartPole-v1")
    trainer.stop()
