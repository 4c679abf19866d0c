"""CQLTrainer: conservative Q-learning (Kumar et al. 2020, "Conservative Q-Learning for
Offline Reinforcement Learning", CQL(H)) on SAC, for Box actions, with 1.13's keys.

The critics learn SAC's TD loss plus ``min_q_weight`` times the gap between a soft maximum
of Q over actions the data did not take (``num_actions`` uniform ones and as many from the
current policy at s and at s', each importance-corrected) and Q of the recorded actions:
Q-values of actions the data never shows are pushed down, so the actor does not chase
them. With ``lagrangian`` the weight is learned so that the gap stays near
``lagrangian_thresh``. For its first ``bc_iters`` gradient steps the actor imitates the
recorded actions (behaviour cloning) instead of maximising Q.

The training step is SAC's (:class:`~rlstack.trainers.common.off_policy.OffPolicyTrainer`): with
``input`` the workers read recorded batches (n-step returns computed on them,
``postprocess_inputs``) into the replay buffer, which the learner samples.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from rlstack.errors import ConfigError
from rlstack.trainers.common.config import DefaultConfig, merge_config
from rlstack.trainers.sac.sac import DEFAULT_CONFIG as SAC_DEFAULT_CONFIG
from rlstack.trainers.sac.sac import SACTrainer

CQL_DEFAULT_CONFIG: dict[str, Any] = DefaultConfig(merge_config(
    {
        **SAC_DEFAULT_CONFIG,
        # Gradient steps at the start in which the actor clones the recorded actions.
        "bc_iters": 20000,
        # Temperature of the soft maximum over sampled actions.
        "temperature": 1.0,
        # Actions sampled per state for the soft maximum (uniform, and from the policy at s and s').
        "num_actions": 10,
        # Learn the conservative weight (alpha') so that the gap stays near lagrangian_thresh.
        "lagrangian": False,
        # The gap the Lagrangian form aims for.
        "lagrangian_thresh": 5.0,
        # Weight of the conservative term (times alpha' with lagrangian).
        "min_q_weight": 5.0,
    },
    {
        # Recorded batches get their n-step returns computed (SAC's postprocessing).
        "postprocess_inputs": True,
        # 1.13's: no learning before this many rows are in the buffer.
        "learning_starts": 256,
        # 1.13's: an iteration trains on at least this many rows (one batch of 256 does).
        "min_train_timesteps_per_reporting": 100,
    },
    "CQL",
))


def check_cql_action_space(action_space: gym.Space) -> None:
    """CQL's policies learn Box actions only.

    Raises:
        ConfigError: Naming the space and the offline alternatives.
    """
    if not isinstance(action_space, gym.spaces.Box):
        raise ConfigError(f"CQL learns Box (continuous) actions, got {action_space}; for Discrete actions "
                          "learn offline with BC or MARWIL (or DQN on recorded data)")


class CQLTrainer(SACTrainer):
    """Conservative Q-learning with the classic RLlib API (Box actions)."""

    _name = "CQL"
    _default_config = CQL_DEFAULT_CONFIG
    # It learns one policy from single-agent recorded data (multi-agent offline data is not
    # built yet), unlike SAC.
    supports_multi_agent = False

    @classmethod
    def validate_config(cls, config: dict[str, Any]) -> None:
        super().validate_config(config)
        for key in ("bc_iters", "num_actions"):
            value = config[key]
            if not isinstance(value, int) or isinstance(value, bool) or value < (0 if key == "bc_iters" else 1):
                raise ConfigError(f"{key} must be an integer >= {0 if key == 'bc_iters' else 1}, got {value!r}.")
        for key in ("temperature", "min_q_weight", "lagrangian_thresh"):
            value = config[key]
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0 or (
                    key == "temperature" and value == 0):
                raise ConfigError(f"{key} must be a number {'> 0' if key == 'temperature' else '>= 0'}, "
                                  f"got {value!r}.")
        if not isinstance(config["lagrangian"], bool):
            raise ConfigError(f"lagrangian must be True or False, got {config['lagrangian']!r}.")
        if config["input"] != "sampler" and not config["postprocess_inputs"]:
            raise ConfigError("CQL needs the recorded rows' n-step returns: keep postprocess_inputs=True")

    policy_classes = {"torch": "rlstack.trainers.cql.cql_torch_policy:CQLTorchPolicy",
                      "tf": "rlstack.trainers.cql.cql_tf_policy:CQLTFPolicy"}
