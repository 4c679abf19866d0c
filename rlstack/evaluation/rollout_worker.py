"""RolloutWorker: steps a vector env with a policy and returns postprocessed batches.

A worker runs as a Ray actor (``worker_index`` 1..N) or in the driver (index 0: the
learner's copy, which samples only when ``num_workers=0``). Per step it makes one
forward pass for all ``num_envs_per_worker`` sub-envs. Steps are written into
preallocated ``[rollout_fragment_length, num_envs]`` arrays and cut into trajectory
pieces (one episode of one sub-env each) only at the end of a fragment, where each piece
goes through ``Policy.postprocess_trajectory``. Episode ids, returns and lengths, the
finished episodes' metrics and the callbacks' hooks are kept per sub-env beside the
loop; the 1.13 accessors (``policy_map``, ``foreach_policy``, ``foreach_env``, ...),
the input reader, output writer and off-policy estimators are the worker's too.

Faults: observations and rewards are checked for NaN/inf as they come out of the env (a
:class:`~rlstack.errors.NonFiniteError` names the sub-env and step). A sub-env that raises
stops sampling with an :class:`~rlstack.errors.EnvFailureError`, or, with
``restart_failed_sub_environments``, is rebuilt by the VectorEnv; its broken episode is
then dropped from the batch and from the episode metrics and counted in
:meth:`RolloutWorker.get_env_restarts`.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from rlstack.env.env_context import EnvContext
from rlstack.env.external_env import ExternalEnv
from rlstack.env.atari import is_atari
from rlstack.env.registry import make_env, restore_registry
from rlstack.env.multi_agent_vector_env import MultiAgentVectorEnv, make_vector_env
from rlstack.env.remote_vector_env import ActorEnv, RemoteVectorEnv, is_plain_env_class, make_env_actor
from rlstack.env.vector_env import VectorEnv, env_name
from rlstack.env.wrappers.recording import RenderAndRecord
from rlstack.errors import ConfigError, EnvError, EnvFailureError, NonFiniteError
from rlstack.evaluation import recurrent_states
from rlstack.evaluation.evaluation_episodes import run_episodes
from rlstack.evaluation.metrics import EpisodeStats
from rlstack.evaluation.callbacks import DefaultCallbacks, make_callbacks, overridden_hooks
from rlstack.evaluation.episode import DEFAULT_AGENT_ID, EPISODE_HOOKS, EpisodeTracker, zero_action
from rlstack.evaluation.worker_policies import (BuildArgs, WorkerPolicyMap, build_policy, class_path,  # noqa: F401
                                                refresh_acting, resolve_class)
from rlstack.models.catalog import ModelCatalog
from rlstack.policies.numpy_policy import NumpyPolicy, PostprocessFn
from rlstack.policies.policy import Policy
from rlstack.policies.policy_map import PolicySpec
from rlstack.sample_batch import DEFAULT_POLICY_ID, MultiAgentBatch, SampleBatch, concat_samples
from rlstack.utils.filters import make_filter
from rlstack.utils.seeding import env_seed, seed_everything

_B = SampleBatch

# An episode longer than this in complete_episodes mode is taken as one that never ends.
_MAX_PENDING_STEPS = 1_000_000
# sample() gives up after this many fragments in a row that yield no row because sub-envs
# failed in them (restart_failed_sub_environments): the envs fail faster than they run.
# The default of the config key num_consecutive_failed_fragments_tolerance.
_MAX_FAILED_EMPTY_FRAGMENTS = 10


# The RolloutWorker built last in this process (classic RLlib's get_global_worker()).
_global_worker: RolloutWorker | None = None


def get_global_worker() -> RolloutWorker | None:
    """The rollout worker of the calling process (the last one built here), so that code
    running inside a worker (an env, a callback) can reach it; None before any."""
    return _global_worker


def _has_float_box(space: gym.Space) -> bool:
    """Whether an observation of ``space`` can hold a NaN or inf (a float Box somewhere
    in it); integer Boxes (Atari frames), Discrete and friends cannot."""
    if isinstance(space, gym.spaces.Box):
        return space.dtype.kind == "f"
    if isinstance(space, gym.spaces.Dict):
        return any(_has_float_box(sub) for sub in space.spaces.values())
    if isinstance(space, gym.spaces.Tuple):
        return any(_has_float_box(sub) for sub in space.spaces)
    return not isinstance(space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary))


# 1.13's RolloutWorker keywords that name a config key, and the key.
_CLASSIC_WORKER_KEYS = {"rollout_fragment_length": "rollout_fragment_length", "batch_mode": "batch_mode",
                        "num_envs": "num_envs_per_worker", "seed": "seed", "observation_filter": "observation_filter",
                        "clip_rewards": "clip_rewards"}


def _classic_arguments(env_spec: Any, policy_class: Any, config: dict | None,
                       classic: dict[str, Any]) -> tuple[Any, Any, dict]:
    # RolloutWorker(env_creator=..., policy_spec=..., policy_config=..., ...): 1.13's keyword
    # form, as (env_spec, policy_class, complete config).
    from rlstack.trainers.common.config import COMMON_CONFIG, merge_config  # the trainers' defaults (a higher layer)

    classic = dict(classic)
    env_creator = classic.pop("env_creator", None)
    spec = classic.pop("policy_spec", None) or classic.pop("policy", None)
    policy_config = classic.pop("policy_config", None)
    overrides = {_CLASSIC_WORKER_KEYS[key]: classic.pop(key) for key in list(classic) if key in _CLASSIC_WORKER_KEYS}
    if classic:
        raise TypeError(f"RolloutWorker() got unexpected keyword arguments {sorted(classic)}; of 1.13's keywords "
                        f"rlstack takes env_creator, policy_spec (or policy), policy_config and "
                        f"{', '.join(sorted(_CLASSIC_WORKER_KEYS))}; set other keys in policy_config.")
    if env_spec is None and env_creator is None:
        raise TypeError("RolloutWorker() needs an env: RolloutWorker(env_creator=lambda ctx: MyEnv(ctx), ...) "
                        "(or rlstack's RolloutWorker(env, policy_class, config)).")
    policy_class = policy_class or spec
    if policy_class is None or not isinstance(policy_class, (type, str)):
        raise TypeError(f"RolloutWorker() needs policy_spec=<a Policy class>, got {policy_class!r}; for several "
                        "policies set policy_config['multiagent'] and use a Trainer's WorkerSet.")
    merged = merge_config(COMMON_CONFIG, {**(config or {}), **(policy_config or {}), **overrides}, "RolloutWorker")
    return env_spec if env_spec is not None else env_creator, policy_class, merged


class RolloutWorker:
    """Collects experience with one policy in ``num_envs_per_worker`` sub-envs.

    Args:
        env_spec: The env (name, class or creator).
        policy_class: The algorithm's policy class for the configured framework, or its
            import path ``"module:Class"`` (imported only if this worker needs it).
        config: The trainer's merged config.
        worker_index: 0 for the driver's copy, 1..N for remote workers.
        num_workers: Number of remote workers in the set.
        env_registry: Envs registered in the driver process (remote workers need them).
        model_registry: Custom models and action distributions registered in the driver process.
        spaces: ``(observation_space, action_space)`` for a worker built without envs.
        num_gpus: GPUs for this worker's policy.
        postprocess_fn: The algorithm's framework-free postprocessing, for workers that
            act with a :class:`NumpyPolicy`.
        numpy_policy_class: The algorithm's numpy acting policy (or its import path);
            None: :class:`NumpyPolicy`.
        learns: This remote worker computes gradients (A3C): it keeps the framework
            policy even when it acts in numpy.
        policy_specs: The multi-agent policies (``multiagent.policies`` as the trainer
            completed them); None: single-agent, unless the env is a MultiAgentEnv.

    1.13's keyword form builds a worker on its own, for custom workflows:
    ``RolloutWorker(env_creator=..., policy_spec=MyPolicy, policy_config={...},
    rollout_fragment_length=..., batch_mode=..., num_envs=...)`` (``policy`` is 1.13's older
    name of ``policy_spec``), and :meth:`as_remote` makes it a Ray actor class.

    A multi-agent worker (policies configured, a MultiAgentEnv, or ``spaces`` given by
    policy id) holds its policies in :attr:`policies` (a :class:`WorkerPolicyMap`) and
    samples with :class:`~rlstack.evaluation.multi_agent_sampler.MultiAgentSampler`;
    ``policy``, ``sampling_policy``, ``filter`` and ``preprocessor`` are then those of its
    first policy.
    """

    def __init__(
        self,
        env_spec: Any = None,
        policy_class: type[Policy] | str | None = None,
        config: dict | None = None,
        worker_index: int = 0,
        num_workers: int = 0,
        env_registry: dict | None = None,
        model_registry: dict | None = None,
        spaces: tuple[gym.Space, gym.Space] | None = None,
        num_gpus: float = 0,
        postprocess_fn: PostprocessFn | None = None,
        numpy_policy_class: type[Policy] | str | None = None,
        learns: bool = False,
        policy_specs: dict[str, PolicySpec] | None = None,
        **classic: Any,
    ) -> None:
        global _global_worker
        _global_worker = self
        if classic or config is None:
            env_spec, policy_class, config = _classic_arguments(env_spec, policy_class, config, classic)
        if env_registry:
            restore_registry(env_registry)
        if model_registry:
            ModelCatalog.restore_models(model_registry)
        self.config = config
        self.worker_index = worker_index
        self.num_workers = num_workers
        seed = config.get("seed")
        if worker_index > 0:
            # A remote worker is its own process: seed its generators. The driver's
            # workers share the trainer's generators, which the trainer seeded.
            seed_everything(None if seed is None else seed + worker_index)
        self._init_callbacks(config)
        # The vector env this worker steps (1.13's name for its BaseEnv); ``env`` is one user env.
        self.async_env: VectorEnv | None = None
        if spaces is None:
            context = EnvContext(config.get("env_config"), worker_index, 0, num_workers)
            n = int(config["num_envs_per_worker"])
            vector_kwargs = dict(
                seeds=[env_seed(seed, worker_index, i) for i in range(n)],
                horizon=config.get("horizon"),
                restart_failed=bool(config.get("restart_failed_sub_environments", False)),
                max_restarts_in_row=int(config.get("num_consecutive_env_restarts_tolerance", 10)),
                no_done_at_end=bool(config.get("no_done_at_end", False)),
                soft_horizon=bool(config.get("soft_horizon", False)),
                worker_index=worker_index,
            )
            if config.get("remote_worker_envs"):
                if policy_specs is not None:
                    raise ConfigError("remote_worker_envs=True is not supported for multi-agent envs by rlstack: set "
                                      "it to False and raise num_workers to step more envs in parallel.")
                self.async_env = RemoteVectorEnv(
                    lambda i: self._make_remote_sub_env(env_spec, context.copy_with(vector_index=i, remote=True)), n,
                    **vector_kwargs)
            else:
                self.async_env = make_vector_env(
                    lambda i: self._make_sub_env(env_spec, context.copy_with(vector_index=i)), n,
                    multi_agent=policy_specs is not None, **vector_kwargs)
        # An ExternalEnv runs its own loop: sampled by an ExternalEnvSampler (see sample()).
        self._external_env: ExternalEnv | None = None
        self._external_sampler: Any = None
        if isinstance(self.async_env, ExternalEnv):
            if int(config["num_envs_per_worker"]) > 1:
                raise ConfigError("An ExternalEnv runs its own loop and serves any number of episodes itself: set "
                                  "num_envs_per_worker to 1 (give run() more concurrent episodes instead).")
            self._external_env, self.async_env = self.async_env, None
            spaces = (self._external_env.observation_space, self._external_env.action_space)
        # Classic default: Atari rewards are clipped to their sign under "deepmind" preprocessing.
        self._reward_clip = config.get("clip_rewards")
        if self._reward_clip is None and self.async_env is not None and config.get("preprocessor_pref") == "deepmind":
            sub_envs = self.async_env.get_sub_environments()
            self._reward_clip = True if sub_envs and is_atari(sub_envs[0]) else None
        # Numpy acting is opt-in: the algorithm supplies its framework-free postprocessing.
        numpy_class = resolve_class(numpy_policy_class) if numpy_policy_class is not None else NumpyPolicy
        self._build_args = BuildArgs(policy_class, worker_index, num_gpus, postprocess_fn, numpy_class, learns,
                                     self.async_env is not None)
        self.multi_agent = isinstance(self.async_env, MultiAgentVectorEnv) or isinstance(spaces, dict)
        self.policies: WorkerPolicyMap | None = None
        if self.multi_agent:
            first_env = self.async_env.envs[0] if self.async_env is not None else None
            self.policies = WorkerPolicyMap(policy_specs, spaces, first_env, config, self._build_args,
                                            self._bind_policy)
            self._use_first_policy()
            # The env's spaces (by agent id, or shared), or the first policy's without an env.
            spaces = spaces[next(iter(spaces))] if self.async_env is None else None
        self.observation_space, self.action_space = spaces or (self.async_env.observation_space,
                                                               self.async_env.action_space)
        if not self.multi_agent:
            self._build_policy()
        self._obs: np.ndarray | None = None
        # A recurrent policy's state (and previous actions / rewards) per sub-env.
        self._states: recurrent_states.SubEnvMemory | None = None
        self._init_episodes(self.async_env.num_envs if self.async_env is not None else 0)
        self._pending: dict[int, SampleBatch] = {}
        self._perf = {"env_wait": 0.0, "inference": 0.0, "action_processing": 0.0, "obs_processing": 0.0}
        self._perf_steps = 0
        # NaN/inf checks on what the env returns (skipped for spaces that cannot hold them).
        self._check_obs = not self.multi_agent and _has_float_box(self.observation_space)
        self._env_steps = 0  # steps of every sub-env together, for messages
        self._reported_restarts = 0
        # Episode objects for the episode hooks, only when some are overridden.
        self._tracker = None if self.multi_agent else self._make_tracker()
        self._multi_agent_sampler: Any = None
        if self.multi_agent and self.async_env is not None:
            from rlstack.evaluation.multi_agent_sampler import MultiAgentSampler

            self._multi_agent_sampler = MultiAgentSampler(self)
        # Recorded experience in place of the envs ("input") and out to files ("output").
        self._init_offline_io(config)

    # ----- small remote-callable helpers ------------------------------------------

    def ping(self) -> str:
        """Answers ``"ok"``; used to wait until a worker is up and to probe its health."""
        return "ok"

    def apply(self, func: Any, *args: Any) -> Any:
        """Returns ``func(self, *args)`` (how ``WorkerSet.foreach_worker`` reaches actors)."""
        return func(self, *args)

    def reset(self, config: dict, policy_specs: dict[str, PolicySpec] | None = None) -> None:
        """Starts learning over with ``config`` (changed hyper-parameters only): new
        policies from their initial weights, new observation filters; envs are kept.

        Args:
            config: The new config.
            policy_specs: The multi-agent policies for ``config`` (as for the constructor).
        """
        self.config = config
        if self.async_env is not None:
            self.async_env.restart_failed = bool(config.get("restart_failed_sub_environments", False))
            if hasattr(self.async_env, "max_restarts_in_row"):
                self.async_env.max_restarts_in_row = int(config.get("num_consecutive_env_restarts_tolerance", 10))
        if self.policies is not None:
            self.policies.reset(config, policy_specs)
            self._use_first_policy()
            if self._multi_agent_sampler is not None:
                self._multi_agent_sampler.reset()
        else:
            self._build_policy()
        self._episodes = []
        self._states = None

    def _build_policy(self) -> None:
        # The single-agent policy, its acting copy and its observation filter.
        seed = self.config.get("seed")
        self.policy, self.sampling_policy, self._acting_shares_weights = build_policy(
            self._build_args, self.observation_space, self.action_space, self.config,
            None if seed is None else seed + self.worker_index)
        self._bind_policy(DEFAULT_POLICY_ID, self.policy, self.sampling_policy)
        self.preprocessor = self.policy.preprocessor
        self.filter = make_filter(self.config["observation_filter"], self.preprocessor.shape)

    def _use_first_policy(self) -> None:
        # A multi-agent worker's single-agent attributes are its first policy's.
        pid = next(iter(self.policies.policies))
        self.policy, self.sampling_policy = self.policies.policies[pid], self.policies.acting[pid]
        self.preprocessor, self.filter = self.policy.preprocessor, self.policies.filters[pid]

    def _bind_policy(self, policy_id: str, policy: Policy, acting: Policy) -> None:
        policy.bind_worker(self.worker_index, self.num_workers)
        policy.set_callbacks(self.callbacks, self._hooks)
        if acting is not policy:
            acting.bind_worker(self.worker_index, self.num_workers)
        if "on_create_policy" in self._hooks:
            self.callbacks.on_create_policy(policy_id=policy_id, policy=policy)

    @property
    def policy_config(self) -> dict:
        """The config this worker's policies were built with (classic RLlib's name)."""
        return self.config

    @property
    def num_env_restarts(self) -> int:
        """Sub-env restarts (``restart_failed_sub_environments``) since this worker was built."""
        return self.async_env.num_restarts if self.async_env is not None else 0

    def get_env_restarts(self) -> int:
        """Sub-env restarts since the last call (the trainer's ``num_env_restarts``)."""
        total = self.num_env_restarts
        restarts, self._reported_restarts = total - self._reported_restarts, total
        return restarts

    def get_sampler_perf(self) -> dict[str, float]:
        """Mean milliseconds per env step spent in each part of sampling, since the last call."""
        steps = max(1, self._perf_steps)
        perf = {f"mean_{key}_ms": 1000.0 * value / steps for key, value in self._perf.items()}
        self._perf = dict.fromkeys(self._perf, 0.0)
        self._perf_steps = 0
        return perf

    # ----- acting -------------------------------------------------------------------

    def _process_obs(self, raw: list[Any], update: bool = True) -> np.ndarray:
        return self.filter(self._obs_array(raw, "in its first observation after a reset"), update=update)

    def _obs_array(self, raw: list[Any], when: Any, env_indices: list[int] | None = None) -> np.ndarray:
        """Preprocessed observations, checked for NaN/inf before any filter sees them.

        Args:
            raw: One raw observation per sub-env in ``env_indices`` (None: all, in order).
            when: A string, or ``when(env_index) -> str``, saying at which step they came.
        """
        array = self.preprocessor.transform_batch(raw)
        if self._check_obs and not np.isfinite(array).all():
            self._raise_non_finite("observation", array, when, env_indices)
        return array

    def _raise_non_finite(self, what: str, values: np.ndarray, when: Any, env_indices: list[int] | None) -> None:
        bad_rows = np.flatnonzero(~np.isfinite(values.reshape(len(values), -1)).all(axis=1))
        row = int(bad_rows[0])
        index = row if env_indices is None else env_indices[row]
        value = values[row]
        if values.ndim > 1:
            entries = np.flatnonzero(~np.isfinite(value)).tolist()
            detail = f"{value[entries[0]]} at flat entries {entries[:10]} of the preprocessed observation"
        else:
            detail = str(value)
        if self.async_env is None:  # observations an ExternalEnv / PolicyClient sent
            raise NonFiniteError(f"Non-finite {what} ({detail}) sent to rollout worker {self.worker_index} by an "
                                 "external env: a NaN or inf would corrupt the weights; send finite values.")
        env = self.async_env
        others = f" (and {len(bad_rows) - 1} other sub-envs)" if len(bad_rows) > 1 else ""
        raise NonFiniteError(
            f"Non-finite {what} ({detail}) from sub-env {index}{others} (vector index) of rollout worker "
            f"{self.worker_index} ({env_name(env.get_sub_environments()[index])}), {when(index) if callable(when) else when}, "
            f"after {self._env_steps} env steps on this worker. A NaN or inf from an env is a bug in the env "
            "(a division by zero, an overflow, an unset value) and would corrupt the weights: fix the env or "
            "wrap it to clean or clip its outputs. Sub-env restarts do not apply to this error."
        )

    def clip_rewards(self, rewards: Any) -> Any:
        """``rewards`` as this worker's batches record them: clipped as ``clip_rewards``
        says (True: their sign; a number: to +-that; Atari under "deepmind"
        preprocessing: their sign by default), else unchanged."""
        clip = self._reward_clip
        if clip is True:
            return np.sign(rewards)
        if clip:
            return np.clip(rewards, -clip, clip)
        return rewards

    @property
    def env(self) -> Any:
        """The env the creator built (1.13's ``RolloutWorker.env``): the first sub-env of
        :attr:`async_env`, a gymnasium env (or MultiAgentEnv) to reset and step by hand;
        the ExternalEnv when the worker serves one; None on a driver without envs."""
        if self.async_env is None:
            return getattr(self, "_external_env", None)
        sub_envs = self.async_env.get_sub_environments()
        return sub_envs[0] if sub_envs else None

    def _require_env(self) -> VectorEnv:
        if self.async_env is None:
            raise RuntimeError("This worker was built without envs (the driver's copy when num_workers > 0).")
        return self.async_env

    def sample(self) -> SampleBatch | MultiAgentBatch:
        """The next batch: sampled from the envs (:meth:`sample_from_env`), or, with an
        ``input`` other than ``"sampler"``, read from the recorded experience (then
        postprocessed by the policy if ``postprocess_inputs``, and estimated by the
        ``off_policy_estimation_methods``). With an ``output``, the batch is written
        before it is returned."""
        if self._external_env is not None:
            batch = self._sample_external()
        else:
            batch = self.sample_from_env() if self.input_reader is None else self._read_input()
        if self.output_writer is not None:
            self.output_writer.write(batch)
        return batch

    def _sample_external(self) -> SampleBatch:
        # The ExternalEnv's loop starts with the first sample() and runs in its thread;
        # its calls are answered while this collects rollout_fragment_length rows.
        if self._external_sampler is None:
            from rlstack.evaluation.external_sampler import ExternalEnvSampler

            self._external_sampler = ExternalEnvSampler(self, self._external_env)
            self._external_env.start()
        return self._external_sampler.collect(int(self.config["rollout_fragment_length"]))

    def sample_from_env(self) -> SampleBatch | MultiAgentBatch:
        """Collects and postprocesses at least ``rollout_fragment_length * num_envs`` steps
        (a multi-agent worker's: a MultiAgentBatch, see MultiAgentSampler).

        With ``batch_mode="truncate_episodes"`` every sub-env contributes exactly
        ``rollout_fragment_length`` steps; the cut piece bootstraps from V(next obs).
        With ``"complete_episodes"`` only whole episodes are returned; unfinished ones
        carry over to the next call.

        A sub-env restarted after its ``step`` raised (``restart_failed_sub_environments``)
        contributes no row of its broken episode: with ``"complete_episodes"`` that
        episode is dropped; with ``"truncate_episodes"`` the sub-env's whole fragment is,
        so that every sub-env's rows stay ``rollout_fragment_length`` contiguous steps
        (IMPALA's time-major V-trace needs that) and no piece joins a half episode to the
        next. Rows of the broken episode returned by earlier calls (cut pieces, which
        bootstrap from V) stay valid and are not taken back. A fragment that yields no
        row at all is followed by another, so a batch is never empty.

        Raises:
            EnvFailureError: A sub-env raised (and restarts are off or gave up).
            NonFiniteError: An observation or reward is NaN or inf.
        """
        if self._multi_agent_sampler is not None:
            return self._multi_agent_sampler.sample()
        env = self._require_env()
        target = int(self.config["rollout_fragment_length"]) * env.num_envs
        complete = self.config["batch_mode"] == "complete_episodes"
        pieces: list[SampleBatch] = []
        collected = 0
        failed_empty = 0  # fragments in a row with failures and no row
        while collected < target:
            collected_before = collected
            failures_before = env.num_restarts
            for env_index, piece, cut in self._run_fragment(complete_episodes=complete):
                if piece is None:
                    # A broken episode (complete_episodes): its earlier rows go too.
                    self._pending.pop(env_index, None)
                    continue
                if complete:
                    if env_index in self._pending:
                        piece = concat_samples([self._pending.pop(env_index), piece])
                    if cut:
                        if piece.count > _MAX_PENDING_STEPS:
                            raise EnvError(
                                f"batch_mode='complete_episodes' but an episode of sub-env {env_index} on worker "
                                f"{self.worker_index} has run {piece.count} steps without ending. Set 'horizon', "
                                "give the env a time limit, or use batch_mode='truncate_episodes'."
                            )
                        self._pending[env_index] = piece
                        continue
                pieces.append(self._postprocess(piece))
                collected += piece.count
            if self._tracker is not None:
                self._tracker.prune()
            if collected == collected_before and env.num_restarts > failures_before:
                failed_empty += 1
                if failed_empty >= int(self.config.get("num_consecutive_failed_fragments_tolerance",
                                                       _MAX_FAILED_EMPTY_FRAGMENTS)):
                    raise EnvFailureError(
                        f"Sub-envs of rollout worker {self.worker_index} failed in each of the last {failed_empty} "
                        "fragments and restart_failed_sub_environments dropped every row of them: the envs fail "
                        "faster than they run (num_consecutive_failed_fragments_tolerance). Fix the env (see the "
                        "warnings logged for each restart)."
                    )
            else:
                failed_empty = 0
            if not complete and collected > 0:
                break
        batch = concat_samples(pieces)
        if "on_sample_end" in self._hooks:
            self.callbacks.on_sample_end(worker=self, samples=batch)
        return batch

    def sample_with_count(self) -> tuple[SampleBatch | MultiAgentBatch, tuple[int, int]]:
        """:meth:`sample` and its ``(env steps, agent steps)``, as two results: asynchronous
        trainers call it with ``num_returns=2`` and read the small counts without
        fetching the batch."""
        batch = self.sample()
        return batch, (batch.env_steps(), batch.agent_steps())

    def sample_and_compute_gradients(self, weights: dict[str, Any] | None = None,
                                     global_timestep: int | None = None) -> tuple[Any, dict[str, Any], int, int]:
        """Samples a batch and returns the policy's gradients on it, its learner
        statistics, and the batch's env and agent steps (A3C: workers learn, the driver
        applies). Multi-agent: gradients and statistics by policy id, for each policy of
        ``policies_to_train`` with rows. ``weights`` (and ``global_timestep``), if given,
        are loaded first (:meth:`set_weights`): the driver's new weights and the next
        request travel in one call."""
        if weights is not None:
            self.set_weights(weights, global_timestep)
        batch = self.sample()
        if isinstance(batch, SampleBatch):
            grads, stats = self.policy.compute_gradients(batch)  # type: ignore[attr-defined]
            return grads, stats, batch.count, batch.count
        grads, stats = {}, {}
        for pid, rows in batch.policy_batches.items():
            if rows.count and self.policies.is_trained(pid, rows):
                grads[pid], stats[pid] = self.policies.policies[pid].compute_gradients(rows)
        return grads, stats, batch.env_steps(), batch.agent_steps()

    def _run_fragment(self, complete_episodes: bool) -> list[tuple[int, SampleBatch | None, bool]]:
        """Steps every sub-env ``rollout_fragment_length`` times.

        Returns:
            ``(env_index, piece, cut)`` for each trajectory piece; ``cut`` marks a piece
            that ends at the fragment boundary rather than at an episode end. A piece of
            None marks an episode that broke off when its sub-env's ``step`` raised
            (only with ``complete_episodes``; otherwise such a sub-env returns no piece).
        """
        env = self.async_env
        T, N = int(self.config["rollout_fragment_length"]), env.num_envs
        policy = self.sampling_policy
        perf = self._perf
        tracker = self._tracker
        if self._obs is None:
            raw_first = env.reset()
            self._obs = self._process_obs(raw_first)
            if tracker is not None:
                tracker.start_all(self._eps_ids, raw_first, self._obs)
        obs = self._obs
        buf: dict[str, np.ndarray] = {
            _B.OBS: np.empty((T, N, obs.shape[1]), dtype=np.float32),
            _B.REWARDS: np.empty((T, N), dtype=np.float32),
            _B.TERMINATEDS: np.zeros((T, N), dtype=bool),
            _B.TRUNCATEDS: np.zeros((T, N), dtype=bool),
            _B.EPS_ID: np.empty((T, N), dtype=np.int64),
            _B.BOOTSTRAP_VALUE: np.zeros((T, N), dtype=np.float32),
        }
        # broken[t, i]: sub-env i's step t raised; that row and its episode's earlier
        # rows are dropped (allocated at the first failure).
        broken: np.ndarray | None = None
        lengths = self._lengths
        # Q-learning stores each step's next observation; policy gradients bootstrap
        # cut pieces from V(s) instead.
        record_next_obs = policy.needs_next_obs or self.output_writer is not None
        bootstrap = policy.needs_bootstrap_value
        if record_next_obs:
            buf[_B.NEXT_OBS] = np.empty_like(buf[_B.OBS])
        # A recurrent policy acts from each sub-env's state (reset at its episodes' starts)
        # and, if its model reads them, the previous actions and rewards (zeros at the
        # starts); rows record what they acted from (state_in_<i>, prev_actions,
        # prev_rewards) and the state they returned (state_out_<i>, from the extras).
        if self._states is None:
            self._states = recurrent_states.initial_states(policy, N)
        states = self._states
        if tracker is not None:
            def rows_of(i: int) -> SampleBatch:
                # Sub-env i's running episode in this fragment, up to step t (next_obs,
                # written after the hooks, left out).
                start = max(0, t + 1 - int(lengths[i]))
                return SampleBatch({key: value[start:t + 1, i] for key, value in buf.items() if key != _B.NEXT_OBS})

            tracker.rows_of = rows_of
        for t in range(T):
            t0 = time.perf_counter()
            if states is None:
                actions, extras = policy.compute_actions(obs)
            else:
                for key, value in states.columns().items():
                    buf.setdefault(key, np.empty((T, *value.shape), value.dtype))[t] = value
                actions, extras = recurrent_states.act(policy, obs, states)
            t1 = time.perf_counter()
            env_actions = policy.unsquash_actions(actions)
            t2 = time.perf_counter()
            raw_obs, rewards, terminateds, truncateds, final_obs, infos = env.step(env_actions)
            t3 = time.perf_counter()
            self._env_steps += N
            failed = env.broken
            # NaN/inf out of the env stop sampling here, before a filter or a batch sees them.
            if not np.isfinite(rewards).all():
                self._raise_non_finite("reward", rewards, lambda i: f"at step {lengths[i] + 1} of its episode", None)
            next_obs = self._obs_array(raw_obs, lambda i: (
                "in its first observation after a reset" if i in final_obs or i in failed
                else f"at step {lengths[i] + 1} of its episode"))
            if final_obs:
                done_envs = list(final_obs)
                # The observations that ended episodes, where they are used: Q-learning
                # stores them as next_obs, truncated episodes bootstrap from them.
                if record_next_obs:
                    last_envs = done_envs
                else:
                    last_envs = [i for i in done_envs if truncateds[i]] if bootstrap else []
                if last_envs:
                    last_obs = self._obs_array([final_obs[i] for i in last_envs], lambda i: (
                        f"in the last observation of its episode (step {lengths[i] + 1})"), last_envs)
            if t == 0:
                buf[_B.ACTIONS] = np.empty((T, *actions.shape), dtype=actions.dtype)
                for key, value in extras.items():
                    buf[key] = np.empty((T, *value.shape), dtype=value.dtype)
            buf[_B.OBS][t] = obs
            buf[_B.ACTIONS][t] = actions
            for key, value in extras.items():
                buf[key][t] = value
            buf[_B.REWARDS][t] = self.clip_rewards(rewards)
            if states is not None:
                recurrent_states.after_step(states, actions, buf[_B.REWARDS][t])
            buf[_B.TERMINATEDS][t] = terminateds
            buf[_B.TRUNCATEDS][t] = truncateds
            buf[_B.EPS_ID][t] = self._eps_ids
            self._returns += rewards
            lengths += 1
            if final_obs:
                truncated_rows = [k for k, i in enumerate(last_envs) if truncateds[i]] if bootstrap else []
                if truncated_rows:
                    # A time limit is not the end of the MDP: bootstrap from V(final obs).
                    last = self.filter(last_obs[truncated_rows], update=False)
                    rows = [last_envs[k] for k in truncated_rows]
                    buf[_B.BOOTSTRAP_VALUE][t, rows] = recurrent_states.values(policy, last, states, rows)
                if tracker is None:
                    for i in done_envs:
                        self._episodes.append(EpisodeStats(float(self._returns[i]), int(lengths[i])))
                        self._start_episode(i)
            if states is not None and (final_obs or failed):
                recurrent_states.reset(policy, states, [*final_obs, *failed])
            if failed:
                if broken is None:
                    broken = np.zeros((T, N), dtype=bool)
                for i in failed:
                    # The episode broke off: no metrics for it, and a new id for the next.
                    broken[t, i] = True
                    self._start_episode(i)
            obs = self.filter(next_obs, update=True)
            if tracker is not None:
                tracker.after_step(actions, rewards, raw_obs, obs, infos, final_obs, failed, self._finish_episode)
            if record_next_obs:
                buf[_B.NEXT_OBS][t] = obs
                if final_obs:
                    # obs holds the reset observation of a finished sub-env; the step
                    # led to its final observation.
                    buf[_B.NEXT_OBS][t, done_envs] = self.filter(last_obs, update=False)
            t4 = time.perf_counter()
            perf["inference"] += t1 - t0
            perf["action_processing"] += t2 - t1
            perf["env_wait"] += t3 - t2
            perf["obs_processing"] += t4 - t3
        self._perf_steps += T * N
        self._obs = obs
        if tracker is not None:
            tracker.rows_of = None
        done = buf[_B.TERMINATEDS] | buf[_B.TRUNCATEDS]
        # truncate_episodes: a sub-env that failed in this fragment gives no rows at all.
        dropped = broken.any(axis=0) if broken is not None and not complete_episodes else np.zeros(N, dtype=bool)
        if not complete_episodes and bootstrap:
            open_envs = np.flatnonzero(~done[-1] & ~dropped)
            if len(open_envs):
                buf[_B.BOOTSTRAP_VALUE][-1, open_envs] = recurrent_states.values(policy, obs[open_envs], states,
                                                                                 open_envs)
        pieces: list[tuple[int, SampleBatch | None, bool]] = []
        for i in range(N):
            if dropped[i]:
                continue
            ends_at = done[:, i] if broken is None else done[:, i] | broken[:, i]
            start = 0
            for end in np.flatnonzero(ends_at).tolist():
                if broken is not None and broken[end, i]:
                    pieces.append((i, None, False))
                else:
                    pieces.append((i, self._piece(buf, i, start, end + 1), False))
                start = end + 1
            if start < T:
                pieces.append((i, self._piece(buf, i, start, T), True))
        return pieces

    @staticmethod
    def _piece(buf: dict[str, np.ndarray], env_index: int, start: int, end: int) -> SampleBatch:
        return SampleBatch({key: value[start:end, env_index] for key, value in buf.items()})

    def run_episodes(self, num_episodes: int | None = None, num_steps: int | None = None) -> list[EpisodeStats]:
        """Plays whole episodes without recording a batch (for evaluation); see
        :func:`rlstack.evaluation.evaluation_episodes.run_episodes`."""
        if self._multi_agent_sampler is not None:
            return self._multi_agent_sampler.run_episodes(num_episodes, num_steps)
        if self._external_env is not None:
            raise EnvError("Evaluation workers play episodes of envs they step; an ExternalEnv runs its own loop. "
                           "Evaluate with a steppable env: evaluation_config={'env': ...}.")
        return run_episodes(self, num_episodes, num_steps)

    # ----- policies and sub-envs (RLlib 1.13's accessors), weights and filters ---------

    @property
    def policy_map(self) -> dict[str, Policy]:
        """``{policy_id: policy}``: ``{"default_policy": policy}`` for a single-agent
        worker, every policy of ``multiagent.policies`` for a multi-agent one.

        On a remote worker acting in numpy (``rollout_inference="auto"`` with a built-in
        dense model, or ``"numpy"``) a policy of the algorithm's class is that worker's
        :class:`~rlstack.policies.numpy_policy.NumpyPolicy`: it acts and holds the
        learner's weights, but does not learn. The driver's worker holds the learners.
        """
        if self.policies is not None:
            return self.policies.policies
        return {DEFAULT_POLICY_ID: self.policy}

    def get_policy(self, policy_id: str = DEFAULT_POLICY_ID) -> Policy:
        """The policy ``policy_id`` of this worker (see :attr:`policy_map`).

        Raises:
            KeyError: For an unknown policy id, naming the known ones.
        """
        policy_map = self.policy_map
        if policy_id not in policy_map:
            raise KeyError(f"Unknown policy id {policy_id!r}; this worker has {sorted(map(str, policy_map))} "
                           "(configure several with multiagent.policies).")
        return policy_map[policy_id]

    @classmethod
    def as_remote(cls, num_cpus: float | None = None, num_gpus: float | None = None, memory: int | None = None,
                  resources: dict[str, float] | None = None) -> Any:
        """This class as a Ray actor class (1.13's ``RolloutWorker.as_remote()``), with the
        resources each actor asks for."""
        import ray

        options = {key: value for key, value in {"num_cpus": num_cpus, "num_gpus": num_gpus, "memory": memory,
                                                 "resources": resources}.items() if value is not None}
        return ray.remote(**options)(cls) if options else ray.remote(cls)

    def for_policy(self, func: Callable[..., Any], policy_id: str = DEFAULT_POLICY_ID, **kwargs: Any) -> Any:
        """``func(policy, **kwargs)`` for the policy ``policy_id`` (1.13's call)."""
        return func(self.get_policy(policy_id), **kwargs)

    def foreach_policy(self, func: Callable[..., Any], **kwargs: Any) -> list[Any]:
        """``[func(policy, policy_id, **kwargs)]`` for every policy of this worker."""
        return [func(policy, policy_id, **kwargs) for policy_id, policy in self.policy_map.items()]

    def foreach_trainable_policy(self, func: Callable[..., Any], **kwargs: Any) -> list[Any]:
        """Like :meth:`foreach_policy` for the policies being trained
        (``multiagent.policies_to_train``; a function of it is asked with no batch)."""
        return [func(policy, policy_id, **kwargs) for policy_id, policy in self.policy_map.items()
                if self.policies is None or self.policies.is_trained(policy_id)]

    # ----- policies added and removed at run time (Trainer.add_policy / remove_policy) -------

    def add_policy(self, policy_id: str, spec: PolicySpec, policy_mapping_fn: Any = None,
                   policies_to_train: Any = None, policy_state: dict[str, Any] | None = None,
                   ) -> tuple[gym.Space, gym.Space]:
        """Builds policy ``policy_id`` on this multi-agent worker (1.13's
        ``RolloutWorker.add_policy``); missing spaces come from its env.

        Args:
            policy_id: The new id.
            spec: Its class, spaces and complete config.
            policy_mapping_fn: The mapping for new episodes from now on (None: unchanged).
            policies_to_train: The new ``policies_to_train`` (None: unchanged).
            policy_state: A :meth:`Policy.get_state` to load into it.

        Returns:
            The new policy's ``(observation_space, action_space)``.

        Raises:
            ConfigError: On a single-agent worker, or for a taken id.
        """
        if self.policies is None:
            from rlstack.errors import ConfigError

            raise ConfigError(f"Cannot add policy {policy_id!r} to a single-agent trainer: add_policy needs a "
                              "multi-agent one (set multiagent.policies, or use a MultiAgentEnv).")
        env = self.async_env.envs[0] if self.async_env is not None else None
        policy = self.policies.add(policy_id, spec, policy_mapping_fn, policies_to_train, env)
        if policy_state is not None:
            policy.set_state(policy_state)
            self.policies.refresh({policy_id: policy.get_weights()})
        return self.policies.spaces()[policy_id]

    def remove_policy(self, policy_id: str, policy_mapping_fn: Any = None, policies_to_train: Any = None) -> None:
        """Drops policy ``policy_id`` from this worker (1.13's ``RolloutWorker.remove_policy``).
        Running episodes with an agent mapped to it end unreported; their envs reset at
        the next sample."""
        if self.policies is None:
            raise KeyError(f"Unknown policy id {policy_id!r}: this worker is single-agent (its one policy is "
                           f"{DEFAULT_POLICY_ID!r}, which cannot be removed).")
        self.policies.remove(policy_id, policy_mapping_fn, policies_to_train)
        self._use_first_policy()  # the worker's single-agent attributes may have named it
        if self._multi_agent_sampler is not None:
            self._multi_agent_sampler.drop_episodes_of(policy_id)

    # ----- spaces, weights and filters, as the WorkerSet moves them ------------------------

    def get_spaces(self) -> Any:
        """The env's observation and action spaces; a multi-agent worker's
        ``{policy_id: (obs_space, action_space)}``."""
        if self.policies is not None:
            return self.policies.spaces()
        return self.observation_space, self.action_space

    def get_weights(self, policies: Any = None) -> dict[str, Any]:
        """The policy's weights; a multi-agent worker's ``{policy_id: weights}`` of
        ``policies`` (None: all)."""
        if self.policies is not None:
            return self.policies.get_weights(policies)
        return self.policy.get_weights()

    def set_weights(self, weights: dict[str, Any], global_timestep: int | None = None) -> None:
        """Loads the learner's weights (a multi-agent worker's ``{policy_id: weights}``, of
        some policies or all; a single policy's also as 1.13's ``{"default_policy": weights}``)
        and moves schedules to ``global_timestep``."""
        if self.policies is not None:
            self.policies.set_weights(weights, global_timestep)
            return
        if len(weights) == 1 and isinstance(weights.get(DEFAULT_POLICY_ID), dict):
            weights = weights[DEFAULT_POLICY_ID]  # 1.13 keyed a single policy's weights too
        self.policy.set_weights(weights)
        if global_timestep is not None:
            self.policy.on_global_var_update(global_timestep)
        self.refresh_sampling_policy(weights)

    def refresh_sampling_policy(self, weights: dict[str, Any] | None = None) -> None:
        """Copies the policy's weights (or ``weights``, when the caller has them already)
        into the separate acting copy, if there is one and it does not read them in place."""
        if self.policies is not None:
            self.policies.refresh(weights)
        else:
            refresh_acting(self.policy, self.sampling_policy, self._acting_shares_weights, weights)

    def get_filter_state(self) -> dict[str, Any]:
        """The observation filter's statistics (multi-agent: by policy id)."""
        return self.policies.get_filter_state() if self.policies is not None else self.filter.get_state()

    def set_filter_state(self, state: dict[str, Any]) -> None:
        """Replaces the observation filter's statistics (after a sync)."""
        if self.policies is not None:
            self.policies.set_filter_state(state)
        else:
            self.filter.set_state(state)

    def flush_filter(self) -> dict[str, Any]:
        """Returns what the filter saw since the last sync, and clears that buffer."""
        return self.policies.flush_filters() if self.policies is not None else self.filter.flush_buffer()

    def apply_filter_buffer(self, buffer: dict[str, Any]) -> None:
        """Merges another worker's :meth:`flush_filter` into this worker's filter(s)."""
        if self.policies is not None:
            self.policies.apply_filter_buffers(buffer)
        else:
            self.filter.apply_buffer(buffer)

    def uses_filters(self) -> bool:
        """Whether observations are filtered (some policy's ``observation_filter``)."""
        if self.policies is not None:
            return self.policies.uses_filters()
        return self.config["observation_filter"] != "NoFilter"

    def filter_for(self, policy: Policy) -> Any:
        """The observation filter of ``policy`` (one of :attr:`policy_map`)."""
        if self.policies is None:
            return self.filter
        return next(self.policies.filters[pid] for pid, p in self.policies.policies.items() if p is policy)

    def foreach_env(self, func: Callable[[Any], Any]) -> list[Any]:
        """``[func(sub_env)]`` for each of this worker's sub-envs, in vector-index order
        (``[]`` for a worker without envs, such as the driver's when ``num_workers > 0``).

        The sub-envs are the objects the env creator returned (e.g. for the curriculum
        pattern ``worker.foreach_env(lambda env: env.set_task(task))``); a sub-env that
        ``restart_failed_sub_environments`` rebuilds is a new object.
        """
        if self.async_env is None:
            return []
        return [func(env) for env in self.async_env.get_sub_environments()]

    def foreach_env_with_context(self, func: Callable[[Any, EnvContext], Any]) -> list[Any]:
        """``[func(sub_env, env_context)]`` for each sub-env, the context carrying
        ``env_config`` and this sub-env's ``worker_index`` / ``vector_index``."""
        if self.async_env is None:
            return []
        context = EnvContext(self.config.get("env_config"), self.worker_index, 0, self.num_workers)
        return [func(env, context.copy_with(vector_index=i))
                for i, env in enumerate(self.async_env.get_sub_environments())]

    # ----- episodes and the callbacks around them -----------------------------------

    def _init_callbacks(self, config: dict) -> None:
        self.callbacks: DefaultCallbacks = make_callbacks(config.get("callbacks", DefaultCallbacks))
        # Only the hooks the callbacks override are called; with none, sampling pays one
        # boolean check per step.
        self._hooks = overridden_hooks(self.callbacks)

    def _init_episodes(self, num_envs: int) -> None:
        # Each sub-env's running episode: return, length and id (ids are unique across
        # workers: worker_index * 10**9 onwards), and the episodes finished since the
        # last get_metrics().
        self._returns = np.zeros(num_envs, dtype=np.float64)
        self._lengths = np.zeros(num_envs, dtype=np.int64)
        self._eps_ids = self.worker_index * 10**9 + np.arange(num_envs, dtype=np.int64)
        self._next_eps_id = self.worker_index * 10**9 + num_envs
        self._episodes: list[EpisodeStats] = []

    def _make_sub_env(self, env_spec: Any, context: EnvContext) -> gym.Env:
        env = make_env(env_spec, context, self.config.get("preprocessor_pref"), self.config.get("model"))
        record = self.config.get("record_env")
        # 1.x rendered one sub-env: the first of the local worker, or of worker 1 when
        # there are remote workers.
        render = bool(self.config.get("render_env")) and context.vector_index == 0 and \
            self.worker_index == min(1, self.num_workers)
        if (record or render) and isinstance(env, gym.Env):
            folder = None
            if record:
                # The trainer made a relative folder absolute (under its logdir).
                folder = record if isinstance(record, str) else os.path.join(os.getcwd(), "videos")
            env = RenderAndRecord(env, render=render, folder=folder,
                                  prefix=f"worker-{self.worker_index}-env-{context.vector_index}")
        if "on_sub_environment_created" in self._hooks:
            self.callbacks.on_sub_environment_created(worker=self, sub_environment=env, env_context=context)
        return env

    def _make_remote_sub_env(self, env_spec: Any, context: EnvContext) -> ActorEnv:
        # An env class is served by an actor of that class (its own methods stay callable
        # on the handle); any other spec is built by make_env inside a holder actor.
        build = functools.partial(make_env, env_spec, context, self.config.get("preprocessor_pref"),
                                  self.config.get("model"))
        actor = make_env_actor(env_spec if is_plain_env_class(env_spec) else None, build, context)
        env = ActorEnv(actor)
        if "on_sub_environment_created" in self._hooks:
            self.callbacks.on_sub_environment_created(worker=self, sub_environment=actor, env_context=context)
        return env

    def _make_tracker(self) -> EpisodeTracker | None:
        if self.async_env is None or not self._hooks & EPISODE_HOOKS:
            return None
        return EpisodeTracker(self, self.callbacks, self._hooks, self.async_env.num_envs,
                              zero_action(self.action_space))

    def get_metrics(self) -> list[EpisodeStats]:
        """Episodes finished since the last call."""
        episodes, self._episodes = self._episodes, []
        reader = getattr(self, "input_reader", None)
        if reader is not None and hasattr(reader, "get_metrics"):
            episodes.extend(reader.get_metrics())  # episodes a PolicyServerInput's clients played
        sampler = getattr(self, "_external_sampler", None)
        if sampler is not None:
            episodes.extend(sampler.drain_metrics())  # an ExternalEnv's
        return episodes

    def _postprocess(self, piece: SampleBatch) -> SampleBatch:
        if "on_postprocess_trajectory" not in self._hooks:
            return self.sampling_policy.postprocess_trajectory(piece)
        original = SampleBatch(dict(piece))  # postprocessing may add columns in place
        batch = self.sampling_policy.postprocess_trajectory(piece)
        self.callbacks.on_postprocess_trajectory(
            worker=self, episode=self._tracker.by_id[int(piece[SampleBatch.EPS_ID][0])], agent_id=DEFAULT_AGENT_ID,
            policy_id=DEFAULT_POLICY_ID, policies={DEFAULT_POLICY_ID: self.policy}, postprocessed_batch=batch,
            original_batches={DEFAULT_AGENT_ID: (self.policy, original)})
        return batch

    def _finish_episode(self, index: int, episode: Any) -> int:
        # With episode hooks: records sub-env ``index``'s ended episode (after its end hook,
        # so its custom metrics go along; None: a broken one, already restarted) and
        # returns the id of its next episode.
        if episode is not None:
            self._episodes.append(EpisodeStats(float(self._returns[index]), int(self._lengths[index]),
                                               episode.custom_metrics, episode.hist_data))
            self._start_episode(index)
        return int(self._eps_ids[index])

    def final_obs_view(self, raw: list[Any], env_indices: list[int]) -> np.ndarray:
        """The last observations of ended episodes as the policy would see them
        (preprocessed and filtered, the filter not updated), for the episode hooks."""
        return self.filter(self._obs_array(raw, "in the last observation of its episode", env_indices),
                           update=False)

    def _start_episode(self, index: int) -> None:
        # Sub-env ``index`` starts a new episode: fresh return, length and id.
        self._returns[index] = 0.0
        self._lengths[index] = 0
        self._eps_ids[index] = self._next_eps_id
        self._next_eps_id += 1

    # ----- recorded experience: input, output, off-policy estimates -----------------

    def _init_offline_io(self, config: dict) -> None:
        # Only workers that sample hold a reader or writer: those with envs, and, in a
        # trainer without an env (env None, its spaces in the config), the remote workers
        # or the driver's when there are none.
        self.input_reader: Any = None
        self.output_writer: Any = None
        self._estimators: list[Any] = []
        if config.get("input", "sampler") == "sampler" and config.get("output") is None:
            return
        samples = self.async_env is not None or getattr(self, "_external_env", None) is not None
        if not samples and (config.get("env") is not None or (self.worker_index == 0 and self.num_workers > 0)):
            return
        from rlstack.offline.io_context import IOContext
        from rlstack.offline.resolve import make_estimators, make_input_reader, make_output_writer

        ioctx = IOContext(config.get("output") if isinstance(config.get("output"), str) else None, config,
                          self.worker_index, self)
        self.input_reader = make_input_reader(config, ioctx)
        self.output_writer = make_output_writer(config, ioctx)
        if self.input_reader is not None:
            self._estimators = make_estimators(config, self.policy)

    def _read_input(self) -> SampleBatch | MultiAgentBatch:
        """The reader's next batch, postprocessed if ``postprocess_inputs``, estimated."""
        batch = self.input_reader.next()
        if self.config.get("postprocess_inputs"):
            batch = self._postprocess_recorded(batch)
        for estimator in self._estimators:
            estimator.process(batch)
        return batch

    def _postprocess_recorded(self, batch: SampleBatch | MultiAgentBatch) -> SampleBatch | MultiAgentBatch:
        # Each episode's rows through its policy's trajectory postprocessing.
        if isinstance(batch, MultiAgentBatch):
            return MultiAgentBatch({pid: _postprocess_episodes(rows, self.policies.acting[pid])
                                    for pid, rows in batch.policy_batches.items()}, batch.count)
        return _postprocess_episodes(batch, self.sampling_policy)

    def get_off_policy_estimates(self) -> list[Any]:
        """The off-policy estimates (``OffPolicyEstimate``) since the last call."""
        return [estimate for estimator in self._estimators for estimate in estimator.get_metrics()]

    def _close_offline_io(self) -> None:
        if self.output_writer is not None:
            self.output_writer.close()
        if self.input_reader is not None and hasattr(self.input_reader, "close"):
            self.input_reader.close()

    def stop(self) -> None:
        """Closes the envs, the input reader and the output file."""
        self._close_offline_io()
        if self._external_sampler is not None:
            self._external_sampler.stopped.set()
        if self.async_env is not None:
            self.async_env.close()


def _postprocess_episodes(batch: SampleBatch, policy: Policy) -> SampleBatch:
    if SampleBatch.EPS_ID not in batch:
        return policy.postprocess_trajectory(batch)
    return concat_samples([policy.postprocess_trajectory(piece) for piece in batch.split_by_episode()])
