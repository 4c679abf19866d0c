"""Trainer: the base of every algorithm, a Ray Tune ``Trainable``.

The base owns everything but the algorithm: config merge and validation, starting Ray
when needed, building the rollout workers, the result dict and resource requests;
acting with the trained policy and evaluation come from ``acting.py``
(:class:`ActingMixin`), the per-policy steps of multi-agent runs from ``multi_agent.py``
(:class:`MultiAgentTrainerMixin`), checkpoints from ``checkpointing.py``
(:class:`CheckpointMixin`). An algorithm
subclass supplies ``_name``, ``_default_config``, ``validate_config``,
``get_default_policy_class`` and ``training_step``.
"""

from __future__ import annotations

import atexit
import contextlib
import copy
import importlib
import logging
import os
import tempfile
import time
import weakref
from collections.abc import Callable
from typing import Any

import psutil
import ray
from ray import tune
from ray.tune.execution.placement_groups import PlacementGroupFactory

from rlstack.env.registry import env_spec_name
from rlstack.errors import ConfigError
from rlstack.evaluation.callbacks import make_callbacks, overridden_hooks
from rlstack.evaluation.metrics import EpisodeWindow, episode_results, off_policy_estimates
from rlstack.evaluation.worker_policies import resolve_class
from rlstack.evaluation.worker_set import WorkerSet, worker_resources, worker_start_error
from rlstack.policies.policy import Policy
from rlstack.trainers import checkpoint as ckpt
from rlstack.trainers.acting import DEFAULT_POLICY_ID, ActingMixin
from rlstack.trainers.checkpointing import CheckpointMixin
from rlstack.trainers.multi_agent import MultiAgentTrainerMixin, validate_multiagent_config
from rlstack.trainers.ray_start import ensure_ray
from rlstack.trainers.result_logger import create_user_logger, results_writer
from rlstack.trainers.config import (
    COMMON_CONFIG,
    merge_config,
    validate_common_config,
)
from rlstack.utils.framework import check_installed
from rlstack.utils.seeding import seed_everything
from rlstack.utils.threads import LearnerThreads
from rlstack.utils.timers import TimerStat

logger = logging.getLogger(__name__)

__all__ = ["COMMON_CONFIG", "DEFAULT_POLICY_ID", "Trainer"]


