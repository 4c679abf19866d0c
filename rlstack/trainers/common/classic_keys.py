"""Classic RLlib 1.x config keys that change nothing in rlstack, accepted where 1.x put them.

1.13's tuned examples (``rllib/tuned_examples/{ppo,dqn,impala,a3c}``) set keys that pick
between two implementations of the same algorithm, or tune multi-GPU loading rlstack
does not have. A key here is accepted only at a value that means what rlstack does
anyway, and dropped after the check; any other value is a ConfigError that says why.
The ``optimizer`` sub-dict (1.x's ApeX) is handled in ``rlstack.trainers.common.config``.
One key here does matter, to one kind of trainer: ``_disable_execution_plan_api``, which
the Trainer reads from the user's config (``trainer.py``'s ``runs_execution_plan``) for a class
that defines its own 1.x ``execution_plan``.
"""

from __future__ import annotations

from typing import Any

# key -> (values with no effect in rlstack, what rlstack does instead, the algorithms whose
# 1.x config had the key; None: every algorithm).
NO_OP_KEYS: dict[str, tuple[tuple[Any, ...], str, tuple[str, ...] | None]] = {
    # 1.x chose between an execution plan and training_step(). The built-in trainers have
    # only training_step(); a Trainer subclass (or build_trainer class) with its own
    # execution_plan runs it unless this is True (False, 1.x's default: run the plan).
    "_disable_execution_plan_api": ((True, False), "rlstack's built-in trainers run training_step(); a Trainer "
                                    "subclass with its own execution_plan runs it unless this is True", None),
    # 1.x's single-tower optimizer versus its multi-GPU loader: the same SGD either way.
    "simple_optimizer": ((True, False), "rlstack's learner has one SGD path", None),
    # Batches preloaded on the GPU(s) by 1.x's multi-GPU learner; rlstack's learner keeps
    # one batch at a time on its one device.
    "num_multi_gpu_tower_stacks": ((1,), "rlstack's learner keeps one batch at a time on its one device",
                                   ("IMPALA", "APPO")),
    "num_data_loader_buffers": ((1,), "rlstack's learner keeps one batch at a time on its one device",
                                ("IMPALA", "APPO")),
    # 1.x could compress observations in sample batches (LZ4); rlstack's batches hold them
    # as plain arrays (1.x's default, False).
    "compress_observations": ((False,), "rlstack keeps observations as plain arrays in its batches and replay "
                              "buffers (for Atari replay memory, lower buffer_size)", None),
    # 1.x's remote sub-envs answered a poll with whichever were ready after this wait;
    # rlstack's step all remote sub-envs together and wait for every one.
    "remote_env_batch_wait_ms": ((0,), "rlstack's remote sub-envs (remote_worker_envs) step together: each step "
                                 "waits for all of them", None),
    # rlstack's V-trace uses each fragment's last step only as the bootstrap value (1.x's True).
    "vtrace_drop_last_ts": ((True,), "rlstack's V-trace uses each fragment's last step only to bootstrap",
                            ("IMPALA", "APPO")),
    # 1.x could hand models the env's observations unflattened; rlstack's built-in models
    # read a Dict / Tuple observation by its parts either way (1.x's ComplexInputNetwork
    # did the same with it on). A custom model is another matter: see check_no_op_key.
    "_disable_preprocessor_api": ((False, True), "rlstack's built-in models read Dict / Tuple observations by "
                                  "their parts either way", None),
}


def is_no_op_key(key: str, algorithm: str) -> bool:
    """Whether ``key`` is a 1.x key of ``algorithm`` that rlstack accepts at a no-op value."""
    return key in NO_OP_KEYS and (NO_OP_KEYS[key][2] is None or algorithm in NO_OP_KEYS[key][2])


def check_no_op_key(key: str, value: Any, algorithm: str, user: dict[str, Any] | None = None) -> None:
    """Checks a 1.x key that rlstack accepts only at a value with no effect.

    Args:
        key, value: The key and the value given.
        algorithm: The algorithm's name, for the message.
        user: The user's whole config (``_disable_preprocessor_api`` depends on its model).

    Raises:
        ConfigError: If ``value`` would ask for behaviour rlstack does not have.
    """
    from rlstack.errors import ConfigError

    if key == "_disable_preprocessor_api" and value is True and ((user or {}).get("model") or {}).get("custom_model"):
        raise ConfigError(
            "_disable_preprocessor_api=True with a custom_model is not supported by rlstack: a model always gets "
            "input_dict['obs'] in the observation space's structure with Discrete parts one-hot encoded (and "
            "input_dict['obs_flat']), where 1.x handed the raw values. Remove the key and read the one-hot parts.")
    allowed, instead, _ = NO_OP_KEYS[key]
    if not any(value is a or (type(value) is type(a) and value == a) for a in allowed):
        raise ConfigError(
            f"{key}={value!r} is not supported by rlstack's {algorithm}: {instead}, so only "
            f"{' or '.join(repr(a) for a in allowed)} (no effect) is accepted; remove the key."
        )
