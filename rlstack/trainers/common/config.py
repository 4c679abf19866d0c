"""COMMON_CONFIG and the merge / validation every trainer's config goes through.

A config is a plain dict. ``COMMON_CONFIG`` sits under the algorithm's
``DEFAULT_CONFIG``, which sits under the user's dict. Sub-dicts listed in
``DEEP_MERGE_KEYS`` merge key by key; every other key replaces. Keys follow classic
RLlib so that old configs and tuned YAML files run unchanged; a key rlstack does not
know is an error naming the closest valid keys.
"""

from __future__ import annotations

import copy
import numbers
from typing import Any

from rlstack.errors import ConfigError, did_you_mean
from rlstack.evaluation.callbacks import DefaultCallbacks, check_callbacks
from rlstack.models.catalog import MODEL_DEFAULTS, validate_model_config
from rlstack.offline.resolve import check_offline_config
from rlstack.trainers.common.classic_keys import check_no_op_key, is_no_op_key
from rlstack.trainers.common.deprecated_keys import replace_deprecated_keys
from rlstack.utils.filters import FILTERS
from rlstack.utils.framework import check_framework

COMMON_CONFIG: dict[str, Any] = {
    # === Environment ===
    # The env: a gymnasium id, a name given to register_env, an Env class or a creator.
    "env": None,
    # Passed to the env creator (as an EnvContext) or to gymnasium.make as kwargs.
    "env_config": {},
    # The spaces of a trainer without an env (env: None), whose experience comes from an
    # input (files, a PolicyServerInput); with an env they come from it.
    "observation_space": None,
    # The action space of such a trainer (None: the env's).
    "action_space": None,
    # Number of remote rollout workers (Ray actors); 0 samples in the driver.
    "num_workers": 2,
    # Sub-envs per worker, stepped together with one batched forward pass.
    "num_envs_per_worker": 1,
    # Steps each sub-env takes per sample() call.
    "rollout_fragment_length": 200,
    # "truncate_episodes": fixed-length fragments, cut episodes bootstrap from V(s);
    # "complete_episodes": only whole episodes go into batches.
    "batch_mode": "truncate_episodes",
    # Cut episodes after this many steps (as a truncation, so they bootstrap); None: the
    # env's own time limit only.
    "horizon": None,
    # 1.x's key: no episode end counts as terminal; every one is recorded as a truncation,
    # so value targets bootstrap from the last observation (for envs that end on a time
    # limit that is not part of the task and do not say so with `truncated`).
    "no_done_at_end": False,
    # At the horizon, end the episode's record (truncated, bootstrapped) but not the env's
    # episode: the next record continues from the same state without a reset (1.x's key,
    # for envs whose episodes never end).
    "soft_horizon": False,
    # With rollout workers, also build the envs in the driver's local worker (1.x's key):
    # callbacks or code there may then reach them (foreach_env, get_sub_environments).
    "create_env_on_driver": False,
    # Reward clipping: None (off, except the sign for Atari envs under "deepmind"
    # preprocessing), False (off), True (sign of the reward) or a float bound.
    "clip_rewards": None,
    # "deepmind": Atari (ALE) envs get the standard preprocessing (no-op reset, frame skip
    # 4, model.dim x model.dim grey screens, 4 stacked if model.framestack; env/atari.py).
    # Envs it does not take, and all envs under None or "rllib" (1.x's two names for its own
    # preprocessors), get classic RLlib's: (210, 160, 3) screens cropped, resized to
    # model.dim, grey if model.grayscale, in [-1, 1) if model.zero_mean else [0, 1]; an ALE
    # game's RAM in [-1, 1). Other envs are used as they are.
    "preprocessor_pref": "deepmind",
    # Box actions: the policy acts in [-1, 1], mapped onto the action space's bounds.
    "normalize_actions": True,
    # Box actions: clip to the bounds (when not normalised).
    "clip_actions": False,
    # "NoFilter" or "MeanStdFilter" (running mean/std normalisation, synced across workers),
    # or classic RLlib's custom filter: a function of the observation shape returning a
    # rlstack.utils.filter.Filter (see rlstack.utils.filters.ClassicFilter).
    "observation_filter": "NoFilter",
    # Sync MeanStdFilter statistics across workers after every iteration.
    "synchronize_filters": True,
    # A sub-env whose step() or reset() raises is closed, rebuilt and reset while the
    # others go on; its broken episode is dropped from the batch and the episode metrics
    # and counted in num_env_restarts. False: the error stops training, naming the sub-env.
    "restart_failed_sub_environments": False,
    # Run each of a worker's num_envs_per_worker (> 1) sub-envs in a Ray actor of its own
    # and step them in parallel: for envs whose step() is slow. An env given as a class
    # becomes the actor, so foreach_env's func gets actor handles (env.method.remote()).
    "remote_worker_envs": False,
    # ...and gives up (EnvFailureError) on a sub-env that failed this many times in a row
    # without finishing an episode in between: restarting it again would only spin...
    "num_consecutive_env_restarts_tolerance": 10,
    # ...or on a worker whose sub-envs failed in this many sample fragments in a row that
    # yielded no row at all (the envs fail faster than they run).
    "num_consecutive_failed_fragments_tolerance": 10,
    # === Learning ===
    # Discount factor.
    "gamma": 0.99,
    # Learning rate.
    "lr": 0.0001,
    # [[timestep, lr], ...] piecewise-linear schedule over sampled steps; None: constant lr.
    "lr_schedule": None,
    # Adam's epsilon.
    "adam_epsilon": 1e-8,
    # Clip gradients to this global norm; None: no clipping.
    "grad_clip": None,
    # Steps per train batch.
    "train_batch_size": 200,
    # Neural network (see rlstack.models.MODEL_DEFAULTS for every key).
    "model": copy.deepcopy(MODEL_DEFAULTS),
    # Classic 1.x ApeX's place for num_replay_buffer_shards, max_weight_sync_delay and
    # debug (False only): moved to the top-level keys of those names when merged. The
    # optimizer itself is Adam with lr, lr_schedule, adam_epsilon and grad_clip.
    "optimizer": {},
    # "torch" or "tf" ("tf2" is an alias of "tf"); None (1.13's setting) imports neither,
    # for runs whose every policy is a Policy subclass of your own that uses neither.
    "framework": "torch",
    # Accepted for classic TF configs; TF policies always run as tf.function.
    "eager_tracing": True,
    # TensorFlow's thread pools (framework="tf"; classic RLlib's keys, of whose
    # tf.ConfigProto options TF 2 code has only these two): the driver's, where the
    # learner runs (None: one intra-op thread for models over vector observations,
    # TF's default of one per core otherwise)...
    "local_tf_session_args": {"intra_op_parallelism_threads": None, "inter_op_parallelism_threads": None},
    # ...and each rollout worker's that acts through TF (None: one thread each). 0 lets
    # TF pick. A process's first TF policy sets them; they cannot change afterwards.
    "tf_session_args": {"intra_op_parallelism_threads": None, "inter_op_parallelism_threads": None},
    # How rollout workers compute actions: "auto" runs built-in dense models in numpy on
    # CPU workers (faster at small batches, and workers never import torch or TF),
    # "numpy" insists on that, "framework" uses the torch/TF policy everywhere.
    "rollout_inference": "auto",
    # Sample actions (True) or take the distribution's mode (False) while training.
    "explore": True,
    # Exploration strategy; policy-gradient algorithms sample from their distribution.
    "exploration_config": {"type": "StochasticSampling"},
    # === Evaluation ===
    # Evaluate every this many training iterations; None: never (call evaluate()).
    "evaluation_interval": None,
    # How much to evaluate each time, in evaluation_duration_unit; "auto" (with
    # evaluation_parallel_to_training): rounds of one episode (or one fragment) per
    # evaluation worker for as long as the training step takes, at least one round.
    "evaluation_duration": 10,
    # "episodes" or "timesteps".
    "evaluation_duration_unit": "episodes",
    # Config overrides for evaluation (merged over the training config); by default
    # evaluation acts greedily.
    "evaluation_config": {"explore": False},
    # Remote evaluation workers; 0 evaluates in the driver.
    "evaluation_num_workers": 0,
    # Evaluate on the evaluation workers while the iteration's training step runs (with
    # the weights from before it), instead of after it; needs evaluation_num_workers >= 1.
    "evaluation_parallel_to_training": False,
    # True in the config of the evaluation workers (and their policies), False in training's:
    # set by the trainer, for callbacks and custom models that act otherwise when evaluated
    # (worker.policy_config["in_evaluation"]). evaluation_config cannot turn it off.
    "in_evaluation": False,
    # Every result carries the last evaluation's metrics under `evaluation`, also in the
    # iterations that do not evaluate (NaN rewards before the first one): for Tune stoppers
    # and schedulers that read evaluation metrics every iteration.
    "always_attach_evaluation_results": False,
    # === Reporting ===
    # Smooth episode_reward_mean and friends over this many recent episodes.
    "metrics_smoothing_episodes": 100,
    # Run training_step again until this much time has passed in the iteration.
    "min_time_s_per_reporting": None,
    # Run training_step again until this many steps were sampled in the iteration.
    "min_sample_timesteps_per_reporting": None,
    # Run training_step again until this many steps were trained on in the iteration (env
    # steps, or agent steps with multiagent.count_steps_by: agent_steps).
    "min_train_timesteps_per_reporting": None,
    # Report each custom metric as the list of its values over the smoothing window's
    # episodes (result["custom_metrics"][name]) instead of <name>_mean / _min / _max.
    "keep_per_episode_custom_metrics": False,
    # === Resources ===
    # GPUs for the learner (the driver's policy): 0, a fraction, or 1 (one learner GPU).
    "num_gpus": 0,
    # Testing aid (classic RLlib's): ask Ray for no GPUs and keep every policy on the CPU
    # while num_gpus / num_gpus_per_worker stay set, so GPU configs run on CPU machines.
    "_fake_gpus": False,
    # CPUs for the driver process (in Tune's placement group).
    "num_cpus_for_driver": 1,
    # CPUs reserved for each rollout worker.
    "num_cpus_per_worker": 1,
    # GPUs for each rollout worker's policy.
    "num_gpus_per_worker": 0,
    # Extra Ray resources for each rollout worker, e.g. {"spot": 1}.
    "custom_resources_per_worker": {},
    # Placement-group strategy of the trial's bundles: PACK, SPREAD, STRICT_PACK, STRICT_SPREAD.
    "placement_strategy": "PACK",
    # Seconds a standalone trainer waits for the CPUs/GPUs of its remote workers before it
    # raises PlacementTimeoutError (None: wait for ever, e.g. while an autoscaler adds
    # nodes). Under Tune, Tune places the trial and this key is not used.
    "placement_timeout_s": 300,
    # === Fault tolerance ===
    # A rollout or evaluation worker whose actor dies or whose env/policy raises:
    # recreate it (fresh envs, the learner's weights and filter state) and go on...
    "recreate_failed_workers": False,
    # ...or go on without it (False for both: train() raises an error naming the worker).
    "ignore_worker_failures": False,
    # Give up once one worker has failed this many times in a row.
    "num_consecutive_worker_failures_tolerance": 100,
    # Seconds a recreated worker has to answer its first ping...
    "worker_health_probe_timeout_s": 60,
    # ...and to take the weights and filter state.
    "worker_restore_timeout_s": 1800,
    # === Multi-agent (rlstack/trainers/common/multi_agent.py) ===
    # Several policies in one env: which there are, which agent acts with which, and which
    # learn (each sub-key below; the docs' "Multi-agent" page shows them at work).
    "multiagent": {
        # {policy_id: PolicySpec(policy_class, observation_space, action_space, config)}, 1.13's
        # 4-tuples in its place (or, in YAML, 4-item lists or mappings of those field names), or
        # a list / set of ids whose spaces come from the env. Empty: a MultiAgentEnv's agents
        # all act with one "default_policy".
        "policies": {},
        # policy_mapping_fn(agent_id, episode, worker, **kwargs) -> policy id (1.13's older
        # (agent_id) and (agent_id, episode) forms too), or its import path "module:function"
        # (YAML). None: every agent -> the only policy, or "default_policy".
        "policy_mapping_fn": None,
        # The policies that learn: a list of ids, or fn(policy_id, batch) -> bool; None: all.
        # The others act (fixed or hand-written policies) and their weights stay as they are.
        "policies_to_train": None,
        # observation_fn(agent_obs, worker, base_env, policies, episode, **kwargs) -> agent_obs:
        # rewrites each step's {agent_id: obs} before the policies see it (or an import path).
        "observation_fn": None,
        # What rollout_fragment_length and train_batch_size count: "env_steps" (each step of
        # the env once) or "agent_steps" (each agent's action once).
        "count_steps_by": "env_steps",
        # 1.13's size of its policy cache; rlstack keeps every policy in memory (no effect).
        "policy_map_capacity": 100,
        # 1.13's directory for policies swapped out of that cache (no effect).
        "policy_map_cache": None,
        # Replay-based algorithms replay each policy's rows on their own ("independent");
        # 1.13's "lockstep" is not supported.
        "replay_mode": "independent",
    },
    # === Offline data (rlstack/offline) ===
    # Where experience comes from: "sampler" (the envs), a JSON file, glob or directory
    # (or a list of them) of recorded batches, "dataset" (Ray Data over input_config's
    # files), {source: probability, ...} mixing those ({"sampler": 0.4, "/data": 0.6}),
    # or fn(ioctx) -> InputReader.
    "input": "sampler",
    # input: "dataset"'s {"format": "json" | "parquet", "path": files}.
    "input_config": {},
    # 1.13's flag for files whose Box actions are in the env's units. rlstack's own files
    # hold the policy's actions (in [-1, 1] where normalize_actions applies), which are
    # read as they are; mapping env-unit actions (False with normalize_actions) is not
    # done yet: record such files in the policy's form.
    "actions_in_input_normalized": False,
    # Run the policy's trajectory postprocessing (advantages, n-step) on recorded batches.
    "postprocess_inputs": False,
    # Batches of the input kept and handed out in a random order (0: as read).
    "shuffle_buffer_size": 0,
    # Where each sampled batch is written as a JSON line (1.13's layout): None (nowhere),
    # a directory, "logdir" (the trial's directory), or fn(ioctx) -> OutputWriter.
    "output": None,
    # Options of the output writer: {"format": "json" (1.13's lines, default) | "parquet"
    # (one row per step, for Ray Data and columnar tools)}.
    "output_config": {},
    # Columns written packed (LZ4 + base64) rather than as JSON lists.
    "output_compress_columns": ["obs", "new_obs"],
    # Bytes per output file before the next file starts.
    "output_max_file_size": 64 * 1024 * 1024,
    # Off-policy estimates of the policy's value, from the batches read: {name: {"type":
    # "is" | "wis" | class | "module:Class", ...}} (1.13); reported under
    # result["off_policy_estimator"][name].
    "off_policy_estimation_methods": {},
    # 1.12's name for the same: a list of "is", "wis", classes or import paths.
    "input_evaluation": [],
    # === Callbacks ===
    # Hooks into training (episode start/step/end, trajectories, learning, results) for
    # custom metrics and more: a DefaultCallbacks subclass, a MultiCallbacks([...])
    # instance, a dotted path "my_module.MyCallbacks", or classic RLlib's legacy dict
    # {"on_episode_end": fn, ...}. See rlstack.trainers.callbacks.
    "callbacks": DefaultCallbacks,
    # === Logging ===
    # A standalone trainer's results logger, 1.13's way: {"type": LoggerClass (or its
    # import path), "logdir": ..., other keys}; the class is built as
    # LoggerClass(<the other keys>, logdir=...) and gets on_result(result) each iteration
    # (1.x's Logger interface). None: rlstack's result files. Under Tune, Tune logs.
    "logger_config": None,
    # === Rendering and recording ===
    # Call render() on one sub-env after every step (the local worker's first, or remote
    # worker 1's): for envs that draw in a window of their own.
    "render_env": False,
    # Record every sub-env's episodes as mp4 files (needs rlstack[video]): True for
    # <logdir>/videos, or a folder (a relative one is under the trainer's logdir). Each
    # env's render() must return an RGB array. Usually set in evaluation_config.
    "record_env": False,
    # === Custom evaluation ===
    # A function (trainer, eval_workers) -> metrics dict that replaces the built-in
    # evaluation (classic RLlib's hook): it samples the evaluation WorkerSet its own way;
    # train() reports what it returns as result["evaluation"]. None: the built-in one.
    "custom_eval_function": None,
    # === Curriculum ===
    # A function (train_result, task_settable_env, env_context) -> task, called after each
    # training iteration for every sub-env of the rollout workers that is a
    # rlstack.env.apis.task_settable_env.TaskSettableEnv; the env's set_task() receives
    # what it returns (classic RLlib's curriculum learning). None: tasks stay as they are.
    "env_task_fn": None,
    # === Misc ===
    # Seeds numpy, the framework, and each sub-env (seed + 1000 * worker_index + vector_index).
    "seed": None,
    # Logging level of the rlstack loggers: DEBUG, INFO, WARN, ERROR.
    "log_level": "WARN",
}

