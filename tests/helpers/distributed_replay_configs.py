"""The tiny distributed-replay run every ApeX-family integration test starts from (ApeX
DQN in test_dqn.py, Ape-X DDPG in test_apex_ddpg.py): three numpy-acting workers sharing
1.5 of the ``ray_local`` fixture's 2 CPUs, two replay shards (they take none), learning
from 100 sampled steps on, reporting every 300 sampled steps."""

from __future__ import annotations

from typing import Any

DISTRIBUTED_REPLAY_TINY: dict[str, Any] = {
    "num_workers": 3,
    "num_cpus_per_worker": 0.5,
    "num_replay_buffer_shards": 2,
    "seed": 0,
    "min_time_s_per_reporting": 0,
    "min_sample_timesteps_per_reporting": 300,
    "rollout_fragment_length": 10,
    "learning_starts": 100,
    "buffer_size": 2000,
    "train_batch_size": 16,
}
