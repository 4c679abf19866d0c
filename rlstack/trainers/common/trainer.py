"""Trainer: the base of every algorithm, a Ray Tune ``Trainable``.

The base owns everything but the algorithm: config merge and validation, starting Ray
when needed, building the rollout workers, one iteration and its result dict, acting
with the trained policy under RLlib 1.13's names, evaluation, the per-policy steps of
multi-agent runs, checkpoints, resource requests and shutdown. What it calls on is in
modules of its own: the config (``config.py``), the ``multiagent`` config
(``multi_agent.py``), the checkpoint format (``checkpoint_files.py``), Ray's start
(``ray_start.py``) and the result files (``result_logger.py``). An algorithm subclass
supplies ``_name``, ``_default_config``, ``policy_classes``, ``validate_config`` and,
unless the synchronous default fits, ``training_step``.
"""

from __future__ import annotations

import atexit
import contextlib
import collections
import copy
import importlib
import inspect
import io
import logging
import os
import tarfile
import tempfile
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import psutil
import ray
from ray import tune
from ray.tune.execution.placement_groups import PlacementGroupFactory

import rlstack
from rlstack.env.registry import env_spec_name
from rlstack.errors import CheckpointError, ConfigError
from rlstack.evaluation.callbacks import make_callbacks, overridden_hooks, restorable_callbacks, with_callbacks_specs
from rlstack.evaluation.metrics import EpisodeStats, EpisodeWindow, episode_results, off_policy_estimates
from rlstack.evaluation.worker_policies import class_path, resolve_class
from rlstack.evaluation.worker_set import WorkerSet, worker_resources, worker_start_error
from rlstack.policies.observations import check_observation
from rlstack.policies.policy import Policy
from rlstack.policies.policy_map import PolicySpec
from rlstack.policies.rnn_sequencing import state_out_key
from rlstack.sample_batch import DEFAULT_POLICY_ID, MultiAgentBatch, SampleBatch
from rlstack.trainers.common import checkpoint_files as ckpt
from rlstack.trainers.common.classic_keys import is_no_op_key
from rlstack.trainers.common.config import (
    COMMON_CONFIG,
    RENAMED_KEYS,
    evaluation_config_of,
    merge_config,
    validate_common_config,
)
from rlstack.trainers.common.multi_agent import (
    as_policy_id,
    as_policy_spec,
    check_multiagent_functions,
    complete_spec,
    configured_policies,
    policy_specs,
    restorable_multiagent,
    unsupported_message,
    validate_multiagent_config,
    with_multiagent_paths,
)
from rlstack.trainers.common.ray_start import ensure_ray
from rlstack.trainers.common.result_logger import create_user_logger, results_writer
from rlstack.utils.framework import check_framework_free_policies, check_installed
from rlstack.utils.imports import import_object
from rlstack.utils.seeding import seed_everything
from rlstack.utils.threads import LearnerThreads
from rlstack.utils.timers import TimerStat

logger = logging.getLogger(__name__)

__all__ = ["COMMON_CONFIG", "DEFAULT_POLICY_ID", "Trainer", "with_common_config"]


# Where evaluation_parallel_to_training runs an evaluation beside the training step (the
# thread only waits on the evaluation workers, which are Ray actors).
_EVALUATION_THREAD = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rlstack-evaluation")


def _overrides(cls: type, method: str) -> bool:
    """Whether a subclass of Trainer defines ``method`` itself. By name, not identity: in
    a Ray actor the class's methods are wrapped (with their names kept)."""
    return getattr(cls, method).__qualname__ != f"Trainer.{method}"


def _defining_class(cls: type, method: str) -> int:
    """The position in ``cls.__mro__`` of the class that defines ``method``: found by the
    qualified name (for the reason :func:`_overrides` gives), or, for a function defined
    elsewhere and assigned (``execution_plan = staticmethod(my_plan)``), as the first
    class that holds the name."""
    owner = getattr(cls, method).__qualname__.rpartition(".")[0]
    found = next((i for i, klass in enumerate(cls.__mro__) if klass.__qualname__ == owner), None)
    if found is None:
        found = next(i for i, klass in enumerate(cls.__mro__) if method in vars(klass))
    return found


def runs_execution_plan(cls: type, disable_execution_plan_api: bool | None) -> bool:
    """Whether a trainer of class ``cls`` trains by pulling its ``execution_plan``
    (RLlib 1.x's way to write an algorithm) rather than by ``training_step()``.

    ``_disable_execution_plan_api`` decides where it is given: False runs the class's
    plan, True its training step. Where it is not, the plan runs when the class defines
    one below (more derived than) any ``training_step`` / ``training_iteration`` of its
    own, so a subclass of DQNTrainer with a plan runs the plan. A class with no plan of its
    own (every built-in trainer) always runs its training step.
    """
    if disable_execution_plan_api is True or not _overrides(cls, "execution_plan"):
        return False
    if disable_execution_plan_api is False:
        return True
    plan = _defining_class(cls, "execution_plan")
    return all(plan < _defining_class(cls, step) for step in ("training_step", "training_iteration")
               if _overrides(cls, step))