# Sub-dicts merged key by key rather than replaced.
DEEP_MERGE_KEYS = ("model", "env_config", "evaluation_config", "exploration_config", "optimizer", "input_config",
                   "custom_resources_per_worker", "tf_session_args", "local_tf_session_args", "multiagent")
THREAD_POOL_KEYS = ("intra_op_parallelism_threads", "inter_op_parallelism_threads")
# Sub-dicts whose defaults are dropped when the user names another "type" (classic RLlib
# 1.13's _override_all_subkeys_if_type_changes): a DDPG config switching to
# GaussianNoise must not inherit OrnsteinUhlenbeckNoise's ou_* keys.
REPLACED_IF_TYPE_CHANGES = ("exploration_config",)

# Old names of keys, mapped to today's (classic RLlib renamed these over the 1.x series).
# At the top level, the ones 1.x warned about are deprecated_keys.py's first (with the
# warning); this table renames them in sections (evaluation_config) and for key checks.
RENAMED_KEYS = {
    "timesteps_per_iteration": "min_sample_timesteps_per_reporting",
    "min_iter_time_s": "min_time_s_per_reporting",
    "evaluation_num_episodes": "evaluation_duration",
    "sample_batch_size": "rollout_fragment_length",
    # 1.13's name; rlstack keeps the older one its configs and results already use.
    "metrics_num_episodes_for_smoothing": "metrics_smoothing_episodes",
}

