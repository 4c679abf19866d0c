"""ApexDDPGTrainer: Ape-X DDPG (Horgan et al. 2018), DDPG's actor and critics on the
distributed prioritized replay of ``trainers/common/distributed_replay.py``.

Many rollout workers act with the deterministic actor plus Ornstein-Uhlenbeck noise of a
constant, per-worker scale (``PerWorkerOrnsteinUhlenbeckNoise``, 1.13's default) and compute their rows' initial priorities
(``worker_side_prioritization``); replay shards hold the rows and a learner thread on the
driver trains DDPG's losses on replayed batches. Classic RLlib 1.13 kept it beside DDPG
(``ray.rllib.agents.ddpg.apex``), and so does rlstack.
"""

from __future__ import annotations

from typing import Any

from rlstack.trainers.common.config import DefaultConfig, merge_config
from rlstack.trainers.ddpg.ddpg import DEFAULT_CONFIG as DDPG_DEFAULT_CONFIG
from rlstack.trainers.ddpg.ddpg import DDPGFamily
from rlstack.trainers.common.distributed_replay import (DISTRIBUTED_REPLAY_CONFIG, DistributedReplayTrainer,
                                                 validate_distributed_replay_config)

# Classic RLlib 1.13's ApeX-DDPG defaults, on top of DDPG's.
APEX_DDPG_DEFAULT_CONFIG: dict[str, Any] = DefaultConfig(merge_config(
    {
        **DDPG_DEFAULT_CONFIG,
        # The distributed replay's keys (trainers/common/distributed_replay.py, 1.x ApeX's defaults).
        **DISTRIBUTED_REPLAY_CONFIG,
    },
    {
        # Worker i of N (from 1) adds OU noise of scale 0.4 ** (1 + 7 (i - 1) / (N - 1)),
        # times ou_base_scale (utils/exploration.py); PerWorkerGaussianNoise is the
        # Gaussian form. The ou_* keys take OrnsteinUhlenbeckNoise's defaults.
        "exploration_config": {"type": "PerWorkerOrnsteinUhlenbeckNoise"},
        "n_step": 3,
        "num_workers": 32,
        "buffer_size": 2000000,
        "learning_starts": 50000,
        "train_batch_size": 512,
        "rollout_fragment_length": 50,
        # Counted in trained steps for Ape-X; with tau 0.002 a polyak step every 500k.
        "target_network_update_freq": 500000,
        "min_sample_timesteps_per_reporting": 25000,
        "min_time_s_per_reporting": 30,
        "worker_side_prioritization": True,
        "prioritized_replay": True,
    },
    "APEX_DDPG",
))


class ApexDDPGTrainer(DDPGFamily, DistributedReplayTrainer):
    """Ape-X DDPG with the classic RLlib API (needs ``num_workers >= 1``; see
    :class:`~rlstack.trainers.common.distributed_replay.DistributedReplayTrainer`)."""

    _name = "APEX_DDPG"
    _default_config = APEX_DDPG_DEFAULT_CONFIG

    @classmethod
    def validate_config(cls, config: dict[str, Any]) -> None:
        super().validate_config(config)
        validate_distributed_replay_config(config, cls._name)
