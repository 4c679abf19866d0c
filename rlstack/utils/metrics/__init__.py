"""Classic RLlib 1.x's result-key constants (``ray.rllib.utils.metrics``), with rlstack's values.

Each constant is the key rlstack's ``train()`` result uses, so 1.13 scripts that read
``result[NUM_ENV_STEPS_SAMPLED]`` or ``result["timers"][...]`` read rlstack's figures.
Timer constants are the names of ``result["timers"]``'s entries without their
``_time_ms`` suffix (``result["timers"][SAMPLE_TIMER + "_time_ms"]``), as in 1.13.
"""

from __future__ import annotations

# Step counters: top-level result keys (the env-step ones also in ``result["info"]``).
NUM_ENV_STEPS_SAMPLED = "num_env_steps_sampled"
NUM_AGENT_STEPS_SAMPLED = "num_agent_steps_sampled"
NUM_ENV_STEPS_TRAINED = "num_env_steps_trained"
NUM_AGENT_STEPS_TRAINED = "num_agent_steps_trained"
# Target-network updates so far (a top-level result key of DQN and ApeX).
NUM_TARGET_UPDATES = "num_target_updates"
# The trained-step count at the last target-network update (a key of trainer._counters).
LAST_TARGET_UPDATE_TS = "last_target_update_ts"

# Timers (``result["timers"][name + "_time_ms"]``).
TRAINING_ITERATION_TIMER = "training_iteration"
SAMPLE_TIMER = "sample"
LEARN_ON_BATCH_TIMER = "learn"
SYNCH_WORKER_WEIGHTS_TIMER = "synch_weights"

__all__ = [
    "LAST_TARGET_UPDATE_TS",
    "LEARN_ON_BATCH_TIMER",
    "NUM_AGENT_STEPS_SAMPLED",
    "NUM_AGENT_STEPS_TRAINED",
    "NUM_ENV_STEPS_SAMPLED",
    "NUM_ENV_STEPS_TRAINED",
    "NUM_TARGET_UPDATES",
    "SAMPLE_TIMER",
    "SYNCH_WORKER_WEIGHTS_TIMER",
    "TRAINING_ITERATION_TIMER",
]