class DefaultConfig(dict):
    """An algorithm's ``DEFAULT_CONFIG``: a dict whose ``copy()`` is deep.

    ``config = DEFAULT_CONFIG.copy(); config["model"]["fcnet_hiddens"] = [64]`` must not
    change the defaults of every later trainer, as a shallow copy would.
    """

    def copy(self) -> dict[str, Any]:  # type: ignore[override]
        """A deep copy, as a plain dict."""
        return copy.deepcopy(dict(self))


PLACEMENT_STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")
BATCH_MODES = ("truncate_episodes", "complete_episodes")


def merge_config(defaults: dict[str, Any], user: dict[str, Any] | None, algorithm: str) -> dict[str, Any]:
    """Returns ``defaults`` updated with ``user``, deep-merging ``DEEP_MERGE_KEYS``.

    Args:
        defaults: The algorithm's full default config.
        user: The user's (partial) config.
        algorithm: The algorithm's name, for error messages.

    Deprecated 1.x keys (``eager``, ``use_pytorch``, ``monitor``, ...) are replaced by
    their successors first, with a warning (``deprecated_keys.py``).

    Raises:
        ConfigError: For a key not in ``defaults``, naming the closest valid keys.
    """
    config = copy.deepcopy(defaults)
    user = replace_deprecated_keys(user)
    for key, value in user.items():
        key = RENAMED_KEYS.get(key, key)
        if key not in defaults and is_no_op_key(key, algorithm):
            check_no_op_key(key, value, algorithm, user)
            continue
        if key == "optimizer" and isinstance(value, dict):
            _move_optimizer_keys(config, value, user, algorithm)
            continue
        if key not in defaults:
            raise ConfigError(
                f"Unknown config key {key!r} for {algorithm}{did_you_mean(key, defaults)} "
                f"(see {algorithm}'s DEFAULT_CONFIG for every valid key)."
            )
        if key in DEEP_MERGE_KEYS and value is None:
            continue  # an empty YAML section (`env_config:`): keep the defaults
        _check_section_type(key, value, algorithm)
        if key == "multiagent":
            _check_keys(value, defaults["multiagent"], f"multiagent of {algorithm}")
        if key == "evaluation_config":
            _check_keys(value, defaults, f"evaluation_config of {algorithm}")
            for sub_key, sub_value in value.items():
                _check_section_type(sub_key, sub_value, f"{algorithm}'s evaluation_config")
        _set(config, key, value)
    return config


