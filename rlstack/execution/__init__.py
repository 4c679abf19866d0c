"""RLlib 1.13's ``ray.rllib.execution``: replay buffers, learner threads, and the
operators of 1.x's execution plans (``from rlstack.execution import ParallelRollouts``).

Each name is imported from its module on first use (the learner thread imports Ray).
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> the module that defines it (1.13's package exports).
_EXPORTS = {
    "CollectMetrics": "metric_ops",
    "ConcatBatches": "rollout_ops",
    "Concurrently": "concurrency_ops",
    "LearnerThread": "learner_thread",
    "MultiAgentReplayBuffer": "buffers.multi_agent_replay_buffer",
    "MultiGPUTrainOneStep": "train_ops",
    "OncePerTimeInterval": "metric_ops",
    "OncePerTimestepsElapsed": "metric_ops",
    "ParallelRollouts": "rollout_ops",
    "PrioritizedReplayBuffer": "replay_buffer",
    "Replay": "replay_ops",
    "ReplayBuffer": "replay_buffer",
    "SelectExperiences": "rollout_ops",
    "StandardMetricsReporting": "metric_ops",
    "StandardizeFields": "rollout_ops",
    "StoreToReplayBuffer": "replay_ops",
    "TrainOneStep": "train_ops",
    "UpdateTargetNetwork": "train_ops",
    "synchronous_parallel_sample": "rollout_ops",
    "train_one_step": "train_ops",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rlstack.execution' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
