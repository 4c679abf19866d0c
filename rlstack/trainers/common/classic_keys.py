"""Classic RLlib 1.x config keys that change nothing in rlstack, accepted where 1.x put them.

1.13's tuned examples (``rllib/tuned_examples/{ppo,dqn,impala,a3c}``) set keys that pick
between two implementations of the same algorithm, or tune multi-GPU loading rlstack
does not have; 1.13's config objects (``TrainerConfig.to_dict()``) write every key 1.13
had, rlstack's no-op ones among them. A key here is accepted only at a value that means
what rlstack does anyway, and dropped after the check; any other value is a ConfigError
that says why. The same table serves dicts, YAML files and the config objects
(``rlstack.trainers.trainer_config``). The ``optimizer`` sub-dict (1.x's ApeX) is handled
in ``rlstack.trainers.common.config``. One key here does matter, to one kind of trainer:
``_disable_execution_plan_api``, which the Trainer reads from the user's config
(``trainer.py``'s ``runs_execution_plan``) for a class that defines its own 1.x
``execution_plan``.
"""

from __future__ import annotations

from typing import Any

# key -> (values with no effect in rlstack, None for any value; what rlstack does instead;
# the algorithms whose 1.x config had the key, None: every algorithm). An algorithm whose
# DEFAULT_CONFIG has the key (A2C's and A3C's sample_async) takes it as its own.
NO_OP_KEYS: dict[str, tuple[tuple[Any, ...] | None, str, tuple[str, ...] | None]] = {
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
    # 1.x's TF policies needed this to return several losses with as many optimizers (APPO's
    # _separate_vf_optimizer set it itself); rlstack's TF and torch learners step each
    # optimizer on its own loss whenever a policy's make_optimizers() returns several.
    "_tf_policy_handles_more_than_one_loss": ((True, False), "rlstack's learners take one loss per optimizer "
                                              "whenever a policy has several (make_optimizers)", None),
    # 1.x could hand models the env's observations unflattened; rlstack's built-in models
    # read a Dict / Tuple observation by its parts either way (1.x's ComplexInputNetwork
    # did the same with it on). A custom model is another matter: see check_no_op_key.
    "_disable_preprocessor_api": ((False, True), "rlstack's built-in models read Dict / Tuple observations by "
                                  "their parts either way", None),
    # 1.x could keep Dict / Tuple actions nested in batches and model inputs (True);
    # rlstack's policies, batches and files hold them flat, 1.x's default.
    "_disable_action_flattening": ((False,), "rlstack's policies and batches hold a Dict / Tuple action as one flat "
                                   "vector (1.x's default) and have no nested form", None),
    # 1.x's up-front env checker; rlstack checks each observation against the space as it
    # samples, which covers what that checker reported, so either value means that.
    "disable_env_checking": ((False, True), "rlstack runs no up-front env checker; it checks observations against "
                             "the observation space as it samples", None),
    # 1.x raised after this many tf.function retraces of an eager policy (None: never);
    # rlstack's TF policies do not count them, which is 1.x's None. 20 is 1.x's default.
    "eager_max_retraces": ((20, None), "rlstack's TF policies do not count tf.function retraces", None),
    # Environment variables 1.x set in the driver / in each rollout worker.
    "extra_python_environs_for_driver": (({},), "rlstack sets no environment variables in its processes; set them "
                                         "before starting, or in Ray's runtime_env (ray.init(runtime_env="
                                         "{'env_vars': {...}}))", None),
    "extra_python_environs_for_worker": (({},), "rlstack sets no environment variables in its workers; set them in "
                                         "Ray's runtime_env (ray.init(runtime_env={'env_vars': {...}}))", None),
    # 1.x's testing sampler that replayed one batch at infinite speed.
    "fake_sampler": ((False,), "rlstack has no fake sampler: its workers always step their envs", None),
    # 1.x's switch for the `perf` entry of results (True, its default); rlstack always
    # reports it.
    "log_sys_usage": ((True,), "results always carry the machine's CPU and memory use under `perf`", None),
    # 1.x's wait for the workers' episode metrics, after which late ones came an iteration
    # later. rlstack collects them after each training step from every worker and waits for
    # all of them, so any value means the same; collect_metrics_timeout is 1.x's older name.
    "metrics_episode_collection_timeout_s": (None, "rlstack collects every worker's finished episodes after each "
                                             "training step and waits for all of them", None),
    "collect_metrics_timeout": (None, "1.x's older name of metrics_episode_collection_timeout_s: rlstack collects "
                                "every worker's finished episodes after each training step and waits for all of "
                                "them", None),
    # 1.x's background sampling thread (slightly off-policy); rlstack's workers sample when
    # asked. A3C and A2C have sample_async as a key of their own.
    "sample_async": ((False,), "rlstack's rollout workers sample synchronously, when the trainer asks (A3C learns "
                     "asynchronously by design)", None),
    # 1.x's default is its own SimpleListCollector class, so a config sets the key only to
    # plug in a collector of its own, which rlstack's sampler has no place for; None (what
    # rlstack's config objects write) stands for the default.
    "sample_collector": ((None,), "rlstack's rollout workers have one collector and take no other (change what each "
                         "trajectory holds in a callback's on_postprocess_trajectory or on_sample_end instead)", None),
    # 1.x's MARWIL computed its advantages without GAE whatever use_gae said: the
    # discounted returns minus the value estimate, as rlstack's MARWIL and BC do.
    "use_gae": ((True, False), "MARWIL's advantages are the discounted returns minus the value estimate (1.x's "
                "MARWIL did not read use_gae either)", ("MARWIL", "BC")),
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
    from rlstack.models.catalog import DISABLE_PREPROCESSOR_API_WITH_CUSTOM_MODEL

    if key == "_disable_preprocessor_api" and value is True and ((user or {}).get("model") or {}).get("custom_model"):
        raise ConfigError(DISABLE_PREPROCESSOR_API_WITH_CUSTOM_MODEL)
    allowed, instead, _ = NO_OP_KEYS[key]
    if allowed is not None and not any(value is a or (type(value) is type(a) and value == a) for a in allowed):
        raise ConfigError(
            f"{key}={value!r} is not supported by rlstack's {algorithm}: {instead}, so only "
            f"{' or '.join(repr(a) for a in allowed)} (no effect) is accepted; remove the key."
        )
