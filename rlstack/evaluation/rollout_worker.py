"""RolloutWorker: steps a vector env with a policy and returns postprocessed batches.

A worker runs as a Ray actor (``worker_index`` 1..N) or in the driver (index 0: the
learner's copy, which samples only when ``num_workers=0``). Per step it makes one
forward pass for all ``num_envs_per_worker`` sub-envs. Steps are written into
preallocated ``[rollout_fragment_length, num_envs]`` arrays and cut into trajectory
pieces (one episode of one sub-env each) only at the end of a fragment, where each piece
goes through ``Policy.postprocess_trajectory``.
"""

from __future__ import annotations

import importlib
import time
from typing import Any

import gymnasium as gym
import numpy as np

from rlstack.env.env_context import EnvContext
from rlstack.env.atari import is_atari
from rlstack.env.registry import make_env, restore_registry
from rlstack.env.vector_env import VectorEnv
from rlstack.errors import EnvError
from rlstack.evaluation.metrics import EpisodeStats
from rlstack.models.catalog import ModelCatalog
from rlstack.policies.numpy_policy import NumpyPolicy, PostprocessFn, numpy_inference_applies
from rlstack.policies.policy import Policy
from rlstack.sample_batch import SampleBatch, concat_samples
from rlstack.utils.filters import make_filter
from rlstack.utils.seeding import env_seed, seed_everything

_B = SampleBatch

# An episode longer than this in complete_episodes mode is taken as one that never ends.
_MAX_PENDING_STEPS = 1_000_000


def _resolve(policy_class: type[Policy] | str) -> type[Policy]:
    if isinstance(policy_class, str):
        module_name, class_name = policy_class.split(":")
        return getattr(importlib.import_module(module_name), class_name)
    return policy_class