class Trainer(tune.Trainable):
    """Base class of rlstack trainers (``PPOTrainer`` and friends).

    Args:
        config: The user's config; missing keys take the algorithm's defaults. A config
            object (``PPOConfig()...``) gives its ``to_dict()``.
        env: The env (overrides ``config["env"]``): a gymnasium id, a registered name,
            an Env class or a creator.
        logger_creator: RLlib 1.13's ``logger_creator(config) -> logger`` for a
            standalone trainer: the logger's ``logdir`` becomes the trainer's
            :attr:`logdir`; a logger with ``on_result(result)`` (1.x's Logger interface,
            e.g. :class:`~rlstack.trainers.common.result_logger.UnifiedLogger`) receives every
            result and is closed by :meth:`stop`, any other leaves the writing to rlstack's
            result files in that directory. Ignored under Tune, which owns the trial's logs.
        remote_checkpoint_dir: Accepted for 1.13 compatibility; must be None (Tune's
            ``storage_path`` syncs checkpoints).
        sync_function_tpl: Accepted for 1.13 compatibility; must be None.
        **kwargs: Passed to ``ray.tune.Trainable`` (Tune passes ``storage``).

    Raises:
        ConfigError: For unknown keys or impossible values.
        EnvError: If the env cannot be built.
    """

    _name = "Trainer"
    _default_config: dict[str, Any] = COMMON_CONFIG
    # ``{"torch": "module:Class", "tf": "module:Class"}``: the algorithm's policy classes.
    # Paths rather than classes, so that rollout workers acting in numpy never import a
    # framework, and the driver imports it while the workers start.
    policy_classes: dict[str, str] = {}
    # The algorithm's framework-free trajectory postprocessing, ``fn(batch, config)``,
    # for rollout workers that act in numpy (None: such workers return raw batches).
    postprocess_fn: Any = None
    # Import path of the algorithm's numpy acting policy (None: NumpyPolicy).
    numpy_policy_class: str | None = None
    # The remote rollout workers compute gradients (A3C), so they keep the framework policy.
    remote_workers_learn: bool = False
    # The algorithm trains recurrent models (model.use_lstm): its loss reads padded
    # sequences and its workers record each step's state.
    supports_recurrent_models: bool = False
    # The trainer trains several policies (multiagent.policies, a MultiAgentEnv): the
    # synchronous training_step learns each policy on its rows, and so does a user's
    # Trainer subclass with its own training_iteration (1.13's custom trainers).
    supports_multi_agent: bool = True
    # 1.13's switch for a custom trainer: accept top-level keys its defaults lack.
    _allow_unknown_configs: bool = False

    def __init__(
        self,
        config: dict[str, Any] | None = None,
        env: Any = None,
        logger_creator: Callable[[dict[str, Any]], Any] | None = None,
        remote_checkpoint_dir: str | None = None,
        sync_function_tpl: str | None = None,
        **kwargs: Any,
    ) -> None:
        if callable(getattr(config, "to_dict", None)):
            config = config.to_dict()  # a config object (rlstack.trainers.trainer_config), as 1.13 took
        config = dict(config or {})
        if env is not None:
            config["env"] = env
        for name, value in (("remote_checkpoint_dir", remote_checkpoint_dir), ("sync_function_tpl", sync_function_tpl)):
            if value is not None:
                raise ConfigError(
                    f"{type(self).__name__}({name}={value!r}): rlstack does not sync checkpoints itself; run the "
                    "trainer under Tune with storage_path=... to keep checkpoints elsewhere, or pass "
                    f"{name}=None."
                )
        if logger_creator is not None and not callable(logger_creator):
            raise ConfigError(f"logger_creator must be a callable logger_creator(config) -> logger, got "
                              f"{type(logger_creator).__name__}.")
        # Read by _setup_logdir, which Trainable.__init__ calls before setup().
        self._logger_creator = logger_creator
        self._user_logger: Any = None
        super().__init__(config=config, **kwargs)

    def _setup_logdir(self) -> None:
        """Outside Tune: ``~/ray_results/<ALGO>_<env>_<date>_<random>`` (classic RLlib's
        layout; ``RLSTACK_RESULTS_DIR`` moves the root), or the ``logdir`` of the logger
        that ``logger_creator`` made, or of ``config["logger_config"]["type"]``'s. Under
        Tune: the trial directory."""
        if self._storage is not None:
            super()._setup_logdir()
            return
        if getattr(self, "_logger_creator", None) is not None:
            self._user_logger, self._logdir = create_user_logger(self._logger_creator, self.config)
            return
        root = os.path.expanduser(os.environ.get("RLSTACK_RESULTS_DIR", "~/ray_results"))
        os.makedirs(root, exist_ok=True)
        env = "".join(c if c.isalnum() or c in "-_." else "_" for c in env_spec_name(self.config.get("env")))
        prefix = f"{self._name}_{env}_{time.strftime('%Y-%m-%d_%H-%M-%S')}_"
        self._logdir = tempfile.mkdtemp(prefix=prefix, dir=root)
        logger_config = (self.config or {}).get("logger_config") or {}
        if "type" in logger_config:
            # 1.13: the logger class built with logger_config's other keys and the logdir
            # (logger_config["logdir"], else the default one).
            options = dict(logger_config)
            logger_class, logdir = options.pop("type"), options.pop("logdir", self._logdir)
            if isinstance(logger_class, str):
                logger_class = import_object(logger_class, "logger_config.type")
            if not callable(logger_class):
                # A checkpoint keeps a class defined in a script only as its repr.
                logger.warning("logger_config.type %r is not a class; this trainer writes rlstack's result files "
                               "instead (pass logger_config again, e.g. Trainer.from_checkpoint(path, "
                               "config_overrides={'logger_config': ...})).", logger_class)
                return
            self._user_logger, self._logdir = create_user_logger(
                lambda _: logger_class(options, logdir=logdir), self.config)

    # ----- the algorithm's part -------------------------------------------------------

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "get_default_config" in vars(cls):
            # Classic RLlib's way to give a Trainer subclass its defaults: overriding
            # get_default_config() (typically returning with_common_config({...})).
            cls._default_config = cls.get_default_config()

    @classmethod
    def get_default_config(cls) -> dict[str, Any]:
        """A deep copy of the algorithm's full default config."""
        return copy.deepcopy(cls._default_config)

    @classmethod
    def merge_and_validate(cls, config: dict[str, Any] | None) -> dict[str, Any]:
        """The full config: defaults under ``config``, validated.

        Raises:
            ConfigError: For unknown keys or impossible values.
        """
        defaults = cls._default_config
        if cls._allow_unknown_configs:
            # 1.13's switch for a custom trainer: a key its defaults lack is the user's own.
            defaults = {**defaults, **{key: None for key in (config or {})
                                       if RENAMED_KEYS.get(key, key) not in defaults
                                       and not is_no_op_key(key, cls._name)}}
        merged = merge_config(defaults, config, cls._name)
        validate_common_config(merged)
        cls._check_memory(merged)

        def validate_policy_config(policy_config: dict[str, Any]) -> None:
            cls._check_memory(policy_config)
            cls.validate_config(policy_config)

        validate_multiagent_config(merged, cls._name, cls.supports_multi_agent, validate_policy_config)
        cls.validate_config(merged)
        return merged

    @classmethod
    def _check_memory(cls, config: dict[str, Any]) -> None:
        # A recurrent model (use_lstm / use_attention) only for trainers that train them.
        memory = next((key for key in ("use_lstm", "use_attention") if config["model"].get(key)), None)
        if memory and not cls.supports_recurrent_models:
            from rlstack.trainers.common.registry import recurrent_algorithms

            raise ConfigError(
                f"model.{memory}=True is not supported by {cls._name} yet; recurrent models train with "
                f"{', '.join(recurrent_algorithms())}. Use one of those, or set {memory}=False (stack past observations with a "
                "gymnasium wrapper for a little memory).")

    @classmethod
    def validate_config(cls, config: dict[str, Any]) -> None:
        """Checks the algorithm's own keys (override in subclasses)."""

    def _runs_without_env(self) -> bool:
        # 1.13: env None, the spaces given, experience from an input (files, a server).
        config = self.config
        if config["observation_space"] is None or config["action_space"] is None:
            return False
        if config.get("input", "sampler") == "sampler":
            raise ConfigError(f"{self._name} has observation_space and action_space but no env and input 'sampler': "
                              "give an env, or an input (files, 'dataset', or lambda ioctx: "
                              "PolicyServerInput(ioctx, address, port)) for the experience.")
        return True

    def get_policy_class_path(self, config: dict[str, Any]) -> str | type[Policy]:
        """``"module:Class"`` of the policy class for ``config["framework"]``: the
        algorithm's :attr:`policy_classes` entry (a subclass that picks its policy from
        other keys overrides this), or the class itself where a subclass overrides
        :meth:`get_default_policy_class` (classic RLlib's hook)."""
        overridden = _overrides(type(self), "get_default_policy_class")
        default = self.get_default_policy_class(config) if overridden else None
        if config["framework"] is None:
            named = {pid: spec.policy_class or default for pid, spec in configured_policies(config).items()}
            check_framework_free_policies(self._name, named or {DEFAULT_POLICY_ID: default})
        if overridden:
            return default
        if config["framework"] not in type(self).policy_classes:
            named = [spec.policy_class for spec in configured_policies(config).values()]
            if named and all(cls is not None for cls in named):
                # A custom trainer whose policies all name their class (1.13's two-trainer
                # workflow) needs no class of its own: the first one stands for it.
                return named[0]
            raise ConfigError(
                f"{type(self).__name__} names no policy class for framework={config['framework']!r}: declare "
                "policy_classes = {'torch': 'module:TorchPolicyClass', 'tf': ...} on the trainer class, or "
                "override get_default_policy_class(self, config) to return one.")
        return type(self).policy_classes[config["framework"]]

    def get_default_policy_class(self, config: dict[str, Any]) -> type[Policy]:
        """The policy class for ``config["framework"]`` (imports that framework only)."""
        path = self.get_policy_class_path(config)
        if not isinstance(path, str):
            return path  # a class already
        module_name, class_name = path.split(":")
        return getattr(importlib.import_module(module_name), class_name)

    def training_step(self) -> dict[str, Any]:
        """One round of sampling and learning; returns learner stats by policy id.

        This one is the synchronous round (PPO's, PG's, A2C's): ``train_batch_size`` env
        steps from the rollout workers, then each policy that learns takes its rows
        (:meth:`learn_on_policy_batch`) while the workers wait, then the new weights go
        to the workers. Replay-based and asynchronous trainers write their own.
        """
        with self._timers["sample"]:
            batch = self.sample_train_batch(self.config["train_batch_size"])
        self.count_sampled(batch)
        with self._timers["learn"]:
            info = self.learn_per_policy(batch, self.learn_on_policy_batch)
        self.count_trained(batch)
        with self._timers["synch_weights"]:
            self.sync_learned_weights(info)
        return info

    def training_iteration(self) -> dict[str, Any]:
        """Classic RLlib's name for :meth:`training_step`: a subclass that overrides it
        runs its own round of sampling and learning in ``train()``."""
        return self.training_step()

    @staticmethod
    def execution_plan(workers: WorkerSet, config: dict[str, Any], **kwargs: Any) -> Any:
        """RLlib 1.x's way to write an algorithm: a static method returning an iterator
        (``rlstack.execution``'s operators chained) whose every ``next()`` trains one
        iteration and yields its result dict. A subclass that overrides it, and not
        :meth:`training_step` below it, trains by pulling its plan (see
        :func:`runs_execution_plan` and the ``_disable_execution_plan_api`` key); the
        operators count steps in the trainer's counters and
        ``StandardMetricsReporting`` yields the same result dict as :meth:`training_step`'s
        iterations.

        This one is the synchronous round of :meth:`training_step`, as 1.x wrote it (a
        subclass's plan may call it); the base itself runs :meth:`training_step`.

        Args:
            workers: The trainer's WorkerSet.
            config: The trainer's config.
            **kwargs: What :meth:`_kwargs_for_execution_plan` gives (1.13:
                ``local_replay_buffer``).

        Returns:
            An iterator of result dicts.
        """
        from rlstack.execution.metric_ops import StandardMetricsReporting
        from rlstack.execution.rollout_ops import ConcatBatches, ParallelRollouts
        from rlstack.execution.train_ops import TrainOneStep

        train_op = (ParallelRollouts(workers, mode="bulk_sync")
                    .combine(ConcatBatches(min_batch_size=config["train_batch_size"],
                                           count_steps_by=config["multiagent"]["count_steps_by"]))
                    .for_each(TrainOneStep(workers)))
        return StandardMetricsReporting(train_op, workers, config)

    def _kwargs_for_execution_plan(self) -> dict[str, Any]:
        """The keyword arguments :meth:`execution_plan` is called with: 1.13's
        ``local_replay_buffer`` for a config with replay keys (``buffer_size``,
        ``learning_starts``; DQN's): a ``MultiAgentReplayBuffer`` replaying
        ``train_batch_size`` rows per policy, prioritized with ``prioritized_replay``."""
        cfg = self.config
        if not {"buffer_size", "learning_starts"} <= set(cfg):
            return {}
        if getattr(self, "local_replay_buffer", None) is None:
            from rlstack.execution.buffers.multi_agent_replay_buffer import MultiAgentReplayBuffer

            prioritized = cfg.get("prioritized_replay", False)
            self.local_replay_buffer = MultiAgentReplayBuffer(
                learning_starts=cfg["learning_starts"], capacity=cfg["buffer_size"],
                replay_batch_size=cfg["train_batch_size"],
                prioritized_replay_alpha=cfg.get("prioritized_replay_alpha", 0.6) if prioritized else 0.0,
                prioritized_replay_beta=cfg.get("prioritized_replay_beta", 0.4),
                prioritized_replay_eps=cfg.get("prioritized_replay_eps", 1e-6), seed=cfg["seed"])
        return {"local_replay_buffer": self.local_replay_buffer}

    def learn_on_policy_batch(self, policy: Policy, batch: SampleBatch) -> dict[str, Any]:
        """How the synchronous :meth:`training_step` makes one policy learn on its rows of
        the train batch; returns its learner stats."""
        return policy.learn_on_batch(batch)

    @classmethod
    def rollout_worker_count(cls, config: dict[str, Any]) -> int:
        """How many remote RolloutWorkers the trainer's WorkerSet starts: ``num_workers``,
        except for trainers whose ``num_workers`` are actors of their own (ES, ARS: see
        ``trainers/common/evolution.py``), which keep only the local worker."""
        return config["num_workers"]

    # ----- set-up ---------------------------------------------------------------------

    def setup(self, config: dict[str, Any]) -> None:
        _LIVE_TRAINERS.add(self)  # stopped at interpreter exit unless stop() comes first
        if self._storage is not None and os.environ.get("TUNE_ORIG_WORKING_DIR"):
            # Tune moves each trial into its own directory; relative paths in configs
            # (env files, checkpoints to restore) are meant from where the user started.
            os.chdir(os.environ["TUNE_ORIG_WORKING_DIR"])
        self.config = self.merge_and_validate(config)
        if self.config["output"] == "logdir":
            self.config["output"] = self.logdir  # each worker writes its files into the trial's directory
        for section in (self.config, self.config.get("evaluation_config") or {}):
            if section.get("record_env"):
                # Videos go under the trial's directory unless a folder is given absolutely.
                folder = section["record_env"] if isinstance(section["record_env"], str) else "videos"
                section["record_env"] = os.path.join(self.logdir, folder)
        # Tune's reset() replaces self.config with the raw new config before calling
        # reset_config(); this copy is what the workers actually run with.
        self._active_config = self.config
        level = str(self.config["log_level"]).upper()
        logging.getLogger("rlstack").setLevel("WARNING" if level == "WARN" else level)
        if self.config["env"] is None and not self._runs_without_env():
            raise ConfigError(
                f"No env given to {self._name}: pass {type(self).__name__}(config, env='CartPole-v1') "
                "or set config['env'] (a trainer that learns from an input without an env sets "
                "observation_space and action_space instead)."
            )
        check_installed(self.config["framework"])
        policy_class_path: str | type[Policy] = self.get_policy_class_path(self.config)
        seed_everything(self.config["seed"])
        if self.config["num_workers"] > 0 or self.config["evaluation_num_workers"] > 0:
            ensure_ray(self.config, preload=policy_class_path if isinstance(policy_class_path, str) else None)
        # The worker set starts the remote workers first and then builds the driver's
        # policy, so the framework import here overlaps the workers' start-up.
        error = None
        try:
            self.workers = WorkerSet(self.config["env"], policy_class_path, self.config,
                                     self.rollout_worker_count(self.config),
                                     local_env=bool(self.config["create_env_on_driver"]),
                                     postprocess_fn=type(self).postprocess_fn,
                                     numpy_policy_class=type(self).numpy_policy_class,
                                     remote_workers_learn=type(self).remote_workers_learn,
                                     policy_specs=self.policy_specs_for(self.config))
        except ray.exceptions.RayActorError as exc:
            error = worker_start_error(exc)
            if error is None:
                raise
        if error is not None:
            # Raised outside the except block: chained to Ray's error, its traceback would
            # keep the failed WorkerSet, and with it its placement group, alive.
            raise error
        self.check_multi_agent_support()  # a MultiAgentEnv shows itself only once built
        # The learner's threads follow the work (rlstack/utils/threads.py); stop() puts them back.
        self._learner_threads = LearnerThreads.apply(
            self.config["framework"], self.learns_asynchronously(self.config) and self.config["num_workers"] > 0)
        self.policy_class = resolve_class(policy_class_path)  # imported by the WorkerSet already
        seed_everything(self.config["seed"])  # the framework may have been imported just now
        self.evaluation_workers: WorkerSet | None = None
        # What evaluate() last returned, {"evaluation": metrics} (1.13's attribute), for
        # always_attach_evaluation_results; NaN rewards until the first evaluation, so
        # that a Tune stopper on them finds the keys from the first iteration on.
        self.evaluation_metrics: dict[str, Any] = _before_any_evaluation()
        # A counter a custom training_iteration names first starts at 0, as in 1.13.
        self._counters = collections.defaultdict(int, {
            "num_env_steps_sampled": 0, "num_env_steps_trained": 0, "num_agent_steps_sampled": 0,
            "num_agent_steps_trained": 0, "episodes_total": 0, "num_env_restarts": 0})
        self._episode_window = EpisodeWindow(self.config["metrics_smoothing_episodes"])
        # (an execution plan's operators may time sections of their own: a new name, a new timer)
        self._timers = collections.defaultdict(TimerStat, {
            name: TimerStat() for name in ("training_iteration", "sample", "learn", "synch_weights")})
        self._last_learner_stats: dict[str, Any] = {}
        # A 1.x execution plan, when the class has one to run (built at the first step()).
        self._runs_execution_plan = runs_execution_plan(
            type(self), self.config.get("_disable_execution_plan_api", config.get("_disable_execution_plan_api")))
        self._execution_plan: Any = None
        self._plan_metrics: Any = None
        self._steps_before_iteration = 0
        # Outside Tune nobody else writes progress.csv / result.json / TensorBoard files,
        # unless the logger_creator's logger does (1.x Logger interface: on_result).
        self._result_logger = (results_writer(getattr(self, "_user_logger", None), self.logdir, self.config)
                               if self._storage is None else None)
        initial = getattr(type(self), "_initial_checkpoint", None)
        if initial:
            self.restore(initial)
        # The trainer's own callbacks object (each rollout worker builds its own).
        self.callbacks = make_callbacks(self.config["callbacks"])
        self._callback_hooks = overridden_hooks(self.callbacks)
        if "on_trainer_init" in self._callback_hooks:
            self.callbacks.on_trainer_init(trainer=self)

    def train(self) -> dict[str, Any]:
        """Runs one training iteration and returns its result dict (classic keys plus
        Tune's auto-filled ones); outside Tune it is also appended to the log files."""
        result = super().train()  # calls log_result, and with it on_train_result
        if self._result_logger is not None:
            self._result_logger.log(result)
        return result

    def log_result(self, result: dict[str, Any]) -> None:
        """Calls ``on_train_result`` on the finished result (Tune's fields included), so
        that what the callback adds is what ``train()`` returns and what is logged."""
        if "on_train_result" in self._callback_hooks:
            self.callbacks.on_train_result(trainer=self, result=result)
        super().log_result(result)

    # Keys that take effect without rebuilding workers (used by Tune's PBT via reset_config).
    _HOT_KEYS = ("lr", "lr_schedule", "entropy_coeff", "entropy_coeff_schedule", "clip_param", "vf_clip_param",
                 "vf_loss_coeff", "kl_target", "num_sgd_iter", "sgd_minibatch_size", "grad_clip", "gamma",
                 "lambda", "train_batch_size", "explore")

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        """Turns this trainer into a fresh trial of ``new_config`` without new actors.

        Tune calls this when it reuses the actor for another trial (``reuse_actors``, and
        PBT, which then restores the better trial's checkpoint over it). The policy is
        rebuilt from its initial weights, optimizer, counters, filters and metrics start
        over; rollout workers and envs are kept. Only learning hyper-parameters may
        change; otherwise this returns False and Tune builds a new actor."""
        try:
            merged = self.merge_and_validate(new_config)
        except ConfigError as exc:
            logger.warning("reset_config: the new config is invalid (%s); the trial will be rebuilt.", exc)
            return False
        active = self._active_config
        changed = {k for k in merged if ckpt.to_jsonable(merged[k]) != ckpt.to_jsonable(active.get(k))}
        if not changed <= set(self._HOT_KEYS):
            logger.info("reset_config: %s changed, which needs new workers; the trial will be rebuilt.",
                        sorted(changed - set(self._HOT_KEYS)))
            self.config = active
            return False
        self.config = self._active_config = merged
        specs = self.policy_specs_for(merged)
        self.workers.foreach_worker(lambda w, c=merged, s=specs: w.reset(c, s))
        self.workers.collect_episodes()  # drop the previous trial's unreported episodes
        self.workers.collect_env_restarts()
        self._counters = collections.defaultdict(int, dict.fromkeys(self._counters, 0))
        self._episode_window = EpisodeWindow(merged["metrics_smoothing_episodes"])
        self.evaluation_metrics = _before_any_evaluation()
        self._execution_plan = self._plan_metrics = None  # the new trial builds its own
        self.workers.sync_weights(0)
        return True

    @property
    def learner_policy(self) -> Policy:
        """The policy that learns (the local worker's)."""
        return self.workers.local_worker().policy

    def _local_filter(self) -> Any:
        return self.workers.local_worker().filter

    # ----- one iteration --------------------------------------------------------------

    def step(self) -> dict[str, Any]:
        cfg = self.config
        start = time.time()
        steps_before = self.global_timestep()
        interval = cfg["evaluation_interval"]
        evaluate_now = bool(interval) and (self.iteration + 1) % interval == 0
        parallel_evaluation, training_done = None, threading.Event()
        if evaluate_now and cfg["evaluation_parallel_to_training"]:
            # Evaluated with the weights from before this training step, on the
            # evaluation workers, while the training step runs here.
            parallel_evaluation = _EVALUATION_THREAD.submit(
                self._evaluation_metrics, self._prepared_evaluation_workers(), training_done)
        self._steps_before_iteration = steps_before
        try:
            if self._runs_execution_plan:
                result = self._execution_plan_result()
            else:
                result = self.iteration_result(self._train_until_reporting(start, steps_before), steps_before)
        finally:
            training_done.set()
        if cfg["env_task_fn"] is not None:
            self._set_env_tasks(result)
        if parallel_evaluation is not None:
            self.evaluation_metrics = {"evaluation": parallel_evaluation.result()}
            result.update(self.evaluation_metrics)
        elif evaluate_now:
            # {"evaluation": metrics}, kept also from a subclass's own evaluate().
            self.evaluation_metrics = self.evaluate()
            result.update(self.evaluation_metrics)
        elif cfg["always_attach_evaluation_results"]:
            result.update(copy.deepcopy(self.evaluation_metrics))
        return result

    def iteration_result(self, learner_stats: dict[str, Any], steps_before: int | None = None) -> dict[str, Any]:
        """The result dict of the iteration that trained with ``learner_stats`` (by policy
        id): the episodes the workers finished since the last one (smoothed over
        ``metrics_smoothing_episodes``), the counters, timers and learner statistics; what
        ``train()`` returns, less Tune's own keys and the evaluation. An execution plan's
        ``StandardMetricsReporting`` calls it too.

        Args:
            learner_stats: ``{policy_id: {"learner_stats": stats}}`` (``info/learner``).
            steps_before: The global timestep when the iteration began (None: where this
                ``step()`` began), for ``timesteps_this_iter``.
        """
        if steps_before is None:
            steps_before = self._steps_before_iteration
        policy_map = self.workers.local_worker().policy_map
        for policy_id, policy_stats in learner_stats.items():
            if isinstance(policy_stats, dict) and policy_id in policy_map:
                # What on_learn_on_batch reported, beside learner_stats (classic RLlib's place).
                policy_stats["custom_metrics"] = dict(policy_map[policy_id].learn_custom_metrics)
        # The model's metrics(), as numbers, in both of classic RLlib's places: inside
        # learner_stats (its TF layout, which its Keras example reads) and beside it (its
        # torch layout). TF policies compute them in the train graph (learner_stats["model"]).
        for policy_id, info in learner_stats.items():
            if isinstance(info, dict) and isinstance(info.get("learner_stats"), dict):
                policy = policy_map.get(policy_id, self.learner_policy)
                metrics = info["learner_stats"].get("model") or policy.model_metrics()
                if metrics:
                    info["learner_stats"]["model"] = metrics
                info.setdefault("model", metrics)
        episodes = self.workers.collect_episodes()
        self._counters["num_env_restarts"] += self.workers.collect_env_restarts()
        self._episode_window.extend(episodes)
        self._counters["episodes_total"] += len(episodes)
        result: dict[str, Any] = {
            # episode_reward_*, custom_metrics and hist_stats over the smoothing window.
            **episode_results(self._episode_window.episodes, self.config["keep_per_episode_custom_metrics"]),
            "episodes_this_iter": len(episodes),
            "episodes_total": self._counters["episodes_total"],
            # Sub-envs closed and rebuilt after raising (restart_failed_sub_environments).
            "num_env_restarts": self._counters["num_env_restarts"],
            # Env steps, or agent steps with multiagent.count_steps_by: agent_steps (1.13's).
            "timesteps_total": self.global_timestep(),
            "timesteps_this_iter": self.global_timestep() - steps_before,
            "num_env_steps_sampled": self._counters["num_env_steps_sampled"],
            "num_env_steps_trained": self._counters["num_env_steps_trained"],
            **self.agent_step_results(),
            "num_healthy_workers": self.workers.num_healthy_workers,
            "num_remote_worker_restarts": self.workers.num_remote_worker_restarts,
            "info": {
                "learner": learner_stats,
                # Where the learner computes, and the GPUs Ray gave this process.
                "learner_device": self.learner_policy.device_name,
                "learner_gpu_ids": [str(i) for i in ray.get_gpu_ids()] if ray.is_initialized() else [],
                "num_env_steps_sampled": self._counters["num_env_steps_sampled"],
                "num_env_steps_trained": self._counters["num_env_steps_trained"],
            },
            "timers": {f"{name}_time_ms": round(1000 * t.mean, 3) for name, t in self._timers.items()},
            "sampler_perf": self.workers.sampler_perf(),
            "perf": process_perf(),
            # Means of this iteration's off-policy estimates by estimator (input read with
            # off_policy_estimation_methods): {"is": {"V_prev": ..., "V_step_IS": ...}}.
            "off_policy_estimator": off_policy_estimates(self.workers.collect_off_policy_estimates()),
            "config": self.config,
            **self.extra_results(),
        }
        for policy_id, policy_stats in learner_stats.items():
            if isinstance(policy_stats, dict) and policy_stats.get("custom_metrics"):
                # And by policy id among the custom metrics, where 1.13's torch policies put it.
                result["custom_metrics"][policy_id] = policy_stats["custom_metrics"]
        return result

    def _execution_plan_result(self) -> dict[str, Any]:
        """Pulls the execution plan (built at the first call) for one iteration's result.

        A plan ending in ``StandardMetricsReporting`` yields the result itself; for any
        other item the result is built from the learner info the plan recorded (a dict
        item's keys are added to it).

        Raises:
            RuntimeError: If the plan ends.
        """
        from rlstack.execution.common import counters_view
        from rlstack.execution.local_iterator import NOT_READY, MetricsContext, activate
        from rlstack.utils.metrics.learner_info import LEARNER_INFO

        if self._execution_plan is None:
            # The plan's counters and timers are the trainer's, under 1.x's names too.
            self._plan_metrics = MetricsContext(counters_view(self._counters), self._timers, trainer=self)
            plan = type(self).execution_plan
            kwargs = self._kwargs_for_execution_plan()
            parameters = inspect.signature(plan).parameters
            if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
                # A plan written as execution_plan(workers, config) (1.x before 1.12).
                kwargs = {key: value for key, value in kwargs.items() if key in parameters}
            with activate(self._plan_metrics):
                self._execution_plan = iter(plan(self.workers, self.config, **kwargs))
        metrics = self._plan_metrics
        metrics.last_result = None
        with self._timers["training_iteration"], activate(metrics):
            try:
                item = next(self._execution_plan)
                while item is NOT_READY:  # nothing to learn from yet (replay before learning_starts)
                    item = next(self._execution_plan)
            except StopIteration:
                raise RuntimeError(f"{type(self).__name__}.execution_plan's iterator ended; a plan must yield one "
                                   "item per training iteration forever (start it with ParallelRollouts).") from None
        if item is not None and item is metrics.last_result:
            return item
        result = self.iteration_result(metrics.info.get(LEARNER_INFO) or self.last_learner_info())
        if isinstance(item, dict):
            result.update(item)
        return result

    def _train_until_reporting(self, start: float, steps_before: int) -> dict[str, Any]:
        """Runs training steps until the iteration may report (``min_time_s_per_reporting``,
        ``min_sample_timesteps_per_reporting``, ``min_train_timesteps_per_reporting``);
        returns the last one's learner stats."""
        cfg = self.config
        trained_before = self.trained_timestep()
        with self._timers["training_iteration"]:
            while True:
                # training_iteration is classic RLlib's name for a subclass's own round.
                learner_stats = self.training_iteration() if _overrides(type(self), "training_iteration") \
                    else self.training_step()
                sampled = self.global_timestep() - steps_before
                trained = self.trained_timestep() - trained_before
                if cfg["min_time_s_per_reporting"] and time.time() - start < cfg["min_time_s_per_reporting"]:
                    continue
                if cfg["min_sample_timesteps_per_reporting"] and sampled < cfg["min_sample_timesteps_per_reporting"]:
                    continue
                if cfg["min_train_timesteps_per_reporting"] and trained < cfg["min_train_timesteps_per_reporting"]:
                    continue
                return learner_stats

    def _set_env_tasks(self, result: dict[str, Any]) -> None:
        """Gives each task-settable sub-env of the rollout workers the task that
        ``env_task_fn`` picks from this iteration's result."""
        from rlstack.env.apis.task_settable_env import TaskSettableEnv

        task_fn = self.config["env_task_fn"]
        # What the workers need of the result: the whole dict would carry the config.
        summary = {key: value for key, value in result.items() if key != "config"}

        def set_task(env: Any, context: Any) -> None:
            if isinstance(env, TaskSettableEnv):
                env.set_task(task_fn(summary, env, context))

        self.workers.foreach_env_with_context(set_task)

    def extra_results(self) -> dict[str, Any]:
        """Algorithm-specific entries of the result dict (replay buffer sizes, ...)."""
        return {}

    # ----- policies, acting and evaluation (RLlib 1.13's names) ---------------------------

    def get_policy(self, policy_id: str = DEFAULT_POLICY_ID) -> Policy:
        """Returns the learner's policy ``policy_id`` (``"default_policy"`` for a single-agent
        trainer; any id of ``multiagent.policies`` for a multi-agent one).

        Raises:
            KeyError: For another policy id, naming the known ones.
        """
        return self.workers.local_worker().get_policy(policy_id)

    def get_weights(self, policies: Collection[str] | None = None) -> dict[str, dict[str, np.ndarray]]:
        """The learner's weights by policy id, as numpy arrays (RLlib 1.13's form).

        Args:
            policies: The policy ids to return (None: all; ``["default_policy"]`` for a
                single-agent trainer).

        Returns:
            ``{policy_id: {name: array}}``.

        Raises:
            KeyError: For an unknown policy id, naming the known ones.
        """
        ids = list(self.workers.local_worker().policy_map) if policies is None else list(policies)
        return {policy_id: self.get_policy(policy_id).get_weights() for policy_id in ids}

    def set_weights(self, weights: dict[str, dict[str, np.ndarray]]) -> None:
        """Loads ``{policy_id: weights}`` (as :meth:`get_weights` returns) into the learner
        and sends them to the rollout workers.

        Raises:
            KeyError: For an unknown policy id, naming the known ones (nothing is loaded).
        """
        policies = {policy_id: self.get_policy(policy_id) for policy_id in weights}
        for policy_id, policy in policies.items():
            policy.set_weights(weights[policy_id])
        self.workers.sync_weights(self.global_timestep())

    # ----- acting -----------------------------------------------------------------------

    def compute_single_action(
        self,
        observation: Any = None,
        state: list[Any] | None = None,
        *,
        prev_action: Any = None,
        prev_reward: float | None = None,
        info: dict | None = None,
        input_dict: dict[str, Any] | None = None,
        policy_id: str = DEFAULT_POLICY_ID,
        full_fetch: bool = False,
        explore: bool | None = None,
        timestep: int | None = None,
        episode: Any = None,
        unsquash_action: bool | None = None,
        clip_action: bool | None = None,
        unsquash_actions: bool | None = None,
        clip_actions: bool | None = None,
        **kwargs: Any,
    ) -> Any:
        """The action the trained policy takes for one raw observation (RLlib 1.13's form).

        The observation goes through the same preprocessing and observation filter as
        during training (the filter is applied, not updated).

        Args:
            observation: One observation as the env returns it.
            state: A recurrent policy's state (``use_lstm``: ``[h, c]``): start an
                episode from ``trainer.get_policy().get_initial_state()`` and feed each
                call's ``state_out`` to the next. A non-empty state asks for the
                3-tuple return, as in 1.13 (for a model without state it is not used).
            prev_action: The previous action, as this method returned it, for a model
                that reads it (``lstm_use_prev_action``, a custom recurrent model); with
                ``attention_use_n_prev_actions: n``, the last ``n`` actions, oldest
                first. None (or zeros) at an episode's start. It is mapped back to the
                policy's form (``unsquash_action`` undone) before the model reads it, as
                training recorded it. Unused by a model that does not read it.
            prev_reward: The previous reward (``lstm_use_prev_reward``), or the last
                ``attention_use_n_prev_rewards`` rewards, oldest first; as ``prev_action``.
            info: Accepted for 1.13 compatibility; unused.
            input_dict: ``{"obs": observation}``, used instead of ``observation``.
            policy_id: The policy that acts (multi-agent: any of ``multiagent.policies``).
            full_fetch: Return ``(action, state_out, extra_fetches)`` even without a state.
            explore: Sample (True) or take the most likely action (False); None uses
                ``config["explore"]``.
            timestep: Accepted for 1.13 compatibility; schedules follow training.
            episode: Accepted for 1.13 compatibility; unused.
            unsquash_action: Map a Box action from [-1, 1] onto the action space's
                bounds; None: ``config["normalize_actions"]``.
            clip_action: When not unsquashing, clip a Box action to the bounds; None:
                ``config["clip_actions"]``.
            unsquash_actions: 1.13's deprecated spelling of ``unsquash_action``.
            clip_actions: 1.13's deprecated spelling of ``clip_action``.
            **kwargs: Forward-compatibility placeholder, as in 1.13.

        Returns:
            The action; or ``(action, state_out, extra_fetches)`` when ``state`` is
            non-empty or ``full_fetch`` is set (``state_out``: the new state, ``[]``
            for a model without state;
            ``extra_fetches`` holds ``action_logp``, ``action_dist_inputs``, ``vf_preds``
            and the like for this observation).

        Raises:
            ObservationError: (a ValueError) If the observation does not fit the
                observation space (wrong shape, a non-numeric dtype, an (obs, info) pair).
            ValueError: If ``state`` has the wrong number or shapes of tensors, or
                ``prev_action`` / ``prev_reward`` the wrong shape (or an action outside
                the action space).
            KeyError: For an unknown policy id.
        """
        unsquash_action = _renamed("unsquash_actions", unsquash_actions, "unsquash_action", unsquash_action)
        clip_action = _renamed("clip_actions", clip_actions, "clip_action", clip_action)
        if input_dict is not None:
            observation = input_dict["obs"]
            prev_action = input_dict.get("prev_actions", prev_action)
            prev_reward = input_dict.get("prev_rewards", prev_reward)
        if observation is None:
            raise ValueError("compute_single_action() needs an observation: pass the env's observation as "
                             "the first argument, or input_dict={'obs': observation}.")
        policy = self.get_policy(policy_id)
        obs = self._prepare_observations([observation], policy)
        action, state_out, extras = policy.compute_single_action(
            obs[0], state, prev_action=policy.squash_actions(prev_action, normalize=unsquash_action),
            prev_reward=prev_reward, explore=explore, timestep=timestep)
        action = policy.unsquash_actions(np.asarray(action)[None], normalize=unsquash_action, clip=clip_action)[0]
        # 1.13 returns the 3-tuple when a (non-empty) RNN state was passed in.
        if state or full_fetch:
            return action, state_out, extras
        return action

    def compute_action(self, *args: Any, **kwargs: Any) -> Any:
        """Classic RLlib's deprecated name of :meth:`compute_single_action` (same arguments)."""
        return self.compute_single_action(*args, **kwargs)

    def compute_actions(
        self,
        observations: Any,
        state: Any = None,
        *,
        prev_action: Any = None,
        prev_reward: Any = None,
        info: Any = None,
        policy_id: str = DEFAULT_POLICY_ID,
        full_fetch: bool = False,
        explore: bool | None = None,
        timestep: int | None = None,
        episodes: Any = None,
        unsquash_actions: bool | None = None,
        clip_actions: bool | None = None,
        **kwargs: Any,
    ) -> Any:
        """Actions for several raw observations, in one forward pass (RLlib 1.13's form).

        Args:
            observations: A dict ``{agent_id: obs}`` as in 1.13 (a dict of actions comes
                back), or, as an rlstack convenience, a sequence or batch array of
                observations (an array of actions comes back).
            state: A recurrent policy's state for the batch: one ``[B, ...]`` array per
                state tensor (None: the initial state). For a model without state it
                only asks for the 3-tuple return.
            prev_action: For a model that reads them, each observation's previous
                action(s) as :meth:`compute_single_action`'s ``prev_action``, batched
                ``[B, ...]`` (None: zeros, every episode at its start); else unused.
            prev_reward: Each observation's previous reward(s) ``[B, ...]``, likewise.
            info: Accepted for 1.13 compatibility; unused.
            policy_id: The policy that acts (multi-agent: any of ``multiagent.policies``).
            full_fetch: Return ``(actions, state_outs, extra_fetches)``.
            explore: As in :meth:`compute_single_action`.
            timestep: Accepted for 1.13 compatibility.
            episodes: Accepted for 1.13 compatibility; unused.
            unsquash_actions: As ``unsquash_action`` of :meth:`compute_single_action`.
            clip_actions: As ``clip_action`` of :meth:`compute_single_action`.
            **kwargs: Forward-compatibility placeholder, as in 1.13.

        Returns:
            The actions; with ``state`` or ``full_fetch``, ``(actions, state_outs,
            extra_fetches)``: for dict observations ``state_outs`` is ``{agent_id: []}``,
            else ``[]``; ``extra_fetches`` are batched columns, rows in input order.
        """
        policy = self.get_policy(policy_id)
        keys = None
        if isinstance(observations, dict):
            if _is_single_dict_obs(observations, policy):
                observations = [observations]  # one observation of a Dict space: a batch of one
            else:
                keys = list(observations)
                observations = [observations[key] for key in keys]
        obs = self._prepare_observations(list(observations), policy)
        if policy.is_recurrent:
            states = policy.initial_state_batch(len(obs)) if not state else policy.check_state(state)
            if any(value.shape[:1] != (len(obs),) for value in states):
                raise ValueError(f"compute_actions() got {len(obs)} observations but states of shapes "
                                 f"{[value.shape for value in states]}; give one state row per observation.")
            prev = policy.prev_input_batches(len(obs), policy.squash_actions(prev_action, normalize=unsquash_actions),
                                             prev_reward)
            actions, extras = policy.compute_actions(obs, explore=explore, state_batches=states,
                                                     prev_action_batch=prev.get("prev_actions"),
                                                     prev_reward_batch=prev.get("prev_rewards"))
            recurrent_out = [extras.pop(state_out_key(i)) for i in range(len(states))]
        else:
            actions, extras = policy.compute_actions(obs, explore=explore)
            recurrent_out = []
        actions = policy.unsquash_actions(actions, normalize=unsquash_actions, clip=clip_actions)
        if keys is not None:
            actions = dict(zip(keys, actions))
        if state is None and not full_fetch:
            return actions
        state_outs: Any = {key: [value[i] for value in recurrent_out] for i, key in enumerate(keys)} \
            if keys is not None else recurrent_out
        return actions, state_outs, extras

    # ----- export ------------------------------------------------------------------------

    def export_policy_model(self, export_dir: str, policy_id: str = DEFAULT_POLICY_ID,
                            onnx: int | None = None) -> str:
        """Writes the policy's model for serving without rlstack (classic RLlib's name).

        torch: a TorchScript ``model.pt`` (``torch.jit.load``); TF: a SavedModel
        (``tf.saved_model.load``, signature ``serving_default``); with ``onnx=OPSET`` a
        ``model.onnx`` in either framework (the ``export`` extra). Every file
        maps ``obs`` (a batch of flat observations as the policy's preprocessor writes them;
        for a Box space, the observations themselves) to ``output``, the action
        distribution's inputs (logits for Discrete actions), the names 1.x's export used.

        Returns:
            The path written.
        """
        return self.get_policy(policy_id).export_model(export_dir, onnx)

    def export_policy_checkpoint(self, export_dir: str, filename_prefix: str = "model",
                                 policy_id: str = DEFAULT_POLICY_ID) -> str:
        """Writes the policy's state (weights, optimizer state) to
        ``<export_dir>/<filename_prefix>.npz`` and returns its path (classic RLlib's name;
        ``policy.set_state(dict(np.load(path)))`` restores it)."""
        return self.get_policy(policy_id).export_checkpoint(export_dir, filename_prefix)

    def _prepare_observations(self, observations: list[Any], policy: Policy) -> np.ndarray:
        space = policy.observation_space
        for i, obs in enumerate(observations):
            check_observation(obs, space, "Observation" if len(observations) == 1 else
                              f"Observation {i} of {len(observations)}")
        observation_filter = self.workers.local_worker().filter_for(policy)  # each policy's own
        return observation_filter(policy.preprocessor.transform_batch(observations), update=False)

    # ----- evaluation ---------------------------------------------------------------------

    def evaluate(self) -> dict[str, Any]:
        """Plays ``evaluation_duration`` episodes (or timesteps) with ``evaluation_config``.

        Returns:
            ``{"evaluation": metrics}`` as in RLlib 1.13, the metrics being
            ``episode_reward_mean/min/max``, ``episode_len_mean``, ``custom_metrics``,
            ``hist_stats``, ``episodes_this_iter`` and ``timesteps_this_iter`` of the
            evaluation episodes, and ``num_env_restarts``, the sub-envs rebuilt during
            this evaluation; ``train()`` reports the same inner dict as
            ``result["evaluation"]``.
        """
        self.evaluation_metrics = {"evaluation": self._evaluation_metrics(self._prepared_evaluation_workers())}
        return self.evaluation_metrics

    def _before_evaluate(self) -> None:
        """Runs before every evaluation (classic RLlib's hook; nothing in the base)."""

    def _prepared_evaluation_workers(self) -> WorkerSet:
        """The evaluation workers (built on first use) with the learner's current weights
        and filter statistics."""
        cfg = self.config
        self._before_evaluate()
        if self.evaluation_workers is None:
            eval_config = evaluation_config_of(cfg)
            num = cfg["evaluation_num_workers"]
            self.evaluation_workers = WorkerSet(cfg["env"], self.policy_class, eval_config, num,
                                                local_env=num == 0, name="evaluation",
                                                postprocess_fn=type(self).postprocess_fn,
                                                numpy_policy_class=type(self).numpy_policy_class,
                                                policy_specs=self.policy_specs_for(eval_config))
        workers = self.evaluation_workers
        # The learner's weights and filter statistics (multi-agent: of every policy, by id).
        weights = self.workers.local_worker().get_weights()
        filter_state = self.workers.local_worker().get_filter_state()
        workers.local_worker().set_weights(weights)
        workers.local_worker().set_filter_state(filter_state)
        if workers.num_remote_workers:
            weights_ref, filter_ref = ray.put(weights), ray.put(filter_state)
            workers.call_healthy(lambda w: [w.set_weights.remote(weights_ref), w.set_filter_state.remote(filter_ref)])
        return workers

    def _evaluation_metrics(self, workers: WorkerSet, training_done: threading.Event | None = None) -> dict[str, Any]:
        """Plays the evaluation on ``workers`` and returns its metrics. With
        ``evaluation_duration: "auto"`` it plays rounds (one episode, or one fragment, per
        worker) until ``training_done`` is set, at least one."""
        cfg = self.config
        if cfg["custom_eval_function"] is not None:
            # Classic RLlib's hook: the function runs the evaluation workers its own way.
            return cfg["custom_eval_function"](self, workers)
        by_episodes = cfg["evaluation_duration_unit"] == "episodes"
        auto = cfg["evaluation_duration"] == "auto"
        per_worker = 1 if by_episodes else cfg["rollout_fragment_length"]
        duration = per_worker * max(1, workers.num_remote_workers) if auto else cfg["evaluation_duration"]
        episodes: list[EpisodeStats] = []
        while True:
            episodes += _play_evaluation(workers, duration, by_episodes)
            if not auto or training_done is None or training_done.is_set():
                break
        return {
            **episode_results(episodes, cfg["keep_per_episode_custom_metrics"]),
            "episodes_this_iter": len(episodes),
            "timesteps_this_iter": sum(e.length for e in episodes),
            # Sub-envs rebuilt during this evaluation (restart_failed_sub_environments);
            # their broken episodes are not among the episodes above.
            "num_env_restarts": workers.collect_env_restarts(),
        }

    # ----- multi-agent: the per-policy parts of a step, results and checkpoints ------------

    def policy_specs_for(self, config: dict[str, Any]) -> dict[str, PolicySpec] | None:
        """The multi-agent policies of ``config`` (see :func:`policy_specs`)."""
        return policy_specs(config, self._name)

    @property
    def is_multi_agent(self) -> bool:
        """Whether the rollout workers run several policies (policies configured, or a MultiAgentEnv)."""
        return self.workers.local_worker().multi_agent

    def check_multi_agent_support(self) -> None:
        """Raises after the workers found a MultiAgentEnv the trainer cannot train.

        Raises:
            ConfigError: Naming the trainers that can.
        """
        if self.is_multi_agent and not self.supports_multi_agent:
            self.workers.stop()
            raise ConfigError(unsupported_message(self._name))

    # ----- a synchronous step ---------------------------------------------------------------

    def sample_train_batch(self, size: int) -> SampleBatch | MultiAgentBatch:
        """``size`` env steps from the workers, or agent steps with ``count_steps_by: agent_steps``."""
        from rlstack.evaluation.worker_set import synchronous_parallel_sample

        if self.config["multiagent"]["count_steps_by"] == "agent_steps":
            return synchronous_parallel_sample(self.workers, max_agent_steps=size)
        return synchronous_parallel_sample(self.workers, max_env_steps=size)

    def count_sampled(self, batch: SampleBatch | MultiAgentBatch) -> None:
        """Adds a sampled batch's env and agent steps to the counters."""
        self._counters["num_env_steps_sampled"] += batch.env_steps()
        self._counters["num_agent_steps_sampled"] += batch.agent_steps()

    def count_trained(self, batch: SampleBatch | MultiAgentBatch) -> None:
        """Adds a batch learned on to the trained counters."""
        self._counters["num_env_steps_trained"] += batch.env_steps()
        self._counters["num_agent_steps_trained"] += batch.agent_steps()

    def policies_to_train(self, batch: Any = None) -> list[str]:
        """The ids of the policies that learn (``multiagent.policies_to_train``)."""
        local = self.workers.local_worker()
        if local.policies is None:
            return [DEFAULT_POLICY_ID]
        return [pid for pid in local.policies.policies if local.policies.is_trained(pid, batch)]

    def learn_per_policy(self, batch: SampleBatch | MultiAgentBatch,
                         learn: Callable[[Policy, SampleBatch], dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """``learn(policy, its rows)`` for each policy that learns and has rows.

        Returns:
            ``{policy_id: {"learner_stats": stats}}`` (the results' ``info/learner``).
        """
        if isinstance(batch, SampleBatch):
            return {DEFAULT_POLICY_ID: {"learner_stats": learn(self.learner_policy, batch)}}
        local = self.workers.local_worker()
        info = {}
        for pid in self.policies_to_train(batch):
            rows = batch.policy_batches.get(pid)
            if rows is not None and rows.count:
                info[pid] = {"learner_stats": learn(local.get_policy(pid), rows)}
        return info

    def last_learner_info(self) -> dict[str, Any]:
        """What an asynchronous trainer's step reports: the learner statistics it last
        received by policy id (``_last_learner_stats``), or, before any, an empty entry
        for a single-agent trainer's one policy."""
        stats = getattr(self, "_last_learner_stats", {})
        if stats or self.is_multi_agent:
            return stats
        return {DEFAULT_POLICY_ID: {"learner_stats": {}}}

    def global_timestep(self) -> int:
        """The step count schedules follow: env steps, or agent steps (``count_steps_by``)."""
        by_agent = self.is_multi_agent and self.config["multiagent"]["count_steps_by"] == "agent_steps"
        return self._counters["num_agent_steps_sampled" if by_agent else "num_env_steps_sampled"]

    def trained_timestep(self) -> int:
        """The steps trained on, counted as :meth:`global_timestep` counts the sampled ones."""
        by_agent = self.is_multi_agent and self.config["multiagent"]["count_steps_by"] == "agent_steps"
        return self._counters["num_agent_steps_trained" if by_agent else "num_env_steps_trained"]

    def sync_learned_weights(self, info: dict[str, Any]) -> None:
        """Moves every policy's schedules on and sends the weights of those that learned
        (``info``'s policies; a single-agent trainer's one) and the filters to the workers."""
        steps = self.global_timestep()
        for policy in self.workers.local_worker().policy_map.values():
            policy.on_global_var_update(steps)
        self.workers.sync_weights(steps, policies=list(info) if self.is_multi_agent else None)
        self.workers.sync_filters(broadcast=self.config["synchronize_filters"])

    # ----- policies added and removed at run time (self-play leagues) -------------------------

    def add_policy(self, policy_id: str, policy_cls: type[Policy] | str | None = None, *,
                   observation_space: gym.Space | None = None, action_space: gym.Space | None = None,
                   config: dict[str, Any] | None = None, policy_state: dict[str, Any] | None = None,
                   policy_mapping_fn: Callable[..., str] | str | None = None,
                   policies_to_train: Any = None, evaluation_workers: bool = True) -> Policy:
        """Adds a policy to every rollout worker (and evaluation worker) while training
        (1.13's ``Trainer.add_policy``): e.g. a frozen snapshot of the learner for
        self-play, added from ``on_train_result``.

        Args:
            policy_id: The new policy's id.
            policy_cls: Its class (None or the trainer's own policy class: the algorithm's,
                which acts in numpy on remote workers; a hand-written ``Policy`` acts as it is).
            observation_space: None: the space of an agent the (new) mapping maps to it.
            action_space: As ``observation_space``.
            config: Trainer config keys this policy overrides.
            policy_state: A ``policy.get_state()`` to start from (e.g. the learner's).
            policy_mapping_fn: The mapping new episodes use from now on (running episodes
                keep theirs); None: unchanged.
            policies_to_train: The new ``policies_to_train`` (a list or ``fn(policy_id,
                batch)``); None: unchanged (a list leaves the new policy untrained).
            evaluation_workers: Add it to the evaluation workers too.

        Returns:
            The new policy of the driver's worker (the learner, for the algorithm's class).

        Raises:
            ConfigError: For a single-agent trainer, a taken id, a bad class, space or
                config key, or spaces that cannot be inferred.
        """
        if not self.is_multi_agent:
            raise ConfigError(f"add_policy({policy_id!r}): this {self._name} trainer is single-agent; configure "
                              "multiagent.policies (or use a MultiAgentEnv) to train several policies.")
        # The policies as configured (a MultiAgentEnv without them has "default_policy").
        policies = configured_policies(self.config) or {pid: PolicySpec() for pid in self.workers.local_worker().policy_map}
        pid = as_policy_id(policy_id)
        if pid in self.workers.local_worker().policy_map:
            raise ConfigError(f"add_policy({pid!r}): a policy of that id exists already (the policies are "
                              f"{sorted(self.workers.local_worker().policy_map)}); pick a new id or remove_policy() "
                              "it first.")
        given = as_policy_spec(pid, PolicySpec(policy_cls, observation_space, action_space, config))
        if given.policy_class is not None and class_path(given.policy_class) == class_path(self.policy_class):
            given = given._replace(policy_class=None)  # the algorithm's own class, acting in numpy where it can
        check_multiagent_functions(policy_mapping_fn, policies_to_train, [*policies, pid])
        spec = complete_spec(self.config, pid, given, len(policies), self._name)
        self._validate_policy_config(pid, spec.config)
        spec = self.workers.add_policy(pid, spec, policy_mapping_fn, policies_to_train)
        evaluation = getattr(self, "evaluation_workers", None)
        if evaluation_workers and evaluation is not None:
            # Evaluation workers run the policy with evaluation_config's overrides (explore, ...).
            from rlstack.trainers.common.config import evaluation_config_of

            on_evaluation = complete_spec(evaluation_config_of(self.config), pid, given, len(policies), self._name)
            evaluation.add_policy(pid, on_evaluation._replace(observation_space=spec.observation_space,
                                                              action_space=spec.action_space),
                                  policy_mapping_fn, policies_to_train)
        # What a checkpoint's config and a recreated worker need: the spec as given, the
        # current mapping and training list.
        policies[pid] = given
        self._update_multiagent(policies, policy_mapping_fn, policies_to_train)
        policy = self.workers.local_worker().get_policy(pid)
        if policy_state is not None:
            policy.set_state(policy_state)
            self.workers.sync_weights(self.global_timestep(), policies=[pid])
        return policy

    def remove_policy(self, policy_id: str = DEFAULT_POLICY_ID, *,
                      policy_mapping_fn: Callable[..., str] | str | None = None, policies_to_train: Any = None,
                      evaluation_workers: bool = True) -> None:
        """Removes a policy from every rollout worker (and evaluation worker) (1.13's
        ``Trainer.remove_policy``). Running episodes in which an agent acts for it end
        unreported, and their envs start over.

        Args:
            policy_id: The policy to remove.
            policy_mapping_fn: The mapping from now on (it must no longer name the policy);
                None: unchanged.
            policies_to_train: The new ``policies_to_train``; None: unchanged (with the
                removed id dropped from a list).
            evaluation_workers: Remove it from the evaluation workers too.

        Raises:
            KeyError: For an unknown policy id, naming the known ones.
            ConfigError: For a single-agent trainer or the last policy.
        """
        if not self.is_multi_agent:
            raise ConfigError(f"remove_policy({policy_id!r}): this {self._name} trainer is single-agent; its one "
                              "policy cannot be removed.")
        self.workers.local_worker().get_policy(policy_id)  # KeyError naming the known ids
        to_train = self.config["multiagent"]["policies_to_train"]
        if policies_to_train is None and isinstance(to_train, (list, tuple, set, frozenset)):
            policies_to_train = [p for p in to_train if p != policy_id]
        remaining = [p for p in self.workers.local_worker().policy_map if p != policy_id]
        check_multiagent_functions(policy_mapping_fn, policies_to_train, remaining)
        evaluation = getattr(self, "evaluation_workers", None)
        for worker_set in [self.workers] + ([evaluation] if evaluation_workers and evaluation is not None else []):
            worker_set.remove_policy(policy_id, policy_mapping_fn, policies_to_train)
        policies = {pid: spec for pid, spec in (configured_policies(self.config) or {}).items() if pid != policy_id}
        self._update_multiagent(policies, policy_mapping_fn, policies_to_train)

    def _update_multiagent(self, policies: dict[str, PolicySpec], policy_mapping_fn: Any, policies_to_train: Any) -> None:
        # The trainer's multiagent config after add/remove_policy (None: that key unchanged);
        # the WorkerSet shares this config dict, so recreated workers read it too.
        multiagent = self.config["multiagent"]
        self.config["multiagent"] = {
            **multiagent, "policies": policies,
            "policy_mapping_fn": multiagent["policy_mapping_fn"] if policy_mapping_fn is None else policy_mapping_fn,
            "policies_to_train": multiagent["policies_to_train"] if policies_to_train is None else policies_to_train}

    def _validate_policy_config(self, policy_id: str, config: dict[str, Any]) -> None:
        from rlstack.trainers.common.config import validate_common_config

        try:
            validate_common_config(dict(config))
            self.validate_config(dict(config))
        except ConfigError as exc:
            raise ConfigError(f"In the config of policy {policy_id!r}: {exc}") from exc

    def agent_step_results(self) -> dict[str, int]:
        """The agent-step counters of the result dict (the env-step ones when single-agent)."""
        multi = self.is_multi_agent
        sampled = self._counters["num_agent_steps_sampled" if multi else "num_env_steps_sampled"]
        trained = self._counters["num_agent_steps_trained" if multi else "num_env_steps_trained"]
        # 1.13's result key, and the name this project's issue gives it.
        return {"num_agent_steps_sampled": sampled, "num_agent_steps_trained": trained,
                "agent_timesteps_total": sampled, "agent_steps_total": sampled}

    # ----- checkpoints (the file format is trainers/common/checkpoint_files.py's) -----------

    @classmethod
    def from_checkpoint(cls, checkpoint: Any, env: Any = None, config_overrides: dict[str, Any] | None = None) -> "Trainer":
        """Builds a trainer from a checkpoint's stored config and restores it.

        Args:
            checkpoint: A path from :meth:`save`, a ``tune.Checkpoint`` or a Tune result.
            env: The env, needed when the checkpoint's env was an object rather than a
                name (objects are stored only as their repr).
            config_overrides: Config keys to change (e.g. ``{"num_workers": 0}``).

        Raises:
            CheckpointError: If the checkpoint cannot be read or is of another algorithm.
        """
        checkpoint = getattr(checkpoint, "checkpoint", checkpoint)
        if isinstance(checkpoint, tune.Checkpoint):
            with checkpoint.as_directory() as directory:
                metadata, _ = ckpt.read_checkpoint(directory)
        else:
            metadata, _ = ckpt.read_checkpoint(checkpoint)
        if metadata.get("algorithm") != cls._name:
            raise CheckpointError(
                f"Checkpoint was written by {metadata.get('algorithm')!r}; load it with "
                f"{metadata.get('algorithm')}'s trainer, not {cls._name}'s."
            )
        config = {k: v for k, v in ckpt.with_moved_paths(metadata["config"]).items() if k in cls._default_config}
        if env is not None:
            config["env"] = env
        elif isinstance(config.get("env"), dict):
            raise CheckpointError(
                f"The checkpoint's env was an object ({config['env'].get('__repr__')}); pass it again: "
                f"{cls.__name__}.from_checkpoint(path, env=...)."
            )
        config.update(config_overrides or {})
        restorable_multiagent(config)
        # After the overrides: they may carry the stored config back (rlstack evaluate does).
        dropped = restorable_callbacks(config)
        if dropped:  # callbacks that could not be stored as an import path
            logger.warning("The checkpoint's callbacks (%s) were not importable and are not restored; pass them "
                           "with config_overrides={'callbacks': ...}.", ", ".join(dropped))
        trainer = cls(config)
        trainer.restore(checkpoint)
        return trainer

    def save(self, checkpoint_dir: str | None = None) -> Any:
        """Writes a checkpoint and returns its directory.

        Outside Tune this returns the checkpoint's path (a ``str``), by default
        ``<logdir>/checkpoint_<iteration>``, written atomically: ``checkpoint_dir`` itself
        when it is new, empty or an earlier rlstack checkpoint (replaced), else (a folder
        holding other files, such as a Tune trial's) a new ``checkpoint_<iteration>``
        inside it, where 1.13 always wrote. Under Tune it returns what Tune expects (Tune
        manages the directory and its upload).
        """
        if self._storage is not None:
            return super().save(checkpoint_dir)
        name = f"checkpoint_{self.iteration:06d}"
        target = Path(checkpoint_dir or os.path.join(self.logdir, name))
        if target.is_dir() and not (target / ckpt.METADATA_FILE).is_file() and any(target.iterdir()):
            target = target / name
        return ckpt.save_atomic(target, self.save_checkpoint)

    def restore(self, checkpoint_path: Any) -> None:
        """Loads a checkpoint from :meth:`save`: a path, a ``tune.Checkpoint`` or a Tune result.

        Unlike ``Trainable.restore`` this never unpickles anything: a directory that holds
        Ray's pickled dict checkpoint is refused.

        Raises:
            CheckpointError: If the checkpoint is missing, incomplete, corrupt, or from
                another algorithm, framework or model config.
        """
        checkpoint = getattr(checkpoint_path, "checkpoint", checkpoint_path)  # a Tune result
        if isinstance(checkpoint, tune.Checkpoint):  # (it is also os.PathLike, to refuse that use)
            with checkpoint.as_directory() as directory:
                self._restore_from_directory(directory)
            return
        if isinstance(checkpoint, (str, os.PathLike)):
            # A missing or foreign directory is described by read_checkpoint.
            self._restore_from_directory(str(Path(checkpoint).absolute()))
            return
        raise CheckpointError(
            f"Cannot restore from a {type(checkpoint).__name__}; pass the path returned by save(), "
            "a ray.tune.Checkpoint or a Tune result."
        )

    def save_to_object(self) -> bytes:
        """A checkpoint as bytes (classic RLlib's in-memory checkpoint, e.g. to send a
        trainer's state to another process): :meth:`save`'s directory as a tar archive,
        which :meth:`restore_from_object` reads. It holds arrays and JSON, nothing pickled."""
        with tempfile.TemporaryDirectory() as scratch:
            directory = ckpt.save_atomic(os.path.join(scratch, "checkpoint"), self.save_checkpoint)
            buffer = io.BytesIO()
            with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
                archive.add(directory, arcname="checkpoint")
            return buffer.getvalue()

    def restore_from_object(self, obj: bytes) -> None:
        """Restores the state :meth:`save_to_object` returned.

        Raises:
            CheckpointError: If ``obj`` is not such an archive.
        """
        with tempfile.TemporaryDirectory() as scratch:
            try:
                with tarfile.open(fileobj=io.BytesIO(obj), mode="r:gz") as archive:
                    archive.extractall(scratch, filter="data")  # no links or paths outside scratch
            except (tarfile.TarError, OSError, TypeError) as exc:
                raise CheckpointError(f"restore_from_object needs the bytes save_to_object returned: {exc}") from exc
            self._restore_from_directory(os.path.join(scratch, "checkpoint"))

    def _restore_from_directory(self, directory: str) -> None:
        if (Path(directory) / "_dict_checkpoint.pkl").exists():
            raise CheckpointError(
                f"{directory!r} holds a pickled Tune dict checkpoint, which rlstack never loads (unpickling "
                "runs code); restore from a checkpoint written by an rlstack trainer."
            )
        self.load_checkpoint(directory)
        self._time_since_restore = 0.0
        self._timesteps_since_restore = 0
        self._iterations_since_restore = 0
        self._restored = True

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        policy = self.learner_policy
        metadata = {
            "rlstack_version": rlstack.__version__,
            "ray_version": ray.__version__,
            "algorithm": self._name,
            "framework": self.config["framework"],
            "framework_version": ckpt.framework_version(self.config["framework"]),
            "policy_class": f"{type(policy).__module__}.{type(policy).__qualname__}",
            "iteration": self.iteration,
            "time_total_s": self._time_total,
            "counters": dict(self._counters),
            "env": env_spec_name(self.config["env"]),
            "config": ckpt.to_jsonable(with_multiagent_paths(with_callbacks_specs(self.config))),
        }
        policy_metadata, arrays = self.policy_checkpoint_arrays()
        ckpt.write_checkpoint(checkpoint_dir, {**metadata, **policy_metadata},
                              {**arrays, **self.extra_checkpoint_arrays()})
        return None

    def extra_checkpoint_arrays(self) -> dict[str, dict[str, np.ndarray]]:
        """Algorithm state beyond the policy's (e.g. a replay buffer), as groups of arrays."""
        return {}

    def restore_extra_arrays(self, arrays: dict[str, dict[str, np.ndarray]]) -> None:
        """Restores what :meth:`extra_checkpoint_arrays` saved (groups may be missing)."""

    def load_checkpoint(self, checkpoint: Any) -> None:
        if isinstance(checkpoint, dict):
            raise CheckpointError("This is a Tune dict checkpoint, not an rlstack checkpoint directory.")
        metadata, arrays = ckpt.read_checkpoint(checkpoint)
        if metadata.get("algorithm") != self._name:
            raise CheckpointError(
                f"Checkpoint {checkpoint!r} was written by {metadata.get('algorithm')!r}, not {self._name!r}; "
                f"restore it with the {metadata.get('algorithm')} trainer: "
                f"rlstack.get_trainer_class({metadata.get('algorithm')!r}).from_checkpoint(path)."
            )
        if metadata.get("framework") != self.config["framework"]:
            raise CheckpointError(
                f"Checkpoint {checkpoint!r} holds a {metadata.get('framework')!r} policy but this trainer uses "
                f"framework={self.config['framework']!r}; set config['framework'] = {metadata.get('framework')!r}."
            )
        saved_model = (metadata.get("config") or {}).get("model") or {}
        differing = [key for key in _MODEL_SHAPE_KEYS
                     if ckpt.to_jsonable(self.config["model"].get(key)) != saved_model.get(key)]
        if differing:
            details = ", ".join(f"{key}: checkpoint {saved_model.get(key)!r} vs trainer "
                                f"{self.config['model'].get(key)!r}" for key in differing)
            raise CheckpointError(
                f"Checkpoint {checkpoint!r} was saved with another network ({details}); build the trainer with "
                "the checkpoint's model config, e.g. with the config stored in its rlstack_checkpoint.json."
            )
        self.restore_policy_arrays(metadata, arrays, checkpoint)
        self.restore_extra_arrays(arrays)
        self._counters.update(metadata.get("counters", {}))
        self._iteration = int(metadata.get("iteration", 0))
        self._time_total = float(metadata.get("time_total_s", 0.0))
        self._timesteps_total = self._counters["num_env_steps_sampled"]
        self.workers.sync_weights(self.global_timestep())

    # ----- policies and filters in a checkpoint ------------------------------------------------

    def policy_checkpoint_arrays(self) -> tuple[dict[str, Any], dict[str, dict[str, np.ndarray]]]:
        """``(manifest entries, array groups)`` holding every policy's state and filter.

        Single-agent: ``policy_state`` and ``filters``. Multi-agent: ``policy_state_<i>``
        per policy, the manifest's ``policies`` mapping each id to its file, and
        ``filters`` with each policy's statistics under ``<i>/<name>``.
        """
        local = self.workers.local_worker()
        if local.policies is None:
            return {}, {"policy_state": self.learner_policy.get_state(),
                        "filters": _filter_arrays(local.get_filter_state())}
        files = {pid: f"policy_state_{i}" for i, pid in enumerate(local.policy_map)}
        arrays = {files[pid]: policy.get_state() for pid, policy in local.policy_map.items()}
        filters = {pid: _filter_arrays(state) for pid, state in local.get_filter_state().items()}
        arrays["filters"] = {f"{files[pid][len('policy_state_'):]}/{name}": value
                             for pid, state in filters.items() for name, value in state.items()}
        return {"policies": files}, arrays

    def restore_policy_arrays(self, metadata: dict[str, Any], arrays: dict[str, dict[str, np.ndarray]],
                              checkpoint: Any) -> None:
        """Loads what :meth:`policy_checkpoint_arrays` wrote.

        Raises:
            CheckpointError: If the checkpoint's policies are not this trainer's.
        """
        local = self.workers.local_worker()
        files = metadata.get("policies")
        if (local.policies is None) != (files is None):
            kind = "a multi-agent" if files is not None else "a single-agent"
            raise CheckpointError(f"Checkpoint {checkpoint!r} is {kind} checkpoint but this trainer is not; build it "
                                  "with the checkpoint's multiagent config (rlstack_checkpoint.json).")
        if files is None:
            if "policy_state" not in arrays:
                raise CheckpointError(f"Checkpoint {checkpoint!r} has no policy_state.npz; it is incomplete.")
            self.learner_policy.set_state(arrays["policy_state"])
            if arrays.get("filters"):
                self.workers.set_filter_state(arrays["filters"])
            return
        if set(files) != set(local.policy_map):
            raise CheckpointError(f"Checkpoint {checkpoint!r} holds policies {sorted(files)} but this trainer has "
                                  f"{sorted(local.policy_map)}; build it with the checkpoint's multiagent.policies.")
        missing = [name for name in files.values() if name not in arrays]
        if missing:
            raise CheckpointError(f"Checkpoint {checkpoint!r} has no {', '.join(missing)}.npz; it is incomplete.")
        for pid, name in files.items():
            local.get_policy(pid).set_state(arrays[name])
        saved = arrays.get("filters") or {}
        filters = {pid: {key.split("/", 1)[1]: value for key, value in saved.items()
                         if key.split("/", 1)[0] == name[len("policy_state_"):]} for pid, name in files.items()}
        if any(filters.values()):
            self.workers.set_filter_state({pid: state for pid, state in filters.items() if state})

    # ----- resources and shutdown -------------------------------------------------------------

    @classmethod
    def default_resource_request(cls, config: dict[str, Any]) -> PlacementGroupFactory:
        """One bundle for the driver (CPU + ``num_gpus``), one per rollout worker and one
        per evaluation worker, placed with ``placement_strategy``."""
        # Only the trainer's own keys count (1.13 let a function trainable's config carry
        # keys of its own, e.g. an iteration count, into this call).
        known = {key: value for key, value in (config or {}).items()
                 if RENAMED_KEYS.get(key, key) in cls._default_config}
        cfg = merge_config(cls._default_config, known, cls._name)
        worker_bundle = worker_resources(cfg)
        bundles = [{"CPU": cfg["num_cpus_for_driver"], "GPU": 0 if cfg["_fake_gpus"] else cfg["num_gpus"]}]
        if any(amount > 0 for amount in worker_bundle.values()):
            # (Ray refuses a bundle of nothing; a worker that asks for no resources, as 1.x
            # allowed with num_cpus_per_worker=0, needs no reservation.)
            bundles += [dict(worker_bundle) for _ in range(cfg["num_workers"])]
            bundles += [dict(worker_bundle) for _ in range(cfg["evaluation_num_workers"])]
        return PlacementGroupFactory(bundles, strategy=cfg["placement_strategy"])

    @classmethod
    def learns_asynchronously(cls, config: dict[str, Any]) -> bool:
        """Whether what a run of ``config`` learns depends on how fast its processes run,
        not only on its seed: workers sample while the learner learns on what arrived
        (ApeX, IMPALA, A3C with several workers), so a busier machine changes the ratio
        of learning to sampling. A synchronous trainer learns the same steps at any
        speed. rlstack's learning tests share the machine only between synchronous runs.
        """
        return False

    def cleanup(self) -> None:
        _LIVE_TRAINERS.discard(self)
        if getattr(self, "_learner_threads", None) is not None:
            self._learner_threads.restore()
        if getattr(self, "_result_logger", None) is not None:
            self._result_logger.close()
        for workers in (getattr(self, "workers", None), getattr(self, "evaluation_workers", None)):
            if workers is not None:
                workers.stop()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(env={env_spec_name(self.config.get('env'))!r}, framework={self.config.get('framework')!r})"


def _filter_arrays(state: dict[str, Any]) -> dict[str, np.ndarray]:
    # A classic custom filter's state is the filter object; checkpoints hold arrays only.
    arrays = {name: value for name, value in state.items() if isinstance(value, np.ndarray)}
    if len(arrays) < len(state):
        logger.warning("The custom observation filter's statistics are not saved in the checkpoint (it has no "
                       "get_state() of numpy arrays); a restored trainer starts them afresh.")
    return arrays


def with_common_config(extra_config: dict[str, Any]) -> dict[str, Any]:
    """RLlib 1.13's way of writing an algorithm's defaults: a deep copy of
    ``COMMON_CONFIG`` with ``extra_config`` merged in (sub-dicts key by key). Unlike
    :func:`~rlstack.trainers.common.config.merge_config`, it checks nothing: the keys are the new
    algorithm's own."""
    merged = copy.deepcopy(COMMON_CONFIG)
    _deep_update(merged, extra_config)
    return merged


def _deep_update(base: dict[str, Any], update: dict[str, Any]) -> None:
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _deep_update(base[key], value)
        else:
            base[key] = copy.deepcopy(value)


def process_perf() -> dict[str, float]:
    """1.13's ``perf`` result entry (the machine's CPU and RAM use, in percent) plus this
    trainer process's resident memory in MB (``rss_mb``, which `rlstack compare` reports)."""
    return {"cpu_util_percent": psutil.cpu_percent(), "ram_util_percent": psutil.virtual_memory().percent,
            "rss_mb": round(psutil.Process().memory_info().rss / 2**20, 1)}


# Trainers whose stop() has not run. A script or notebook that ends without trainer.stop()
# still stops them, before Ray's own exit hook (registered when ray was imported, so run
# after this one) shuts Ray down under workers that are still sampling or holding objects.
_LIVE_TRAINERS: weakref.WeakSet = weakref.WeakSet()


def _before_any_evaluation() -> dict[str, Any]:
    # 1.13's evaluation_metrics before the first evaluation.
    nan = float("nan")
    return {"evaluation": {"episode_reward_max": nan, "episode_reward_min": nan, "episode_reward_mean": nan}}


@atexit.register
def stop_live_trainers() -> None:
    """Stops every trainer still running (called at interpreter exit)."""
    for trainer in list(_LIVE_TRAINERS):
        with contextlib.suppress(Exception):
            trainer.stop()


def _is_single_dict_obs(observations: dict, policy: Policy) -> bool:
    space = policy.observation_space
    return isinstance(space, gym.spaces.Dict) and set(observations) == set(space.spaces)


def _renamed(old: str, old_value: Any, new: str, new_value: Any) -> Any:
    # 1.13 renamed these arguments and warned about the old spelling; both still work.
    if old_value is None:
        return new_value
    warnings.warn(f"compute_single_action({old}=...) is deprecated (as in RLlib 1.13); use {new}=... instead.",
                  DeprecationWarning, stacklevel=3)
    return old_value if new_value is None else new_value


def _play_evaluation(workers: WorkerSet, duration: int, by_episodes: bool) -> list[EpisodeStats]:
    # duration episodes (or timesteps) shared out among the evaluation workers.
    if workers.num_remote_workers:
        # A worker recreated or dropped on the way contributes what it finished.
        positions = workers.healthy_positions()
        shares = [duration // len(positions) + (1 if i < duration % len(positions) else 0)
                  for i in range(len(positions))]
        results = workers.call_each({p: (lambda w, n=n: _run_share(w, n, by_episodes))
                                     for p, n in zip(positions, shares) if n > 0})
        return [e for batch in results.values() for e in batch]
    local = workers.local_worker()
    return local.run_episodes(duration, None) if by_episodes else local.run_episodes(None, duration)


def _run_share(worker: Any, n: int, by_episodes: bool) -> Any:
    # One evaluation worker's share: n episodes or n timesteps.
    return worker.run_episodes.remote(n, None) if by_episodes else worker.run_episodes.remote(None, n)


# Model keys that decide the network's layers and shapes.
_MODEL_SHAPE_KEYS = ("fcnet_hiddens", "conv_filters", "post_fcnet_hiddens", "vf_share_layers", "free_log_std",
                     "custom_model", "custom_action_dist")
