"""ApeXTrainer: Ape-X DQN (Horgan et al. 2018), DQN's loss on the distributed prioritized
replay of ``trainers/common/distributed_replay.py``: many rollout workers, each with its own
constant epsilon (``PerWorkerEpsilonGreedy``), compute their rows' initial priorities;
replay shards and a learner thread do the rest.
"""

from __future__ import annotations

from typing import Any

from rlstack.policies.postprocessing import postprocess_n_step
from rlstack.trainers.common.config import DefaultConfig, merge_config
from rlstack.trainers.common.distributed_replay import (DISTRIBUTED_REPLAY_CONFIG, DistributedReplayTrainer,
                                                 validate_distributed_replay_config)
from rlstack.trainers.dqn.dqn import DEFAULT_CONFIG as DQN_DEFAULT_CONFIG
from rlstack.trainers.dqn.dqn import DQNTrainer, validate_dqn_config
from rlstack.utils.exploration import EpsilonGreedy, per_worker_epsilon

# Classic RLlib 1.x ApeX defaults, on top of DQN's.
APEX_DEFAULT_CONFIG: dict[str, Any] = DefaultConfig(merge_config(
    {
        **DQN_DEFAULT_CONFIG,
        # The distributed replay's keys (trainers/common/distributed_replay.py, 1.x ApeX's defaults).
        **DISTRIBUTED_REPLAY_CONFIG,
    },
    {
        "n_step": 3,
        "num_workers": 32,
        "buffer_size": 2000000,
        "learning_starts": 50000,
        "train_batch_size": 512,
        "rollout_fragment_length": 50,
        # Counted in trained steps for ApeX.
        "target_network_update_freq": 500000,
        "min_sample_timesteps_per_reporting": 25000,
        "min_time_s_per_reporting": 30,
        "exploration_config": {"type": "PerWorkerEpsilonGreedy"},
        "worker_side_prioritization": True,
    },
    "APEX",
))


class ApeXTrainer(DistributedReplayTrainer):
    """Ape-X DQN with the classic RLlib API (needs ``num_workers >= 1``; see
    :class:`~rlstack.trainers.common.distributed_replay.DistributedReplayTrainer`)."""

    _name = "APEX"
    _default_config = APEX_DEFAULT_CONFIG
    postprocess_fn = staticmethod(postprocess_n_step)
    numpy_policy_class = DQNTrainer.numpy_policy_class

    @classmethod
    def validate_config(cls, config: dict[str, Any]) -> None:
        validate_dqn_config(config, cls._name)
        validate_distributed_replay_config(config, cls._name)

    policy_classes = {"torch": "rlstack.trainers.dqn.dqn_torch_policy:DQNTorchPolicy",
                      "tf": "rlstack.trainers.dqn.dqn_tf_policy:DQNTFPolicy"}

    def extra_results(self) -> dict[str, Any]:
        results = super().extra_results()
        num_workers = self.workers.num_remote_workers
        if self.config["exploration_config"].get("type") == "PerWorkerEpsilonGreedy":
            results["per_worker_epsilon"] = [per_worker_epsilon(i, num_workers) for i in range(1, num_workers + 1)]
        elif isinstance(exploration := getattr(self.learner_policy, "exploration", None), EpsilonGreedy):
            # (a multi-agent run's first policy may be another algorithm's, without one)
            epsilon = exploration.epsilon(self._counters["num_env_steps_sampled"])
            results["per_worker_epsilon"] = [epsilon] * num_workers
        return results


# RLlib 1.13's spelling (`from ray.rllib.agents.dqn import ApexTrainer`).
ApexTrainer = ApeXTrainer