# Keys classic RLlib 1.x's ApeX read from the `optimizer` sub-dict (its tuned examples set
# them there); rlstack's ApeX has them as top-level keys.
OPTIMIZER_KEYS = ("num_replay_buffer_shards", "max_weight_sync_delay", "debug")


def _move_optimizer_keys(config: dict[str, Any], optimizer: dict[str, Any], user: dict[str, Any],
                         algorithm: str) -> None:
    # optimizer: {num_replay_buffer_shards: 2} sets num_replay_buffer_shards for ApeX (the
    # algorithm whose defaults have these keys); `debug` (1.x ApeX's extra logging) is
    # accepted as False only. Other algorithms take no optimizer sub-dict.
    is_apex = all(key in config for key in OPTIMIZER_KEYS[:2])
    for key, value in optimizer.items():
        if not is_apex or key not in OPTIMIZER_KEYS:
            raise ConfigError(
                f"optimizer.{key} is not supported by rlstack's {algorithm}: "
                + (f"its optimizer sub-dict takes {', '.join(OPTIMIZER_KEYS)} (classic ApeX's keys); remove {key}."
                   if is_apex else
                   "Adam is configured with lr, lr_schedule, adam_epsilon and grad_clip; remove the optimizer key.")
            )
        if key == "debug":
            _require(value is False, f"optimizer.debug={value!r} is not supported by rlstack's {algorithm} (1.x "
                                     "ApeX's extra logging): remove it or set it to false.")
            continue
        if key in user and user[key] != value:
            raise ConfigError(f"{key} is given twice with different values: {user[key]!r} and optimizer.{key}="
                              f"{value!r}; keep one of them.")
        config[key] = copy.deepcopy(value)