def class_path(cls: type) -> str:
    """``"module:Class"`` for a class, so it can travel without importing its module."""
    return f"{cls.__module__}:{cls.__qualname__}"


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
        model_registry: Custom models registered in the driver process.
        spaces: ``(observation_space, action_space)`` for a worker built without envs.
        num_gpus: GPUs for this worker's policy.
        postprocess_fn: The algorithm's framework-free postprocessing, for workers that
            act with a :class:`NumpyPolicy`.
        numpy_policy_class: The algorithm's numpy acting policy (or its import path);
            None: :class:`NumpyPolicy`.
    """

    def __init__(
        self,
        env_spec: Any,
        policy_class: type[Policy] | str,
        config: dict,
        worker_index: int = 0,
        num_workers: int = 0,
        env_registry: dict | None = None,
        model_registry: dict | None = None,
        spaces: tuple[gym.Space, gym.Space] | None = None,
        num_gpus: float = 0,
        postprocess_fn: PostprocessFn | None = None,
        numpy_policy_class: type[Policy] | str | None = None,
    ) -> None:
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
        self.env: VectorEnv | None = None
        if spaces is None:
            context = EnvContext(config.get("env_config"), worker_index, 0, num_workers)
            n = int(config["num_envs_per_worker"])
            self.env = VectorEnv(
                lambda i: make_env(env_spec, context.copy_with(vector_index=i), config.get("preprocessor_pref"),
                                   config.get("model")),
                n,
                seeds=[env_seed(seed, worker_index, i) for i in range(n)],
                horizon=config.get("horizon"),
            )
            spaces = (self.env.observation_space, self.env.action_space)
        self.observation_space, self.action_space = spaces
        # Classic default: Atari rewards are clipped to their sign under "deepmind" preprocessing.
        self._reward_clip = config.get("clip_rewards")
        if self._reward_clip is None and self.env is not None and config.get("preprocessor_pref") == "deepmind":
            self._reward_clip = True if is_atari(self.env.envs[0]) else None
        sampling_seed = None if seed is None else seed + worker_index
        # Numpy acting is opt-in: the algorithm supplies its framework-free postprocessing.
        numpy_acting = postprocess_fn is not None and numpy_inference_applies(
            self.observation_space, self.action_space, config, num_gpus)
        numpy_class = _resolve(numpy_policy_class) if numpy_policy_class is not None else NumpyPolicy
        if worker_index > 0 and numpy_acting:
            # A remote worker that acts in numpy never imports torch or TensorFlow.
            self.policy: Policy = numpy_class(self.observation_space, self.action_space, config,
                                              sampling_seed=sampling_seed, postprocess_fn=postprocess_fn)
        else:
            policy_class = _resolve(policy_class)
            if worker_index > 0:
                # Rollout workers share the machine's cores with each other and the learner.
                policy_class.pin_threads(1)
            self.policy = policy_class(self.observation_space, self.action_space, config, num_gpus=num_gpus,
                                       sampling_seed=sampling_seed)
        # The policy that acts while sampling: the driver's worker keeps the framework
        # policy for learning but can act through a numpy copy of it.
        self.sampling_policy: Policy = self.policy
        if worker_index == 0 and numpy_acting and self.env is not None and getattr(self.policy, "builtin_model", False):
            self.sampling_policy = numpy_class(self.observation_space, self.action_space, config,
                                               sampling_seed=sampling_seed, postprocess_fn=postprocess_fn)
            self.sampling_policy.set_weights(self.policy.get_weights())
        self._bind_policies()
        self.preprocessor = self.policy.preprocessor
        self.filter = make_filter(config["observation_filter"], self.preprocessor.shape)
        self._obs: np.ndarray | None = None
        num_envs = self.env.num_envs if self.env is not None else 0
        self._returns = np.zeros(num_envs, dtype=np.float64)
        self._lengths = np.zeros(num_envs, dtype=np.int64)
        self._eps_ids = worker_index * 10**9 + np.arange(num_envs, dtype=np.int64)
        self._next_eps_id = worker_index * 10**9 + num_envs
        self._episodes: list[EpisodeStats] = []
        self._pending: dict[int, SampleBatch] = {}
        self._perf = {"env_wait": 0.0, "inference": 0.0, "action_processing": 0.0, "obs_processing": 0.0}
        self._perf_steps = 0

    # ----- small remote-callable helpers ------------------------------------------

    def ping(self) -> str:
        """Answers ``"ok"``; used to wait until a worker is up and to probe its health."""
        return "ok"

    def apply(self, func: Any, *args: Any) -> Any:
        """Returns ``func(self, *args)`` (how ``WorkerSet.foreach_worker`` reaches actors)."""
        return func(self, *args)

    def reset(self, config: dict) -> None:
        """Starts learning over with ``config`` (changed hyper-parameters only): a new
        policy from its initial weights, a new observation filter; envs are kept."""
        self.config = config
        sampling_seed = None if config.get("seed") is None else config["seed"] + self.worker_index
        kwargs = {"postprocess_fn": self.policy.postprocess_fn} if isinstance(self.policy, NumpyPolicy) else {}
        self.policy = type(self.policy)(self.observation_space, self.action_space, config,
                                        num_gpus=self.policy.num_gpus, sampling_seed=sampling_seed, **kwargs)
        if isinstance(self.sampling_policy, NumpyPolicy) and self.sampling_policy is not self.policy:
            self.sampling_policy = type(self.sampling_policy)(self.observation_space, self.action_space, config,
                                                              sampling_seed=sampling_seed,
                                                              postprocess_fn=self.sampling_policy.postprocess_fn)
            self.sampling_policy.set_weights(self.policy.get_weights())
        else:
            self.sampling_policy = self.policy
        self._bind_policies()
        self.filter = make_filter(config["observation_filter"], self.preprocessor.shape)
        self._episodes = []

    def _bind_policies(self) -> None:
        self.policy.bind_worker(self.worker_index, self.num_workers)
        if self.sampling_policy is not self.policy:
            self.sampling_policy.bind_worker(self.worker_index, self.num_workers)

    def get_spaces(self) -> tuple[gym.Space, gym.Space]:
        """The env's observation and action spaces."""
        return self.observation_space, self.action_space

    def get_weights(self) -> dict[str, np.ndarray]:
        """The policy's weights."""
        return self.policy.get_weights()

    def set_weights(self, weights: dict[str, np.ndarray], global_timestep: int | None = None) -> None:
        """Loads the learner's weights (and moves schedules to ``global_timestep``)."""
        self.policy.set_weights(weights)
        if global_timestep is not None:
            self.policy.on_global_var_update(global_timestep)
        self.refresh_sampling_policy(weights)

    def refresh_sampling_policy(self, weights: dict[str, np.ndarray] | None = None) -> None:
        """Copies the policy's weights (or ``weights``, when the caller has them already)
        into the separate acting copy, if there is one."""
        if self.sampling_policy is not self.policy:
            self.sampling_policy.set_weights(self.policy.get_weights() if weights is None else weights)
            self.sampling_policy.on_global_var_update(self.policy.global_timestep)

    def get_filter_state(self) -> dict[str, np.ndarray]:
        """The observation filter's statistics."""
        return self.filter.get_state()

    def set_filter_state(self, state: dict[str, np.ndarray]) -> None:
        """Replaces the observation filter's statistics (after a sync)."""
        self.filter.set_state(state)

    def flush_filter(self) -> dict[str, np.ndarray]:
        """Returns what the filter saw since the last sync, and clears that buffer."""
        return self.filter.flush_buffer()

    def get_metrics(self) -> list[EpisodeStats]:
        """Episodes finished since the last call."""
        episodes, self._episodes = self._episodes, []
        return episodes

    def get_sampler_perf(self) -> dict[str, float]:
        """Mean milliseconds per env step spent in each part of sampling, since the last call."""
        steps = max(1, self._perf_steps)
        perf = {f"mean_{key}_ms": 1000.0 * value / steps for key, value in self._perf.items()}
        self._perf = dict.fromkeys(self._perf, 0.0)
        self._perf_steps = 0
        return perf

    # ----- acting -------------------------------------------------------------------

    def _process_obs(self, raw: list[Any], update: bool = True) -> np.ndarray:
        return self.filter(self.preprocessor.transform_batch(raw), update=update)

    def _clip_rewards(self, rewards: np.ndarray) -> np.ndarray:
        clip = self._reward_clip
        if clip is True:
            return np.sign(rewards)
        if clip:
            return np.clip(rewards, -clip, clip)
        return rewards

    def _require_env(self) -> VectorEnv:
        if self.env is None:
            raise RuntimeError("This worker was built without envs (the driver's copy when num_workers > 0).")
        return self.env

    def sample(self) -> SampleBatch:
        """Collects and postprocesses at least ``rollout_fragment_length * num_envs`` steps.

        With ``batch_mode="truncate_episodes"`` every sub-env contributes exactly
        ``rollout_fragment_length`` steps; the cut piece bootstraps from V(next obs).
        With ``"complete_episodes"`` only whole episodes are returned; unfinished ones
        carry over to the next call.
        """
        env = self._require_env()
        target = int(self.config["rollout_fragment_length"]) * env.num_envs
        complete = self.config["batch_mode"] == "complete_episodes"
        pieces: list[SampleBatch] = []
        collected = 0
        while collected < target:
            for env_index, piece, cut in self._run_fragment(bootstrap_cut=not complete):
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
                pieces.append(self.sampling_policy.postprocess_trajectory(piece))
                collected += piece.count
            if not complete:
                break
        return concat_samples(pieces)

    def sample_with_count(self) -> tuple[SampleBatch, int]:
        """:meth:`sample` and its row count, as two results: asynchronous trainers call it
        with ``num_returns=2`` and read the small count without fetching the batch."""
        batch = self.sample()
        return batch, batch.count

    def sample_and_compute_gradients(self) -> tuple[list[np.ndarray], dict[str, float], int]:
        """Samples a batch and returns the policy's gradients on it, its learner
        statistics and its row count (A3C: workers learn, the driver applies)."""
        batch = self.sample()
        grads, stats = self.policy.compute_gradients(batch)  # type: ignore[attr-defined]
        return grads, stats, batch.count

    def _run_fragment(self, bootstrap_cut: bool) -> list[tuple[int, SampleBatch, bool]]:
        """Steps every sub-env ``rollout_fragment_length`` times.

        Returns:
            ``(env_index, piece, cut)`` for each trajectory piece; ``cut`` marks a piece
            that ends at the fragment boundary rather than at an episode end.
        """
        env = self.env
        T, N = int(self.config["rollout_fragment_length"]), env.num_envs
        policy = self.sampling_policy
        perf = self._perf
        if self._obs is None:
            self._obs = self._process_obs(env.reset())
        obs = self._obs
        buf: dict[str, np.ndarray] = {
            _B.OBS: np.empty((T, N, obs.shape[1]), dtype=np.float32),
            _B.REWARDS: np.empty((T, N), dtype=np.float32),
            _B.TERMINATEDS: np.zeros((T, N), dtype=bool),
            _B.TRUNCATEDS: np.zeros((T, N), dtype=bool),
            _B.EPS_ID: np.empty((T, N), dtype=np.int64),
            _B.BOOTSTRAP_VALUE: np.zeros((T, N), dtype=np.float32),
        }
        # Q-learning stores each step's next observation; policy gradients bootstrap
        # cut pieces from V(s) instead.
        record_next_obs = policy.needs_next_obs
        bootstrap = policy.needs_bootstrap_value
        if record_next_obs:
            buf[_B.NEXT_OBS] = np.empty_like(buf[_B.OBS])
        for t in range(T):
            t0 = time.perf_counter()
            actions, extras = policy.compute_actions(obs)
            t1 = time.perf_counter()
            env_actions = policy.unsquash_actions(actions)
            t2 = time.perf_counter()
            raw_obs, rewards, terminateds, truncateds, final_obs, _ = env.step(env_actions)
            t3 = time.perf_counter()
            if t == 0:
                buf[_B.ACTIONS] = np.empty((T, *actions.shape), dtype=actions.dtype)
                for key, value in extras.items():
                    buf[key] = np.empty((T, *value.shape), dtype=value.dtype)
            buf[_B.OBS][t] = obs
            buf[_B.ACTIONS][t] = actions
            for key, value in extras.items():
                buf[key][t] = value
            buf[_B.REWARDS][t] = self._clip_rewards(rewards)
            buf[_B.TERMINATEDS][t] = terminateds
            buf[_B.TRUNCATEDS][t] = truncateds
            buf[_B.EPS_ID][t] = self._eps_ids
            self._returns += rewards
            self._lengths += 1
            if final_obs:
                truncated_envs = [i for i in final_obs if truncateds[i]] if bootstrap else []
                if truncated_envs:
                    # A time limit is not the end of the MDP: bootstrap from V(final obs).
                    last = self._process_obs([final_obs[i] for i in truncated_envs], update=False)
                    buf[_B.BOOTSTRAP_VALUE][t, truncated_envs] = policy.compute_values(last)
                for i in final_obs:
                    self._episodes.append(EpisodeStats(float(self._returns[i]), int(self._lengths[i])))
                    self._returns[i] = 0.0
                    self._lengths[i] = 0
                    self._eps_ids[i] = self._next_eps_id
                    self._next_eps_id += 1
            obs = self._process_obs(raw_obs)
            if record_next_obs:
                buf[_B.NEXT_OBS][t] = obs
                if final_obs:
                    # obs holds the reset observation of a finished sub-env; the step
                    # led to its final observation.
                    done_envs = list(final_obs)
                    buf[_B.NEXT_OBS][t, done_envs] = self._process_obs([final_obs[i] for i in done_envs], update=False)
            t4 = time.perf_counter()
            perf["inference"] += t1 - t0
            perf["action_processing"] += t2 - t1
            perf["env_wait"] += t3 - t2
            perf["obs_processing"] += t4 - t3
        self._perf_steps += T * N
        self._obs = obs
        done = buf[_B.TERMINATEDS] | buf[_B.TRUNCATEDS]
        if bootstrap_cut and bootstrap:
            open_envs = np.flatnonzero(~done[-1])
            if len(open_envs):
                buf[_B.BOOTSTRAP_VALUE][-1, open_envs] = policy.compute_values(obs[open_envs])
        pieces = []
        for i in range(N):
            ends = np.flatnonzero(done[:, i]).tolist()
            start = 0
            for end in ends:
                pieces.append((i, self._piece(buf, i, start, end + 1), False))
                start = end + 1
            if start < T:
                pieces.append((i, self._piece(buf, i, start, T), True))
        return pieces

    @staticmethod
    def _piece(buf: dict[str, np.ndarray], env_index: int, start: int, end: int) -> SampleBatch:
        return SampleBatch({key: value[start:end, env_index] for key, value in buf.items()})

    def run_episodes(self, num_episodes: int | None = None, num_steps: int | None = None) -> list[EpisodeStats]:
        """Plays whole episodes without recording a batch (for evaluation).

        Stops after ``num_episodes`` episodes or, with ``num_steps``, once that many
        steps were taken (finishing no partial episode). The filter is not updated.
        """
        env = self._require_env()
        obs = self._process_obs(env.reset(), update=False)
        returns = np.zeros(env.num_envs)
        lengths = np.zeros(env.num_envs, dtype=np.int64)
        episodes: list[EpisodeStats] = []
        steps = 0
        while True:
            if num_episodes is not None and len(episodes) >= num_episodes:
                return episodes[:num_episodes]
            if num_steps is not None and steps >= num_steps:
                return episodes
            actions, _ = self.sampling_policy.compute_actions(obs)
            raw_obs, rewards, _, _, final_obs, _ = env.step(self.sampling_policy.unsquash_actions(actions))
            returns += rewards
            lengths += 1
            steps += env.num_envs
            for i in final_obs:
                episodes.append(EpisodeStats(float(returns[i]), int(lengths[i])))
                returns[i], lengths[i] = 0.0, 0
            obs = self._process_obs(raw_obs, update=False)

    def stop(self) -> None:
        """Closes the envs."""
        if self.env is not None:
            self.env.close()
