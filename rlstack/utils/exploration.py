"""Exploration, framework-free: epsilon-greedy for Q-learning and action noise for
deterministic continuous-control actors.

``exploration_config`` takes the classic RLlib forms. For Q-learning over Discrete
actions (DQN, ApeX):

* ``{"type": "EpsilonGreedy", "initial_epsilon": 1.0, "final_epsilon": 0.02,
  "epsilon_timesteps": 10000}``: epsilon falls linearly over the first
  ``epsilon_timesteps`` sampled steps, then stays at ``final_epsilon``;
* ``{"type": "PerWorkerEpsilonGreedy", ...}`` (ApeX, Horgan et al. 2018): rollout worker
  ``i`` of ``N`` keeps a constant ``0.4 ** (1 + 7 * (i - 1) / (N - 1))`` (one worker:
  0.4); the driver's copy, which samples only with ``num_workers=0``, follows the
  EpsilonGreedy schedule.

For deterministic actors over Box actions (DDPG, TD3), which act in the normalized
space [-1, 1] that ``Policy.unsquash_actions`` maps onto the bounds:

* ``{"type": "GaussianNoise", "random_timesteps": 1000, "stddev": 0.1,
  "initial_scale": 1.0, "final_scale": 0.02, "scale_timesteps": 10000}`` (Fujimoto et
  al. 2018): uniform random actions for the first ``random_timesteps`` sampled steps,
  then ``clip(mu(s) + scale * N(0, stddev^2), -1, 1)`` with ``scale`` going linearly
  from ``initial_scale`` to ``final_scale`` over the ``scale_timesteps`` after the
  random phase;
* ``{"type": "OrnsteinUhlenbeckNoise", "ou_theta": 0.15, "ou_sigma": 0.2,
  "ou_base_scale": 0.1, ...same schedule keys...}`` (Lillicrap et al. 2016): temporally
  correlated noise ``x += theta * (0 - x) + sigma * N(0, 1)``, added as
  ``scale * ou_base_scale * x * (high - low)``.

The defaults are classic RLlib 1.13's. Since actions are normalized, ``stddev`` and
the OU amplitude are fractions of the action range's half width, as in the TD3 paper's
``expl_noise * max_action``.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlstack.errors import ConfigError, did_you_mean
from rlstack.utils.schedules import PiecewiseSchedule

EXPLORATION_DEFAULTS: dict[str, Any] = {
    "type": "EpsilonGreedy",
    "initial_epsilon": 1.0,
    "final_epsilon": 0.02,
    "epsilon_timesteps": 10000,
}
EXPLORATION_TYPES = ("EpsilonGreedy", "PerWorkerEpsilonGreedy")

# Each noise type's keys with classic RLlib 1.13's defaults (its class constructors').
NOISE_DEFAULTS: dict[str, dict[str, Any]] = {
    "GaussianNoise": {
        "type": "GaussianNoise",
        "random_timesteps": 1000,
        "stddev": 0.1,
        "initial_scale": 1.0,
        "final_scale": 0.02,
        "scale_timesteps": 10000,
    },
    # ApeX-DDPG's (Horgan et al. 2018): GaussianNoise whose scale is a constant per rollout
    # worker, ApeX's per-worker epsilon 0.4 ** (1 + 7 (i - 1) / (N - 1)) for worker i of N
    # (0 for the driver's copy); initial_scale/final_scale/scale_timesteps are unused.
    "PerWorkerGaussianNoise": {
        "type": "PerWorkerGaussianNoise",
        "random_timesteps": 1000,
        "stddev": 0.1,
        "initial_scale": 1.0,
        "final_scale": 0.02,
        "scale_timesteps": 10000,
    },
    "OrnsteinUhlenbeckNoise": {
        "type": "OrnsteinUhlenbeckNoise",
        "random_timesteps": 1000,
        "ou_theta": 0.15,
        "ou_sigma": 0.2,
        "ou_base_scale": 0.1,
        "initial_scale": 1.0,
        "final_scale": 0.02,
        "scale_timesteps": 10000,
    },
}
NOISE_TYPES = tuple(NOISE_DEFAULTS)

# Why a type of another family does not fit, for the error messages.
_FAMILY = {
    **dict.fromkeys(EXPLORATION_TYPES, "picks random actions among Discrete ones (Q-learning: DQN, APEX)"),
    **dict.fromkeys(NOISE_TYPES, "adds noise to the continuous actions of a deterministic actor (DDPG, TD3)"),
    "StochasticSampling": "samples the policy's action distribution (policy-gradient algorithms and SAC)",
}


def _number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _integer(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _check_type(exploration: dict[str, Any], allowed: tuple[str, ...], algorithm: str) -> str:
    kind = exploration.get("type")
    if kind in allowed:
        return kind
    why = f" ({kind!r} {_FAMILY[kind]})" if kind in _FAMILY else ""
    raise ConfigError(
        f"exploration_config type {kind!r} is not supported by {algorithm}{why}; use one of "
        f"{', '.join(allowed)}, e.g. exploration_config: {{type: {allowed[0]}}}."
    )


def validate_exploration_config(exploration: dict[str, Any], algorithm: str = "Q-learning") -> None:
    """Checks an epsilon-greedy ``exploration_config``.

    Args:
        exploration: The merged ``exploration_config``.
        algorithm: The trainer's name, for messages.

    Raises:
        ConfigError: Naming the key, the value and what is allowed.
    """
    _check_type(exploration, EXPLORATION_TYPES, algorithm)
    unknown = set(exploration) - set(EXPLORATION_DEFAULTS)
    if unknown:
        raise ConfigError(
            f"Unknown exploration_config keys {sorted(unknown)}; valid: {', '.join(sorted(EXPLORATION_DEFAULTS))}."
        )
    for key in ("initial_epsilon", "final_epsilon"):
        value = exploration.get(key, EXPLORATION_DEFAULTS[key])
        if not _number(value) or not 0.0 <= value <= 1.0:
            raise ConfigError(f"exploration_config.{key} must be in [0, 1], got {value!r}.")
    steps = exploration.get("epsilon_timesteps", EXPLORATION_DEFAULTS["epsilon_timesteps"])
    if not _integer(steps) or steps < 0:
        raise ConfigError(f"exploration_config.epsilon_timesteps must be an integer >= 0, got {steps!r}.")


def validate_noise_config(exploration: dict[str, Any], algorithm: str) -> None:
    """Checks an action-noise ``exploration_config`` (GaussianNoise or
    OrnsteinUhlenbeckNoise); keys left out take the type's defaults.

    Args:
        exploration: The merged ``exploration_config``.
        algorithm: The trainer's name, for messages.

    Raises:
        ConfigError: Naming the key, the value and what is allowed.
    """
    kind = _check_type(exploration, NOISE_TYPES, algorithm)
    valid = NOISE_DEFAULTS[kind]
    for key in exploration:
        if key not in valid:
            raise ConfigError(
                f"Unknown key {key!r} in exploration_config of type {kind} for {algorithm}{did_you_mean(key, valid)} "
                f"Valid: {', '.join(sorted(valid))}."
            )
    config = {**valid, **exploration}
    for key in ("random_timesteps", "scale_timesteps"):
        if not _integer(config[key]) or config[key] < 0:
            raise ConfigError(f"exploration_config.{key} must be an integer >= 0 (sampled steps), got {config[key]!r}.")
    for key in sorted(set(valid) - {"type", "random_timesteps", "scale_timesteps"}):
        if not _number(config[key]) or not np.isfinite(config[key]) or config[key] < 0:
            raise ConfigError(f"exploration_config.{key} must be a finite number >= 0, got {config[key]!r}.")


def per_worker_epsilon(worker_index: int, num_workers: int) -> float:
    """ApeX's constant epsilon of rollout worker ``worker_index`` (1..N) of ``num_workers``."""
    if num_workers <= 1:
        return 0.4
    return 0.4 ** (1.0 + 7.0 * (worker_index - 1) / (num_workers - 1))