def _check_section_type(key: str, value: Any, where: str) -> None:
    # A section that merges key by key must be a mapping; anything else would replace
    # the defaults and fail far from here.
    if key in DEEP_MERGE_KEYS and value is not None and not isinstance(value, dict):
        raise ConfigError(
            f"{key} for {where} must be a dict of sub-keys, got {type(value).__name__} ({value!r}); "
            f"write it as a mapping, e.g. {key}: {{...}} in YAML or {{{key!r}: {{...}}}} in Python."
        )


def _set(config: dict[str, Any], key: str, value: Any) -> None:
    # DEEP_MERGE_KEYS merge key by key; every other key replaces.
    if key in DEEP_MERGE_KEYS and isinstance(value, dict) and isinstance(config[key], dict):
        if key in REPLACED_IF_TYPE_CHANGES and value.get("type", config[key].get("type")) != config[key].get("type"):
            # Another exploration type has other keys: the defaults' keys would not fit it.
            config[key] = copy.deepcopy(value)
            return
        config[key] = {**config[key], **copy.deepcopy(value)}
    else:
        config[key] = copy.deepcopy(value)


def _check_keys(section: dict[str, Any], valid: dict[str, Any], where: str) -> None:
    for key in section:
        if RENAMED_KEYS.get(key, key) not in valid:
            raise ConfigError(f"Unknown config key {key!r} in {where}{did_you_mean(key, valid)}")


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ConfigError(message)


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def validate_common_config(config: dict[str, Any]) -> None:
    """Checks the keys every algorithm shares; normalises ``framework``.

    Raises:
        ConfigError: Stating the key, what was given, what is allowed and the fix.
    """
    config["framework"] = check_framework(config["framework"])
    check_offline_config(config)
    for key in ("num_workers", "evaluation_num_workers"):
        _require(_is_int(config[key]) and config[key] >= 0,
                 f"{key} must be an integer >= 0, got {config[key]!r}.")
    for key in ("num_envs_per_worker", "rollout_fragment_length", "train_batch_size", "metrics_smoothing_episodes"):
        _require(_is_int(config[key]) and config[key] >= 1, f"{key} must be an integer >= 1, got {config[key]!r}.")
    _require(config["batch_mode"] in BATCH_MODES,
             f"batch_mode={config['batch_mode']!r} is not allowed; use one of {', '.join(BATCH_MODES)}.")
    for key in ("num_consecutive_env_restarts_tolerance", "num_consecutive_failed_fragments_tolerance"):
        _require(_is_int(config[key]) and config[key] >= 1,
                 f"{key} must be an integer >= 1 (failures in a row tolerated before giving up), got {config[key]!r}.")
    logger_config = config["logger_config"]
    _require(logger_config is None or (isinstance(logger_config, dict) and (
        "type" not in logger_config or callable(logger_config["type"]) or isinstance(logger_config["type"], str)
        # (a class a checkpoint kept as its repr only: the trainer says so and logs its own way)
        or isinstance(logger_config["type"], dict) and set(logger_config["type"]) == {"__repr__"})),
        f"logger_config must be None or a dict whose 'type' is a logger class or its import path, got "
        f"{logger_config!r}.")
    _require(config["remote_worker_envs"] in (True, False),
             f"remote_worker_envs must be True or False, got {config['remote_worker_envs']!r}.")
    _require(not config["remote_worker_envs"] or config["num_envs_per_worker"] > 1,
             "remote_worker_envs=True runs a worker's sub-envs in actors of their own, which needs "
             f"num_envs_per_worker > 1 (got {config['num_envs_per_worker']}); raise it or remove remote_worker_envs.")
    _require(isinstance(config["restart_failed_sub_environments"], bool),
             "restart_failed_sub_environments must be True or False, got "
             f"{config['restart_failed_sub_environments']!r}.")
    _require(config["observation_filter"] in FILTERS or callable(config["observation_filter"]),
             f"observation_filter={config['observation_filter']!r} is not allowed; use one of {', '.join(FILTERS)}, "
             "or a function of the observation shape that returns a filter (rlstack.utils.filter.Filter).")
    _require(isinstance(config["gamma"], numbers.Real) and 0.0 <= config["gamma"] <= 1.0,
             f"gamma must be in [0, 1], got {config['gamma']!r}.")
    _require(isinstance(config["lr"], numbers.Real) and config["lr"] > 0, f"lr must be > 0, got {config['lr']!r}.")
    _require(config["grad_clip"] is None or (isinstance(config["grad_clip"], numbers.Real) and config["grad_clip"] > 0),
             f"grad_clip must be None or > 0, got {config['grad_clip']!r}.")
    _require(config["horizon"] is None or (_is_int(config["horizon"]) and config["horizon"] >= 1),
             f"horizon must be None or an integer >= 1, got {config['horizon']!r}.")
    _require(config["evaluation_duration_unit"] in ("episodes", "timesteps"),
             f"evaluation_duration_unit must be 'episodes' or 'timesteps', got {config['evaluation_duration_unit']!r}.")
    _require(config["evaluation_interval"] is None or (_is_int(config["evaluation_interval"]) and config["evaluation_interval"] >= 1),
             f"evaluation_interval must be None or an integer >= 1, got {config['evaluation_interval']!r}.")
    for key in ("num_gpus", "num_gpus_per_worker", "num_cpus_per_worker", "num_cpus_for_driver"):
        _require(isinstance(config[key], numbers.Real) and not isinstance(config[key], bool) and config[key] >= 0,
                 f"{key} must be a number >= 0, got {config[key]!r}.")
    _require(isinstance(config["_fake_gpus"], bool), f"_fake_gpus must be True or False, got {config['_fake_gpus']!r}.")
    # Under _fake_gpus nothing runs on a GPU, so 1.x's fake multi-GPU tuned examples
    # (num_gpus: 2, _fake_gpus: true) train as with one fake GPU.
    _require(config["num_gpus"] <= 1 or config["_fake_gpus"],
             f"num_gpus={config['num_gpus']!r}: rlstack's learner runs on one GPU (no multi-GPU towers); "
             "set num_gpus to 1 or a fraction of one, and give GPUs to rollout workers with num_gpus_per_worker.")
    for key in ("recreate_failed_workers", "ignore_worker_failures", "no_done_at_end"):
        _require(isinstance(config[key], bool), f"{key} must be True or False, got {config[key]!r}.")
    _require(_is_int(config["num_consecutive_worker_failures_tolerance"])
             and config["num_consecutive_worker_failures_tolerance"] >= 0,
             "num_consecutive_worker_failures_tolerance must be an integer >= 0, got "
             f"{config['num_consecutive_worker_failures_tolerance']!r}.")
    for key in ("worker_health_probe_timeout_s", "worker_restore_timeout_s"):
        _require(isinstance(config[key], numbers.Real) and not isinstance(config[key], bool) and config[key] > 0,
                 f"{key} must be a number of seconds > 0, got {config[key]!r}.")
    _require(config["rollout_inference"] in ("auto", "numpy", "framework"),
             f"rollout_inference={config['rollout_inference']!r} is not allowed; use 'auto', 'numpy' or 'framework'.")
    _require(config["placement_timeout_s"] is None
             or (isinstance(config["placement_timeout_s"], numbers.Real)
                 and not isinstance(config["placement_timeout_s"], bool) and config["placement_timeout_s"] > 0),
             f"placement_timeout_s must be a number of seconds > 0, or None to wait for ever; got "
             f"{config['placement_timeout_s']!r}.")
    _require(config["placement_strategy"] in PLACEMENT_STRATEGIES,
             f"placement_strategy={config['placement_strategy']!r} is not allowed; use one of {', '.join(PLACEMENT_STRATEGIES)}.")
    _require(config["seed"] is None or _is_int(config["seed"]), f"seed must be None or an integer, got {config['seed']!r}.")
    _require(config["preprocessor_pref"] in (None, "deepmind", "rllib"),
             f"preprocessor_pref={config['preprocessor_pref']!r} is not supported; use 'deepmind' (the standard Atari "
             "preprocessing), or 'rllib' or None (classic RLlib's own image preprocessing).")
    clip = config["clip_rewards"]
    _require(clip is None or clip is True or clip is False or (isinstance(clip, numbers.Real) and not isinstance(clip, bool) and clip > 0),
             f"clip_rewards must be None (the default), False (off), True (sign of the reward) or a number > 0 (clip to [-x, x]); "
             f"got {clip!r}.")
    parallel = config["evaluation_parallel_to_training"]
    _require(isinstance(parallel, bool), f"evaluation_parallel_to_training must be True or False, got {parallel!r}.")
    _require(not parallel or config["evaluation_num_workers"] >= 1,
             "evaluation_parallel_to_training=True needs evaluation_num_workers >= 1: evaluation in the driver "
             "would wait for the training step anyway.")
    _require((_is_int(config["evaluation_duration"]) and config["evaluation_duration"] >= 1)
             or (config["evaluation_duration"] == "auto" and parallel),
             f"evaluation_duration must be an integer >= 1 (episodes or timesteps, per evaluation_duration_unit), "
             f"or 'auto' with evaluation_parallel_to_training=True; got {config['evaluation_duration']!r}.")
    _require(not config["optimizer"],
             f"optimizer {config['optimizer']!r} is not supported; Adam is configured with lr, lr_schedule, "
             "adam_epsilon and grad_clip: remove the optimizer key.")
    for key in ("min_time_s_per_reporting", "min_sample_timesteps_per_reporting",
                "min_train_timesteps_per_reporting"):
        value = config[key]
        _require(value is None or (isinstance(value, numbers.Real) and value >= 0),
                 f"{key} must be None or >= 0, got {value!r}.")
    for section in ("tf_session_args", "local_tf_session_args"):
        for key, value in config[section].items():
            _require(key in THREAD_POOL_KEYS,
                     f"{section} has no key {key!r}: rlstack's TF 2 policies take only {' and '.join(THREAD_POOL_KEYS)} "
                     "from it (classic RLlib's other tf.ConfigProto options have no TF 2 equivalent); remove it.")
            _require(value is None or (_is_int(value) and value >= 0),
                     f"{section}.{key} must be None (rlstack's choice), 0 (TensorFlow's) or a number of threads "
                     f">= 1, got {value!r}.")
    for key in ("in_evaluation", "always_attach_evaluation_results", "keep_per_episode_custom_metrics"):
        _require(isinstance(config[key], bool), f"{key} must be True or False, got {config[key]!r}.")
    in_evaluation = config["evaluation_config"].get("in_evaluation", True)
    _require(in_evaluation is True,
             f"evaluation_config.in_evaluation={in_evaluation!r}: the evaluation workers' config always has "
             "in_evaluation=True (the trainer sets it, as 1.13 did); remove the key from evaluation_config.")
    check_callbacks(config["callbacks"])
    validate_model_config(config["model"])


