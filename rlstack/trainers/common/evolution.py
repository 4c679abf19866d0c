"""What ES and ARS share: the shared noise table, the evaluation actors that run perturbed
copies of the policy in numpy, and :class:`EvolutionTrainer`, their iteration.

Black-box search (Salimans et al. 2017, https://arxiv.org/abs/1703.03864; Mania et al.
2018, https://arxiv.org/abs/1803.07055) estimates a gradient of the mean return from
episodes run with weights ``theta + sigma * eps`` and ``theta - sigma * eps`` (antithetic
pairs). The ``eps`` are slices of one table of Gaussian noise: it is put in Ray's object
store once, every actor of a node reads that one copy (numpy arrays from the object store
are read-only views of shared memory), and only slice offsets travel.

The driver keeps the usual local RolloutWorker: its torch or TF policy holds the current
weights (``compute_single_action``, checkpoints, export) and its observation filter the
merged statistics. The ``num_workers`` actors are :class:`EvolutionWorker`s, which build
no framework: they act with :class:`~rlstack.models.numpy.model.NumpyModel`, the same
network with the same canonical weights. An algorithm subclass supplies ``update``.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

import gymnasium as gym
import numpy as np
import ray

from rlstack.env.env_context import EnvContext
from rlstack.env.registry import make_env, registered_envs, restore_registry
from rlstack.errors import ConfigError
from rlstack.models.catalog import ModelCatalog
from rlstack.policies.numpy_policy import NumpyPolicy
from rlstack.trainers.common.trainer import Trainer, process_perf
from rlstack.utils.filters import make_filter
from rlstack.utils.seeding import env_seed, seed_everything

__all__ = ["EvolutionTrainer", "EvolutionWorker", "centered_ranks", "create_noise_table", "noise_slice",
           "policy_weight_names", "flatten", "unflatten"]

# The seed of the noise table: the same table in every run (as OpenAI's and 1.13's).
NOISE_SEED = 123


def create_noise_table(size: int, seed: int = NOISE_SEED) -> np.ndarray:
    """``size`` float32 draws of N(0, 1): the table every perturbation is a slice of.

    Examples:
        >>> create_noise_table(3).dtype
        dtype('float32')
    """
    return np.random.default_rng(seed).standard_normal(int(size), dtype=np.float32)


def noise_slice(noise: np.ndarray, index: int, dim: int) -> np.ndarray:
    """The perturbation ``eps`` that starts at ``index`` (a view, no copy)."""
    return noise[index:index + dim]


def centered_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks of ``values`` (over all entries) scaled to [-0.5, 0.5]: the fitness shaping of
    OpenAI-ES, invariant to the scale of returns and robust to outliers.

    Examples:
        >>> centered_ranks(np.array([[10.0, -3.0], [0.5, 7.0]]))
        array([[ 0.5       , -0.5       ],
               [-0.16666667,  0.16666667]])
    """
    values = np.asarray(values)
    ranks = np.empty(values.size, dtype=np.float64)
    ranks[values.ravel().argsort(kind="stable")] = np.arange(values.size)
    # rank / (n - 1) - 0.5: the lowest return gets -0.5, the highest +0.5.
    return (ranks / max(values.size - 1, 1) - 0.5).reshape(values.shape)


def policy_weight_names(weights: dict[str, np.ndarray]) -> list[str]:
    """The weights the action depends on, in a fixed order: the value branch (``vf_*``,
    ``value_out``), which ES and ARS never read, is left out of the search."""
    return sorted(name for name in weights if not name.startswith(("vf_", "value_out")))


def flatten(weights: dict[str, np.ndarray], names: list[str]) -> np.ndarray:
    """The named weights as one float32 vector ``theta``."""
    return np.concatenate([np.asarray(weights[name], np.float32).ravel() for name in names])


def unflatten(theta: np.ndarray, like: dict[str, np.ndarray], names: list[str]) -> dict[str, np.ndarray]:
    """``like`` with the named weights taken from ``theta`` (the inverse of :func:`flatten`)."""
    out, start = dict(like), 0
    for name in names:
        shape = np.shape(like[name])
        size = int(np.prod(shape))
        out[name] = np.asarray(theta[start:start + size], np.float32).reshape(shape)
        start += size
    return out