class EpsilonGreedy:
    """Chooses ``argmax_a Q(s, a)``, or with probability epsilon a uniformly random action.

    Args:
        exploration_config: The config's ``exploration_config`` (defaults filled in).
        worker_index: 0 for the driver's copy, 1..N for rollout workers.
        num_workers: Number of rollout workers.
        seed: Seed of this copy's random generator.
    """

    def __init__(self, exploration_config: dict[str, Any], worker_index: int, num_workers: int,
                 seed: int | None = None) -> None:
        config = {**EXPLORATION_DEFAULTS, **exploration_config}
        self.constant: float | None = None
        if config["type"] == "PerWorkerEpsilonGreedy" and worker_index > 0:
            self.constant = per_worker_epsilon(worker_index, num_workers)
        steps = int(config["epsilon_timesteps"])
        points = [(0, config["initial_epsilon"]), (steps, config["final_epsilon"])] if steps > 0 else \
            [(0, config["final_epsilon"])]
        self.schedule = PiecewiseSchedule(points, "exploration_config")
        self.rng = np.random.default_rng(seed)

    def epsilon(self, timestep: int) -> float:
        """Epsilon at ``timestep`` sampled steps."""
        return self.constant if self.constant is not None else self.schedule.value(timestep)

    def choose(self, q_values: np.ndarray, timestep: int, explore: bool) -> np.ndarray:
        """Actions ``int64 [B]`` for Q-values ``[B, num_actions]``."""
        greedy = np.argmax(q_values, axis=1)
        if not explore:
            return greedy
        batch, num_actions = q_values.shape
        random_mask = self.rng.random(batch) < self.epsilon(timestep)
        return np.where(random_mask, self.rng.integers(0, num_actions, size=batch), greedy)

    def get_state(self) -> dict[str, Any]:
        """The generator's state (JSON-able)."""
        return self.rng.bit_generator.state

    def set_state(self, state: dict[str, Any]) -> None:
        """Restores :meth:`get_state`."""
        self.rng.bit_generator.state = state