class Trainer(ActingMixin, MultiAgentTrainerMixin, CheckpointMixin, tune.Trainable):
    """Base class of rlstack trainers (``PPOTrainer`` and friends).

    Args:
        config: The user's config; missing keys take the algorithm's defaults.
        env: The env (overrides ``config["env"]``): a gymnasium id, a registered name,
            an Env class or a creator.
        logger_creator: RLlib 1.13's ``logger_creator(config) -> logger`` for a
            standalone trainer: the logger's ``logdir`` becomes the trainer's
            :attr:`logdir`; a logger with ``on_result(result)`` (1.x's Logger interface,
            e.g. :class:`~rlstack.trainers.result_logger.UnifiedLogger`) receives every
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

    def __init__(
        self,
        config: dict[str, Any] | None = None,
        env: Any = None,
        logger_creator: Callable[[dict[str, Any]], Any] | None = None,
        remote_checkpoint_dir: str | None = None,
        sync_function_tpl: str | None = None,
        **kwargs: Any,
    ) -> None:
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
        that ``logger_creator`` made. Under Tune: the trial directory."""
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

    # ----- the algorithm's part -------------------------------------------------------

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
        merged = merge_config(cls._default_config, config, cls._name)
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
            from rlstack.trainers.registry import ALGORITHMS, get_trainer_class

            able = sorted(name for name in ALGORITHMS if get_trainer_class(name).supports_recurrent_models)
            raise ConfigError(
                f"model.{memory}=True is not supported by {cls._name} yet; recurrent models train with "
                f"{', '.join(able)}. Use one of those, or set {memory}=False (stack past observations with a "
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

    def get_policy_class_path(self, config: dict[str, Any]) -> str:
        """``"module:Class"`` of the policy class for ``config["framework"]``: the
        algorithm's :attr:`policy_classes` entry (a subclass that picks its policy from
        other keys overrides this)."""
        return type(self).policy_classes[config["framework"]]

    def get_default_policy_class(self, config: dict[str, Any]) -> type[Policy]:
        """The policy class for ``config["framework"]`` (imports that framework only)."""
        module_name, class_name = self.get_policy_class_path(config).split(":")
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

    def learn_on_policy_batch(self, policy: Policy, batch: SampleBatch) -> dict[str, Any]:
        """How the synchronous :meth:`training_step` makes one policy learn on its rows of
        the train batch; returns its learner stats."""
        return policy.learn_on_batch(batch)

    @classmethod
    def rollout_worker_count(cls, config: dict[str, Any]) -> int:
        """How many remote RolloutWorkers the trainer's WorkerSet starts: ``num_workers``,
        except for trainers whose ``num_workers`` are actors of their own (ES, ARS: see
        ``trainers/evolution.py``), which keep only the local worker."""
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
        policy_class_path = self.get_policy_class_path(self.config)
        seed_everything(self.config["seed"])
        if self.config["num_workers"] > 0 or self.config["evaluation_num_workers"] > 0:
            ensure_ray(self.config, preload=policy_class_path)
        # The worker set starts the remote workers first and then builds the driver's
        # policy, so the framework import here overlaps the workers' start-up.
        error = None
        try:
            self.workers = WorkerSet(self.config["env"], policy_class_path, self.config,
                                     self.rollout_worker_count(self.config),
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
        self._counters = {"num_env_steps_sampled": 0, "num_env_steps_trained": 0, "num_agent_steps_sampled": 0,
                          "num_agent_steps_trained": 0, "episodes_total": 0, "num_env_restarts": 0}
        self._episode_window = EpisodeWindow(self.config["metrics_smoothing_episodes"])
        self._timers = {name: TimerStat() for name in ("training_iteration", "sample", "learn", "synch_weights")}
        self._last_learner_stats: dict[str, Any] = {}
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
        self._counters = dict.fromkeys(self._counters, 0)
        self._episode_window = EpisodeWindow(merged["metrics_smoothing_episodes"])
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
        learner_stats: dict[str, Any] = {}
        with self._timers["training_iteration"]:
            while True:
                learner_stats = self.training_step()
                sampled = self.global_timestep() - steps_before
                if cfg["min_time_s_per_reporting"] and time.time() - start < cfg["min_time_s_per_reporting"]:
                    continue
                if cfg["min_sample_timesteps_per_reporting"] and sampled < cfg["min_sample_timesteps_per_reporting"]:
                    continue
                break
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
            **episode_results(self._episode_window.episodes),
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
        interval = cfg["evaluation_interval"]
        if interval and (self.iteration + 1) % interval == 0:
            result.update(self.evaluate())  # {"evaluation": metrics}
        return result

    def extra_results(self) -> dict[str, Any]:
        """Algorithm-specific entries of the result dict (replay buffer sizes, ...)."""
        return {}

    # ----- resources and shutdown -------------------------------------------------------------

    @classmethod
    def default_resource_request(cls, config: dict[str, Any]) -> PlacementGroupFactory:
        """One bundle for the driver (CPU + ``num_gpus``), one per rollout worker and one
        per evaluation worker, placed with ``placement_strategy``."""
        cfg = merge_config(cls._default_config, config, cls._name)
        worker_bundle = worker_resources(cfg)
        bundles = [{"CPU": cfg["num_cpus_for_driver"], "GPU": 0 if cfg["_fake_gpus"] else cfg["num_gpus"]}]
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


def process_perf() -> dict[str, float]:
    """1.13's ``perf`` result entry (the machine's CPU and RAM use, in percent) plus this
    trainer process's resident memory in MB (``rss_mb``, which `rlstack compare` reports)."""
    return {"cpu_util_percent": psutil.cpu_percent(), "ram_util_percent": psutil.virtual_memory().percent,
            "rss_mb": round(psutil.Process().memory_info().rss / 2**20, 1)}


# Trainers whose stop() has not run. A script or notebook that ends without trainer.stop()
# still stops them, before Ray's own exit hook (registered when ray was imported, so run
# after this one) shuts Ray down under workers that are still sampling or holding objects.
_LIVE_TRAINERS: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def stop_live_trainers() -> None:
    """Stops every trainer still running (called at interpreter exit)."""
    for trainer in list(_LIVE_TRAINERS):
        with contextlib.suppress(Exception):
            trainer.stop()
