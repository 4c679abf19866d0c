"""rlstack's long-lived actors record no Ray task events: the GCS keeps the events of the
last 100k actor calls, so with them a long run's gcs_server grew by hundreds of MiB
(bench/soak.py, RELIABILITY.md: ApeX's +132% in 100k env steps). Rollout workers and
ApeX's replay shards, recreated ones included, are made without them."""

from __future__ import annotations

from rlstack.trainers.dqn import ApeXTrainer
from tests.helpers.distributed_replay_configs import DISTRIBUTED_REPLAY_TINY

APEX = {**DISTRIBUTED_REPLAY_TINY, "num_workers": 1, "num_replay_buffer_shards": 1, "hiddens": [16],
        "model": {"fcnet_hiddens": [16]}}


def test_rollout_workers_and_replay_shards_record_no_task_events(ray_local):
    trainer = ApeXTrainer({**APEX, "recreate_failed_workers": True}, "CartPole-v1")
    try:
        trainer.train()
        handles = [*trainer.workers.remote_workers(), *trainer.replay_shards]
        # A recreated shard comes from the same factory.
        handles.append(trainer._make_shard(0))
        # The handle's default for its method calls (Ray's ActorHandle attribute).
        assert [h._ray_enable_task_events for h in handles] == [False] * len(handles)
    finally:
        trainer.stop()