class GaussianNoise:
    """Uniform random actions first, then Gaussian noise on the actor's actions.

    Actions are normalized (the actor's tanh output in [-1, 1]); see the module
    docstring for the schedule.

    Args:
        exploration_config: A GaussianNoise ``exploration_config`` (missing keys take
            :data:`NOISE_DEFAULTS`).
        action_dim: Size of one (flattened) action.
        seed: Seed of this copy's generator (the policy's per-worker sampling seed).
    """

    def __init__(self, exploration_config: dict[str, Any], action_dim: int, seed: int | None = None) -> None:
        config = {**NOISE_DEFAULTS[self._type()], **exploration_config}
        self.action_dim = int(action_dim)
        self.random_timesteps = int(config["random_timesteps"])
        # The scale anneals over the scale_timesteps *after* the random phase (1.13).
        start = self.random_timesteps
        self.scale_schedule = PiecewiseSchedule(
            [(start, config["initial_scale"]), (start + int(config["scale_timesteps"]), config["final_scale"])],
            "exploration_config")
        self.stddev = float(config.get("stddev", 1.0))
        self.rng = np.random.default_rng(seed)

    @classmethod
    def _type(cls) -> str:
        return cls.__name__

    def scale(self, timestep: int) -> float:
        """The noise scale at ``timestep`` sampled steps."""
        return float(self.scale_schedule.value(timestep))

    def noise(self, batch_size: int, timestep: int) -> np.ndarray:
        """One noise draw ``[batch_size, action_dim]`` (normalized units)."""
        draw = self.rng.standard_normal((batch_size, self.action_dim))
        return self.scale(timestep) * self.stddev * draw

    def apply(self, actions: np.ndarray, timestep: int, explore: bool) -> np.ndarray:
        """The actions to take, ``float32 [B, action_dim]`` in [-1, 1].

        Args:
            actions: The actor's deterministic actions ``[B, action_dim]`` in [-1, 1].
            timestep: Sampled steps so far (the policy's ``global_timestep``).
            explore: False returns ``actions`` unchanged.
        """
        actions = np.asarray(actions, dtype=np.float32)
        if not explore:
            return actions
        if timestep < self.random_timesteps:
            return self.rng.uniform(-1.0, 1.0, actions.shape).astype(np.float32)
        return np.clip(actions + self.noise(len(actions), timestep), -1.0, 1.0).astype(np.float32)

    def get_state(self) -> dict[str, Any]:
        """The generator's state (JSON-able)."""
        return {"rng": self.rng.bit_generator.state}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restores :meth:`get_state`."""
        self.rng.bit_generator.state = state["rng"]


class OrnsteinUhlenbeckNoise(GaussianNoise):
    """Uniform random actions first, then Ornstein-Uhlenbeck noise on the actor's actions.

    As in classic RLlib 1.13 a policy copy keeps one process ``x [action_dim]``, shared
    by the rows of a batch (the sub-envs of a worker), advanced once per call; it
    starts at 0 when the random phase ends and is never reset at episode ends.

    Args:
        exploration_config: An OrnsteinUhlenbeckNoise ``exploration_config``.
        action_dim: Size of one (flattened) action.
        seed: Seed of this copy's generator.
    """

    # The normalized action range high - low, which the OU amplitude is a fraction of.
    ACTION_RANGE = 2.0

    def __init__(self, exploration_config: dict[str, Any], action_dim: int, seed: int | None = None) -> None:
        super().__init__(exploration_config, action_dim, seed)
        config = {**NOISE_DEFAULTS["OrnsteinUhlenbeckNoise"], **exploration_config}
        self.theta = float(config["ou_theta"])
        self.sigma = float(config["ou_sigma"])
        self.base_scale = float(config["ou_base_scale"])
        self.ou_state = np.zeros(self.action_dim, dtype=np.float64)

    def noise(self, batch_size: int, timestep: int) -> np.ndarray:
        # dx = theta * (0 - x) + sigma * N(0, 1): mean-reverting, temporally correlated.
        self.ou_state = self.ou_state + self.theta * -self.ou_state + self.sigma * self.rng.standard_normal(self.action_dim)
        step_noise = self.scale(timestep) * self.base_scale * self.ou_state * self.ACTION_RANGE
        return np.broadcast_to(step_noise, (batch_size, self.action_dim))

    def get_state(self) -> dict[str, Any]:
        """The generator's state and the process's value (JSON-able)."""
        return {**super().get_state(), "ou_state": self.ou_state.tolist()}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restores :meth:`get_state`."""
        super().set_state(state)
        self.ou_state = np.asarray(state["ou_state"], dtype=np.float64)


