"""Classic RLlib 1.13's ``replay_buffer_config`` for the replay-based trainers (DQN, ApeX, SAC, TD3,
DDPG), mapped onto rlstack's keys.

1.13 moved the replay settings of the DQN family into one sub-dict (its tuned examples
write ``replay_buffer_config: {type: MultiAgentPrioritizedReplayBuffer, capacity: 50000,
learning_starts: 1000}``); rlstack keeps 1.x's earlier top-level keys (``buffer_size``,
``prioritized_replay``, ``learning_starts``, ...). :func:`apply_replay_buffer_config`
copies each sub-key onto its top-level key when the config is validated; where both are
given, the sub-dict wins, as it did in 1.13.
"""

from __future__ import annotations

from typing import Any

from rlstack.errors import ConfigError, did_you_mean

# 1.13 buffer type -> prioritized replay? (a dotted path's last part counts).
BUFFER_TYPES = {
    "MultiAgentPrioritizedReplayBuffer": True,
    "PrioritizedReplayBuffer": True,
    "MultiAgentReplayBuffer": False,
    "ReplayBuffer": False,
}

# Sub-keys copied onto rlstack's top-level keys of the same meaning.
RENAMED = {
    "capacity": "buffer_size",
    "learning_starts": "learning_starts",
    "prioritized_replay": "prioritized_replay",
    "prioritized_replay_alpha": "prioritized_replay_alpha",
    "prioritized_replay_beta": "prioritized_replay_beta",
    "prioritized_replay_eps": "prioritized_replay_eps",
    "worker_side_prioritization": "worker_side_prioritization",
}


def _no_op_values(algorithm: str) -> dict[str, tuple[tuple[Any, ...], str]]:
    # Sub-key -> (values meaning what rlstack does anyway, why); others are errors.
    # ApeX's distributed replay (APEX, APEX_DDPG) keeps rows in replay shard actors.
    apex = algorithm.startswith("APEX")
    return {
        # Rows are single steps: no stored sequences (rlstack has no recurrent models).
        "replay_sequence_length": ((1,), "rlstack replays single steps (no recurrent models)"),
        # 1.13's switch to its new buffer classes; rlstack has one implementation.
        "_enable_replay_buffer_api": ((True, False), "rlstack has one replay implementation"),
        # Multi-agent buffers' mode; rlstack trains one policy.
        "replay_mode": (("independent",), "rlstack trains one policy"),
        # ApeX keeps its rows in the replay shards, never in the driver; the others always
        # in the driver.
        "no_local_replay_buffer": (((True,) if apex else (False,)),
                                   f"{algorithm} keeps rows in its replay shards only" if apex
                                   else f"{algorithm} keeps its replay buffer in the driver"),
        # 1.13's SAC/DDPG files say what one stored unit is; rlstack stores single steps.
        "storage_unit": (("timesteps",), "rlstack's buffers store single timesteps"),
        # Where Ray places ApeX's shards: rlstack leaves it to Ray's scheduler (on one
        # machine both values mean the same).
        "replay_buffer_shards_colocated_with_driver": ((True, False), "rlstack leaves shard placement to Ray"),
    }


def apply_replay_buffer_config(config: dict[str, Any], algorithm: str) -> None:
    """Copies ``config["replay_buffer_config"]`` onto rlstack's replay keys, then empties it.

    Args:
        config: A merged config of a replay-based trainer (changed in place).
        algorithm: The trainer's name ("DQN", "APEX", "SAC", ...), for messages.

    Raises:
        ConfigError: For a sub-key or buffer type rlstack does not have, naming the fix.
    """
    section = config.get("replay_buffer_config")
    if not section:
        config["replay_buffer_config"] = {}
        return
    if not isinstance(section, dict):
        raise ConfigError(f"replay_buffer_config for {algorithm} must be a dict of sub-keys, got "
                          f"{type(section).__name__} ({section!r}); e.g. replay_buffer_config: {{capacity: 50000}}.")
    no_op = _no_op_values(algorithm)
    valid = ("type", *RENAMED, *no_op)
    for key, value in section.items():
        if key == "type":
            name = value.rsplit(".", 1)[-1] if isinstance(value, str) else None
            if name not in BUFFER_TYPES:
                raise ConfigError(
                    f"replay_buffer_config.type={value!r} is not available in rlstack's {algorithm}; use one of "
                    f"{', '.join(BUFFER_TYPES)} (a name; rlstack's buffers are rlstack.execution.replay_buffer)."
                )
            config["prioritized_replay"] = BUFFER_TYPES[name]
        elif key in RENAMED:
            config[RENAMED[key]] = value
        elif key in no_op:
            allowed, why = no_op[key]
            if not any(value is a or (type(value) is type(a) and value == a) for a in allowed):
                raise ConfigError(f"replay_buffer_config.{key}={value!r} is not supported by rlstack's {algorithm} "
                                  f"({why}); only {' or '.join(repr(a) for a in allowed)} is accepted: remove it.")
        else:
            raise ConfigError(f"Unknown key {key!r} in replay_buffer_config of {algorithm}{did_you_mean(key, valid)} "
                              f"Accepted: {', '.join(valid)}.")
    config["replay_buffer_config"] = {}