class EvolutionWorker:
    """A Ray actor that runs episodes with perturbed weights (``num_workers`` of them).

    Args:
        env_spec: The env (as the trainer's ``config["env"]``).
        config: The trainer's merged config.
        noise: The shared noise table (passed as an ObjectRef, Ray hands the actor a
            read-only view of the object store's copy).
        worker_index: 1, 2, ...: seeds the env, the noise offsets and action sampling.
        env_registry: Envs registered in the driver.
        model_registry: Custom models registered in the driver (refused by validation).
    """

    def __init__(self, env_spec: Any, config: dict, noise: np.ndarray, worker_index: int,
                 env_registry: dict | None = None, model_registry: dict | None = None) -> None:
        if env_registry:
            restore_registry(env_registry)
        if model_registry:
            ModelCatalog.restore_models(model_registry)
        seed = config.get("seed")
        seed_everything(None if seed is None else seed + worker_index)
        self.config = config
        self.noise = noise
        self.env = make_env(env_spec, EnvContext(config.get("env_config"), worker_index, 0, config["num_workers"]))
        self._env_seed = env_seed(seed, worker_index, 0)
        self.policy = NumpyPolicy(self.env.observation_space, self.env.action_space, config,
                                  sampling_seed=None if seed is None else seed + worker_index)
        self.filter = make_filter(config["observation_filter"], self.policy.preprocessor.shape)
        self.rng = np.random.default_rng(None if seed is None else [seed, worker_index])
        self.base_weights = self.policy.get_weights()
        self.names = policy_weight_names(self.base_weights)
        self.horizon = config.get("horizon")
        self._first_reset = True

    def ping(self) -> str:
        return "ok"

    def noise_info(self) -> dict[str, Any]:
        """How this actor holds the table (tests: a read-only view it does not own)."""
        return {"owndata": bool(self.noise.flags.owndata), "writeable": bool(self.noise.flags.writeable),
                "size": int(self.noise.size)}

    def rollout(self, theta: np.ndarray, add_noise: bool, offset: float = 0.0) -> tuple[float, int, float]:
        """One episode with the flat weights ``theta``; returns ``(return, length,
        return minus |offset| per step)``."""
        self.policy.model.set_canonical_weights(unflatten(theta, self.base_weights, self.names))
        seed = None
        if self._first_reset:
            seed, self._first_reset = self._env_seed, False
        obs, _ = self.env.reset(seed=seed)
        action_space = self.env.action_space
        total, length = 0.0, 0
        while True:
            x = self.filter(self.policy.preprocessor.transform_batch([obs]), update=True)
            dist_inputs, _ = self.policy.model(x)
            action = self.policy.dist_class(dist_inputs, self.policy.dist_spec).sample(self.policy.sampling_rng)[0]
            if isinstance(action_space, gym.spaces.Box):
                if add_noise and self.config["action_noise_std"]:
                    action = action + self.rng.standard_normal(action.shape) * self.config["action_noise_std"]
                action = np.clip(action, action_space.low, action_space.high)
            obs, reward, terminated, truncated, _ = self.env.step(action)
            total += float(reward)
            length += 1
            if terminated or truncated or (self.horizon and length >= self.horizon):
                return total, length, total - abs(offset) * length

    def do_rollouts(self, theta: np.ndarray, filter_state: dict, num_pairs: int, eval_prob: float,
                    noise_stdev: float, offset: float = 0.0) -> dict[str, Any]:
        """Runs ``num_pairs`` antithetic pairs (``theta +- noise_stdev * eps``), each
        replaced with probability ``eval_prob`` by one episode of ``theta`` itself.

        Returns:
            ``noise_indices`` [n], ``noisy_returns`` / ``noisy_lengths`` [n, 2] (+eps, -eps;
            returns less ``|offset|`` per step), ``eval_returns`` / ``eval_lengths``, and the
            observation statistics seen (``filter_buffer``).
        """
        self.filter.set_state(filter_state)
        theta = np.asarray(theta, np.float32)
        indices, returns, lengths, eval_returns, eval_lengths = [], [], [], [], []
        for _ in range(num_pairs):
            if self.rng.uniform() < eval_prob:
                episode_return, length, _ = self.rollout(theta, add_noise=False)
                eval_returns.append(episode_return)
                eval_lengths.append(length)
                continue
            index = int(self.rng.integers(0, self.noise.size - theta.size + 1))
            eps = noise_stdev * noise_slice(self.noise, index, theta.size)
            positive, negative = self.rollout(theta + eps, True, offset), self.rollout(theta - eps, True, offset)
            indices.append(index)
            returns.append((positive[2], negative[2]))
            lengths.append((positive[1], negative[1]))
        return {"noise_indices": np.asarray(indices, np.int64),
                "noisy_returns": np.asarray(returns, np.float64).reshape(-1, 2),
                "noisy_lengths": np.asarray(lengths, np.int64).reshape(-1, 2),
                "eval_returns": np.asarray(eval_returns, np.float64),
                "eval_lengths": np.asarray(eval_lengths, np.int64),
                "filter_buffer": self.filter.flush_buffer()}