class PerWorkerGaussianNoise(GaussianNoise):
    """GaussianNoise with a constant scale per rollout worker (Ape-X, Horgan et al. 2018):
    worker i of N adds ``per_worker_epsilon(i, N) * stddev * N(0, 1)``, i.e. scale
    ``0.4 ** (1 + 7 (i - 1) / (N - 1))`` (the paper's per-actor exponent, as ApeX-DQN's
    epsilons), so a few workers explore widely and most stay near the actor's actions; the
    driver's copy (worker 0) adds none. The random phase (``random_timesteps``) is
    GaussianNoise's.

    Args:
        exploration_config: A PerWorkerGaussianNoise ``exploration_config``.
        action_dim: Size of one (flattened) action.
        seed: Seed of this copy's generator.
        worker_index: 0 for the driver's copy, 1..N for rollout workers.
        num_workers: Number of rollout workers.
    """

    def __init__(self, exploration_config: dict[str, Any], action_dim: int, seed: int | None = None,
                 worker_index: int = 0, num_workers: int = 0) -> None:
        super().__init__(exploration_config, action_dim, seed)
        self.constant_scale = per_worker_epsilon(worker_index, num_workers) if worker_index > 0 else 0.0

    def scale(self, timestep: int) -> float:
        return self.constant_scale


def make_action_noise(exploration_config: dict[str, Any], action_dim: int, seed: int | None = None,
                      worker_index: int = 0, num_workers: int = 0) -> GaussianNoise:
    """The noise object for a (validated) action-noise ``exploration_config`` of the policy
    copy on rollout worker ``worker_index`` of ``num_workers`` (0: the driver's)."""
    kind = exploration_config["type"]
    if kind == "PerWorkerGaussianNoise":
        return PerWorkerGaussianNoise(exploration_config, action_dim, seed, worker_index, num_workers)
    kinds = {"GaussianNoise": GaussianNoise, "OrnsteinUhlenbeckNoise": OrnsteinUhlenbeckNoise}
    return kinds[kind](exploration_config, action_dim, seed)


@dataclass
class ExplorationConfig:
    """What ``Policy._create_exploration()`` gives a hand-written policy: its
    ``exploration_config``. It keeps no state (a checkpoint has nothing of it to save);
    choosing exploratory actions is the policy's own ``compute_actions``.

    Attributes:
        config: The ``exploration_config`` dict (``type`` and its arguments).
    """

    config: dict[str, Any]

    def get_state(self) -> dict[str, Any]:
        """Nothing: the config is rebuilt from the trainer's config."""
        return {}

    def set_state(self, state: dict[str, Any]) -> None:
        """Takes :meth:`get_state`'s empty state."""

    def get_exploration_action(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            "rlstack's policies explore inside their own compute_actions; a hand-written policy picks its "
            "exploratory actions in its compute_actions too (this object only holds exploration_config).")

