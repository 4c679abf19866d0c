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
  EpsilonGreedy schedule;
* ``{"type": "SoftQ", "temperature": 1.0}``: actions sampled from
  ``softmax(Q(s, .) / temperature)`` (Boltzmann exploration), the greedy action with
  ``explore=False``; ``{"type": "StochasticSampling"}`` is SoftQ at temperature 1, as
  classic RLlib's Categorical over the Q-values was;
* ``{"type": "ParameterNoise", "initial_stddev": 1.0, "random_timesteps": 10000}``
  (Plappert et al. 2018, https://arxiv.org/abs/1706.01905): the policy acts with a copy of
  its network whose weights carry Gaussian noise, drawn afresh for each episode; the
  noise's stddev grows by 1% when the KL divergence between the clean and the perturbed
  network's ``softmax(Q)`` stayed below ``-log(1 - eps + eps / num_actions)`` and shrinks
  by 1% otherwise, ``eps`` being the epsilon of an epsilon-greedy layer on top (1.0 for
  the first ``random_timesteps + 1`` steps, then 0.01; ``sub_exploration`` may name
  another EpsilonGreedy config). Learning and ``explore=False`` use the clean weights.

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
  ``scale * ou_base_scale * x * (high - low)``;
* ``{"type": "PerWorkerGaussianNoise"}`` / ``{"type": "PerWorkerOrnsteinUhlenbeckNoise"}``
  (ApeX-DDPG): the same noise with a constant scale per rollout worker, ApeX's
  per-worker epsilon above (0 for the driver's copy).

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
# Each Q-learning exploration type's keys with classic RLlib 1.13's defaults.
Q_EXPLORATION_DEFAULTS: dict[str, dict[str, Any]] = {
    "EpsilonGreedy": dict(EXPLORATION_DEFAULTS),
    "PerWorkerEpsilonGreedy": {**EXPLORATION_DEFAULTS, "type": "PerWorkerEpsilonGreedy"},
    # 1.13's SoftQ rides on StochasticSampling, whose random_timesteps it accepts.
    "SoftQ": {"type": "SoftQ", "temperature": 1.0, "random_timesteps": 0},
    "StochasticSampling": {"type": "StochasticSampling", "random_timesteps": 0},
    # sub_exploration None: EpsilonGreedy at 1.0 for random_timesteps + 1 steps, then 0.01.
    "ParameterNoise": {"type": "ParameterNoise", "initial_stddev": 1.0, "random_timesteps": 10000,
                       "sub_exploration": None},
}
EXPLORATION_TYPES = tuple(Q_EXPLORATION_DEFAULTS)

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
    # ApeX-DDPG's 1.13 default: OrnsteinUhlenbeckNoise whose scale is the per-worker
    # constant of PerWorkerGaussianNoise; initial_scale/final_scale/scale_timesteps are unused.
    "PerWorkerOrnsteinUhlenbeckNoise": {
        "type": "PerWorkerOrnsteinUhlenbeckNoise",
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
    "EpsilonGreedy": "picks random actions among Discrete ones (Q-learning: DQN, APEX)",
    "PerWorkerEpsilonGreedy": "picks random actions among Discrete ones (Q-learning: APEX)",
    "SoftQ": "samples Discrete actions from softmax(Q / temperature) (Q-learning: DQN, APEX)",
    "ParameterNoise": "perturbs the network's weights; rlstack implements it for DQN and APEX only",
    **dict.fromkeys(NOISE_TYPES, "adds noise to the continuous actions of a deterministic actor (DDPG, TD3)"),
    "StochasticSampling": "samples the policy's action distribution (policy-gradient algorithms, SAC, DQN)",
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
    """Checks a Q-learning ``exploration_config`` (EpsilonGreedy, PerWorkerEpsilonGreedy,
    SoftQ, StochasticSampling or ParameterNoise); keys left out take the type's defaults.

    Args:
        exploration: The merged ``exploration_config``.
        algorithm: The trainer's name, for messages.

    Raises:
        ConfigError: Naming the key, the value and what is allowed.
    """
    kind = _check_type(exploration, EXPLORATION_TYPES, algorithm)
    valid = Q_EXPLORATION_DEFAULTS[kind]
    unknown = set(exploration) - set(valid)
    if unknown:
        raise ConfigError(
            f"Unknown exploration_config keys {sorted(unknown)} for type {kind}"
            f"{did_you_mean(sorted(unknown)[0], valid) or '.'} Valid: {', '.join(sorted(valid))}."
        )
    config = {**valid, **exploration}
    for key in ("initial_epsilon", "final_epsilon"):
        if key in valid and (not _number(config[key]) or not 0.0 <= config[key] <= 1.0):
            raise ConfigError(f"exploration_config.{key} must be in [0, 1], got {config[key]!r}.")
    for key in ("epsilon_timesteps", "random_timesteps"):
        if key in valid and (not _integer(config[key]) or config[key] < 0):
            raise ConfigError(f"exploration_config.{key} must be an integer >= 0 (sampled steps), got {config[key]!r}.")
    if kind == "SoftQ":
        temperature = config["temperature"]
        if not _number(temperature) or not np.isfinite(temperature) or temperature <= 0:
            raise ConfigError(f"exploration_config.temperature must be a number > 0 (Q-values are divided by it "
                              f"before the softmax), got {temperature!r}.")
    if kind == "ParameterNoise":
        stddev = config["initial_stddev"]
        if not _number(stddev) or not np.isfinite(stddev) or stddev < 0:
            raise ConfigError(f"exploration_config.initial_stddev must be a finite number >= 0 (the weight noise's "
                              f"initial standard deviation), got {stddev!r}.")
        sub = config["sub_exploration"]
        if sub is not None:
            if not isinstance(sub, dict) or sub.get("type") not in ("EpsilonGreedy", "PerWorkerEpsilonGreedy"):
                raise ConfigError(f"exploration_config.sub_exploration must be null (1.13's step schedule) or an "
                                  f"EpsilonGreedy config such as {{type: EpsilonGreedy, final_epsilon: 0.01}}, got "
                                  f"{sub!r}.")
            validate_exploration_config(sub, algorithm)


def validate_noise_config(exploration: dict[str, Any], algorithm: str) -> None:
    """Checks an action-noise ``exploration_config`` (GaussianNoise, OrnsteinUhlenbeckNoise
    or their PerWorker forms); keys left out take the type's defaults.

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


class SoftQ:
    """Samples actions from ``softmax(Q(s, .) / temperature)``; ``argmax_a Q(s, a)`` when
    not exploring (classic RLlib 1.13's SoftQ: a Categorical over the Q-values divided by
    the temperature). A low temperature approaches greedy acting, a high one uniform.

    Args:
        exploration_config: A SoftQ (or StochasticSampling: temperature 1)
            ``exploration_config``.
        seed: Seed of this copy's random generator.
    """

    def __init__(self, exploration_config: dict[str, Any], seed: int | None = None) -> None:
        config = {**Q_EXPLORATION_DEFAULTS["SoftQ"], **exploration_config}
        self.temperature = float(config["temperature"])
        self.random_timesteps = int(config["random_timesteps"])
        self.rng = np.random.default_rng(seed)

    def probabilities(self, q_values: np.ndarray) -> np.ndarray:
        """``softmax(Q / temperature)`` per row, ``float64 [B, num_actions]``."""
        logits = np.asarray(q_values, dtype=np.float64) / self.temperature
        logits -= logits.max(axis=1, keepdims=True)
        weights = np.exp(logits)
        return weights / weights.sum(axis=1, keepdims=True)

    def choose(self, q_values: np.ndarray, timestep: int, explore: bool) -> np.ndarray:
        """Actions ``int64 [B]`` for Q-values ``[B, num_actions]``."""
        if not explore:
            return np.argmax(q_values, axis=1)
        batch, num_actions = q_values.shape
        if timestep < self.random_timesteps:
            return self.rng.integers(0, num_actions, size=batch)
        # Inverse-CDF sampling, one uniform draw per row.
        cdf = np.cumsum(self.probabilities(q_values), axis=1)
        draws = self.rng.random((batch, 1)) * cdf[:, -1:]
        return np.minimum((cdf <= draws).sum(axis=1), num_actions - 1).astype(np.int64)

    def get_state(self) -> dict[str, Any]:
        """The generator's state (JSON-able)."""
        return self.rng.bit_generator.state

    def set_state(self, state: dict[str, Any]) -> None:
        """Restores :meth:`get_state`."""
        self.rng.bit_generator.state = state


def perturbable(name: str, value: np.ndarray) -> bool:
    """Whether ParameterNoise perturbs the weight ``name``: floating-point arrays, except
    layer normalization's (1.13 left ``LayerNorm`` variables alone)."""
    return np.issubdtype(np.asarray(value).dtype, np.floating) and "layernorm" not in name.lower()


class ParameterNoise:
    """Gaussian noise on a network's weights, drawn afresh for each episode, with an
    adaptive standard deviation (Plappert et al. 2018, "Parameter Space Noise for
    Exploration"); framework-free: it works on the policy's weights as numpy arrays and
    the policy acts with a perturbed copy of its network.

    The policy calls :meth:`perturb` with its clean weights when :attr:`needs_new_noise`
    and loads the result into the acting copy; after each trajectory piece it calls
    :meth:`adapt` with the distance between the clean and the perturbed network's action
    distributions and :meth:`end_episode` when the piece ended an episode. Actions are
    chosen by :attr:`sub_exploration` on the perturbed network's outputs.

    Args:
        exploration_config: A ParameterNoise ``exploration_config``.
        sub_exploration: What picks the final action (an :class:`EpsilonGreedy` for
            Q-learning); see :func:`make_q_exploration`.
        seed: Seed of this copy's random generator.
    """

    # The stddev moves by this factor per adaptation (the paper's alpha).
    ADAPTATION = 1.01

    def __init__(self, exploration_config: dict[str, Any], sub_exploration: EpsilonGreedy,
                 seed: int | None = None) -> None:
        config = {**Q_EXPLORATION_DEFAULTS["ParameterNoise"], **exploration_config}
        self.stddev = float(config["initial_stddev"])
        self.random_timesteps = int(config["random_timesteps"])
        self.sub_exploration = sub_exploration
        self.rng = np.random.default_rng(seed)
        # The current episode's noise by weight name (None: none drawn yet).
        self.noise: dict[str, np.ndarray] | None = None
        self.episode_ended = True

    @property
    def needs_new_noise(self) -> bool:
        """Whether the next exploring action starts an episode (or is the first one)."""
        return self.noise is None or self.episode_ended

    def perturb(self, weights: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Draws the new episode's noise ``N(0, stddev^2)`` per weight and returns
        ``weights + noise`` (the weights themselves are not changed)."""
        self.noise = {name: self.rng.normal(0.0, self.stddev, np.shape(value)).astype(np.asarray(value).dtype)
                      for name, value in weights.items() if perturbable(name, value)}
        self.episode_ended = False
        return {name: np.asarray(value) + self.noise[name] if name in self.noise else value
                for name, value in weights.items()}

    def end_episode(self) -> None:
        """An episode ended: the next exploring action draws new noise."""
        self.episode_ended = True

    def target_kl(self, timestep: int, num_actions: int) -> float:
        """The KL divergence that epsilon-greedy acting at the sub-exploration's epsilon
        would cause: ``-log(1 - eps + eps / num_actions)`` (the paper's section 3.2)."""
        epsilon = self.sub_exploration.epsilon(timestep)
        return float(-np.log(1.0 - epsilon + epsilon / num_actions))

    def adapt(self, distance: float, target: float) -> None:
        """Grows the stddev by 1% if ``distance <= target``, else shrinks it by 1%."""
        if distance <= target:
            self.stddev *= self.ADAPTATION
        else:
            self.stddev /= self.ADAPTATION

    def choose(self, q_values: np.ndarray, timestep: int, explore: bool) -> np.ndarray:
        """Actions ``int64 [B]`` for the (perturbed, when exploring) Q-values."""
        return self.sub_exploration.choose(q_values, timestep, explore)

    def epsilon(self, timestep: int) -> float:
        """The sub-exploration's epsilon at ``timestep`` sampled steps."""
        return self.sub_exploration.epsilon(timestep)

    def get_state(self) -> dict[str, Any]:
        """The stddev and the generators' states (JSON-able)."""
        return {"cur_stddev": self.stddev, "rng": self.rng.bit_generator.state,
                "sub_exploration": self.sub_exploration.get_state()}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restores :meth:`get_state`."""
        self.stddev = float(state["cur_stddev"])
        self.rng.bit_generator.state = state["rng"]
        self.sub_exploration.set_state(state["sub_exploration"])


QExploration = EpsilonGreedy | SoftQ | ParameterNoise


def make_q_exploration(exploration_config: dict[str, Any], worker_index: int, num_workers: int,
                       seed: int | None = None) -> QExploration:
    """The exploration object for a (validated) Q-learning ``exploration_config`` of the
    policy copy on rollout worker ``worker_index`` of ``num_workers`` (0: the driver's)."""
    kind = exploration_config["type"]
    if kind in ("SoftQ", "StochasticSampling"):
        return SoftQ(exploration_config, seed)
    if kind != "ParameterNoise":
        return EpsilonGreedy(exploration_config, worker_index, num_workers, seed)
    config = {**Q_EXPLORATION_DEFAULTS["ParameterNoise"], **exploration_config}
    sub_config = config["sub_exploration"]
    # The sub-exploration draws from its own stream, so the weight noise does not shift it.
    sub_seed = None if seed is None else seed + 1
    if sub_config is not None:
        sub = EpsilonGreedy(sub_config, worker_index, num_workers, sub_seed)
    else:
        sub = EpsilonGreedy({"type": "EpsilonGreedy"}, worker_index, num_workers, sub_seed)
        # The paper's step function: random actions through random_timesteps, then 1%.
        steps = int(config["random_timesteps"])
        sub.schedule = PiecewiseSchedule([(0, 1.0), (steps + 1, 1.0), (steps + 2, 0.01)], "exploration_config")
    return ParameterNoise(config, sub, seed)


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
        config = {**NOISE_DEFAULTS[self._type()], **exploration_config}
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


class PerWorkerOrnsteinUhlenbeckNoise(OrnsteinUhlenbeckNoise):
    """OrnsteinUhlenbeckNoise with a constant scale per rollout worker (ApeX-DDPG's
    default in classic RLlib 1.13): worker i of N adds
    ``per_worker_epsilon(i, N) * ou_base_scale * x * (high - low)``, the same per-worker
    scale as :class:`PerWorkerGaussianNoise`; the driver's copy (worker 0) adds none. The
    random phase and the OU process (``ou_theta``, ``ou_sigma``) are
    OrnsteinUhlenbeckNoise's.

    Args:
        exploration_config: A PerWorkerOrnsteinUhlenbeckNoise ``exploration_config``.
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
    per_worker = {"PerWorkerGaussianNoise": PerWorkerGaussianNoise,
                  "PerWorkerOrnsteinUhlenbeckNoise": PerWorkerOrnsteinUhlenbeckNoise}
    if kind in per_worker:
        return per_worker[kind](exploration_config, action_dim, seed, worker_index, num_workers)
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