class EvolutionTrainer(Trainer):
    """The iteration of ES and ARS: perturbations evaluated on the ``num_workers`` actors
    until the iteration's minimums are met, then the algorithm's :meth:`update` of the flat
    weights, which go back into the driver's policy.

    A subclass sets ``_name``, ``_default_config``, ``policy_classes`` and
    :meth:`update`, and may override :meth:`batch_minimums` and :meth:`reward_offset`.
    """

    supports_multi_agent = False

    @classmethod
    def rollout_worker_count(cls, config: dict[str, Any]) -> int:
        return 0  # the num_workers are EvolutionWorkers, started in setup()

    @classmethod
    def validate_config(cls, config: dict[str, Any]) -> None:
        if not isinstance(config["num_workers"], int) or config["num_workers"] < 1:
            raise ConfigError(f"num_workers={config['num_workers']!r}: {cls._name} evaluates perturbations on remote "
                              "actors; set num_workers to 1 or more.")
        if not (isinstance(config["noise_stdev"], (int, float)) and config["noise_stdev"] > 0):
            raise ConfigError(f"noise_stdev={config['noise_stdev']!r}: the perturbations' standard deviation must be "
                              "a number > 0 (1.13's default is 0.02).")
        if not (isinstance(config["eval_prob"], (int, float)) and 0 <= config["eval_prob"] < 1):
            raise ConfigError(f"eval_prob={config['eval_prob']!r}: the probability of an episode without noise must "
                              "be in [0, 1).")
        if not isinstance(config["noise_size"], int) or config["noise_size"] < 1:
            raise ConfigError(f"noise_size={config['noise_size']!r}: the noise table's length must be an int > 0 "
                              "(and at least the number of policy weights).")
        if not isinstance(config["report_length"], int) or config["report_length"] < 1:
            raise ConfigError(f"report_length={config['report_length']!r}: the number of iterations "
                              "episode_reward_mean averages over must be an int >= 1.")
        if config["evaluation_interval"]:
            raise ConfigError(f"evaluation_interval={config['evaluation_interval']!r}: {cls._name} reports episodes "
                              "run without noise instead (eval_prob, report_length); set evaluation_interval to None.")
        model = config["model"]
        if model.get("custom_model") or model.get("conv_filters") or model.get("custom_action_dist"):
            raise ConfigError(f"{cls._name} evaluates its policy in numpy, which covers the built-in dense models: "
                              "remove model.custom_model / conv_filters / custom_action_dist.")

    # ----- the algorithm's part -----------------------------------------------------------

    def batch_minimums(self) -> tuple[int, int]:
        """``(episodes, env steps)`` of noisy episodes each iteration needs at least."""
        raise NotImplementedError

    def reward_offset(self) -> float:
        """Subtracted (as ``|offset|``) from each step's reward of the noisy episodes."""
        return 0.0

    def update(self, theta: np.ndarray, noise_indices: np.ndarray, noisy_returns: np.ndarray
               ) -> tuple[np.ndarray, dict[str, float]]:
        """The new flat weights from one iteration's pairs, and stats (``grad_norm``,
        ``update_ratio``) for ``info``."""
        raise NotImplementedError

    # ----- set-up ------------------------------------------------------------------------

    def setup(self, config: dict[str, Any]) -> None:
        super().setup(config)
        cfg = self.config
        policy = self.learner_policy
        self._weight_names = policy_weight_names(policy.get_weights())
        dim = int(sum(np.size(value) for name, value in policy.get_weights().items() if name in self._weight_names))
        if cfg["noise_size"] < dim:
            raise ConfigError(f"noise_size={cfg['noise_size']} is smaller than the policy's {dim} weights: set "
                              f"noise_size to at least {dim} (many times more, so perturbations differ).")
        # One copy in the object store; the driver's and the actors' arrays are views of it.
        self._noise_ref = ray.put(create_noise_table(cfg["noise_size"]))
        self._noise = ray.get(self._noise_ref)
        remote = ray.remote(num_cpus=cfg["num_cpus_per_worker"], num_gpus=0)(EvolutionWorker)
        registry, models = registered_envs(), ModelCatalog.registered_models(cfg.get("model") or {})
        self._actors = [remote.remote(cfg["env"], cfg, self._noise_ref, i + 1, registry, models)
                        for i in range(cfg["num_workers"])]
        ray.get([actor.ping.remote() for actor in self._actors])
        self._eval_window: deque[tuple[np.ndarray, np.ndarray]] = deque(maxlen=cfg["report_length"])

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        return False  # Tune builds a fresh trainer (the optimizer state belongs to the trial)

    # ----- one iteration -------------------------------------------------------------------

    def step(self) -> dict[str, Any]:
        cfg = self.config
        policy = self.learner_policy
        weights = policy.get_weights()
        theta = flatten(weights, self._weight_names)
        min_episodes, min_steps = self.batch_minimums()
        batches: list[dict[str, Any]] = []
        episodes = steps = 0
        with self._timers["sample"]:
            # Rounds of equal shares, gathered in actor order: the same seed gives the same
            # iteration however fast each actor runs.
            while episodes < min_episodes or steps < min_steps:
                pairs = max(1, math.ceil((min_episodes - episodes) / 2 / len(self._actors)))
                state = self._local_filter().get_state()
                results = ray.get([actor.do_rollouts.remote(theta, state, pairs, cfg["eval_prob"],
                                                            cfg["noise_stdev"], self.reward_offset())
                                   for actor in self._actors])
                for result in results:
                    # The observation statistics each actor saw, merged into the driver's filter.
                    self._local_filter().apply_buffer(result["filter_buffer"])
                    batches.append(result)
                    episodes += result["noisy_lengths"].size
                    steps += int(result["noisy_lengths"].sum())
        noise_indices = np.concatenate([b["noise_indices"] for b in batches])
        noisy_returns = np.concatenate([b["noisy_returns"] for b in batches])
        eval_returns = np.concatenate([b["eval_returns"] for b in batches])
        eval_lengths = np.concatenate([b["eval_lengths"] for b in batches])
        with self._timers["learn"]:
            new_theta, stats = self.update(theta, noise_indices, noisy_returns)
        policy.set_weights(unflatten(new_theta, weights, self._weight_names))

        timesteps = steps + int(eval_lengths.sum())  # every env step the actors took
        episodes_this_iter = episodes + eval_returns.size
        self._counters["num_env_steps_sampled"] += timesteps
        self._counters["num_env_steps_trained"] += timesteps
        self._counters["episodes_total"] += episodes_this_iter
        if eval_returns.size:
            self._eval_window.append((eval_returns, eval_lengths))
        # As 1.13: the mean of the last report_length iterations' mean return without noise.
        means = [r.mean() for r, _ in self._eval_window]
        window_returns = np.concatenate([r for r, _ in self._eval_window]) if means else np.zeros(0)
        window_lengths = np.concatenate([n for _, n in self._eval_window]) if means else np.zeros(0)
        nan = float("nan")
        info = {"weights_norm": float(np.square(new_theta).sum()), **stats,
                "episodes_this_iter": episodes_this_iter, "episodes_so_far": self._counters["episodes_total"],
                "timesteps_this_iter": timesteps, "timesteps_so_far": self._counters["num_env_steps_sampled"],
                "num_env_steps_sampled": self._counters["num_env_steps_sampled"],
                "num_env_steps_trained": self._counters["num_env_steps_trained"]}
        result = {
            "episode_reward_mean": float(np.mean(means)) if means else nan,
            "episode_reward_max": float(window_returns.max()) if window_returns.size else nan,
            "episode_reward_min": float(window_returns.min()) if window_returns.size else nan,
            "episode_len_mean": float(window_lengths.mean()) if window_lengths.size else nan,
            "episodes_this_iter": episodes_this_iter,
            "episodes_total": self._counters["episodes_total"],
            "timesteps_total": self._counters["num_env_steps_sampled"],
            "timesteps_this_iter": timesteps,
            "num_env_steps_sampled": self._counters["num_env_steps_sampled"],
            "num_env_steps_trained": self._counters["num_env_steps_trained"],
            "num_healthy_workers": len(self._actors),
            "info": info,
            "timers": {f"{name}_time_ms": round(1000 * t.mean, 3) for name, t in self._timers.items()},
            "perf": process_perf(),
            "config": self.config,
        }
        return result

    def cleanup(self) -> None:
        for actor in getattr(self, "_actors", []):
            ray.kill(actor)
        self._actors = []
        super().cleanup()