def require_stochastic_sampling(config: dict[str, Any]) -> None:
    """For policy-gradient algorithms, which explore by sampling their action distribution.

    Raises:
        ConfigError: If ``exploration_config`` asks for anything else.
    """
    exploration = config["exploration_config"]
    _require(exploration.get("type") == "StochasticSampling" and set(exploration) == {"type"},
             f"exploration_config {exploration!r} is not supported by this algorithm; policy-gradient algorithms "
             "explore by sampling from their action distribution: remove exploration_config.")


# Evaluation envs are seeded apart from the training envs (which use seed + 1000 * i + j).
EVALUATION_SEED_OFFSET = 1_000_000


def evaluation_config_of(config: dict[str, Any]) -> dict[str, Any]:
    """The config evaluation workers run with: the training config with the overrides,
    and ``in_evaluation`` True.

    Raises:
        ConfigError: If the overrides give an impossible value.
    """
    merged = copy.deepcopy(config)
    overrides = config["evaluation_config"]
    for key, value in overrides.items():
        _set(merged, RENAMED_KEYS.get(key, key), value)
    if "seed" not in overrides and merged["seed"] is not None:
        merged["seed"] = merged["seed"] + EVALUATION_SEED_OFFSET
    merged["in_evaluation"] = True
    # Evaluation plays episodes in its envs: it writes and reads no experience unless
    # evaluation_config says so.
    for key, value in (("output", None), ("input", "sampler")):
        if key not in overrides:
            merged[key] = value
    try:
        validate_common_config(merged)
    except ConfigError as exc:
        raise ConfigError(f"In evaluation_config: {exc}") from exc
    return merged
