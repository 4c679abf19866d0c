"""Epsilon-greedy exploration for Q-learning, framework-free.

``exploration_config`` takes the classic RLlib forms:

* ``{"type": "EpsilonGreedy", "initial_epsilon": 1.0, "final_epsilon": 0.02,
  "epsilon_timesteps": 10000}``: epsilon falls linearly over the first
  ``epsilon_timesteps`` sampled steps, then stays at ``final_epsilon``;
* ``{"type": "PerWorkerEpsilonGreedy", ...}`` (ApeX, Horgan et al. 2018): rollout worker
  ``i`` of ``N`` keeps a constant ``0.4 ** (1 + 7 * (i - 1) / (N - 1))`` (one worker:
  0.4); the driver's copy, which samples only with ``num_workers=0``, follows the
  EpsilonGreedy schedule.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlstack.errors import ConfigError
from rlstack.utils.schedules import PiecewiseSchedule

EXPLORATION_DEFAULTS: dict[str, Any] = {
    "type": "EpsilonGreedy",
    "initial_epsilon": 1.0,
    "final_epsilon": 0.02,
    "epsilon_timesteps": 10000,
}
EXPLORATION_TYPES = ("EpsilonGreedy", "PerWorkerEpsilonGreedy")


def validate_exploration_config(exploration: dict[str, Any]) -> None:
    """Checks an epsilon-greedy ``exploration_config``.

    Raises:
        ConfigError: Naming the key, the value and what is allowed.
    """
    if exploration.get("type") not in EXPLORATION_TYPES:
        raise ConfigError(
            f"exploration_config type {exploration.get('type')!r} is not supported by Q-learning; use one of "
            f"{', '.join(EXPLORATION_TYPES)}."
        )
    unknown = set(exploration) - set(EXPLORATION_DEFAULTS)
    if unknown:
        raise ConfigError(
            f"Unknown exploration_config keys {sorted(unknown)}; valid: {', '.join(sorted(EXPLORATION_DEFAULTS))}."
        )
    for key in ("initial_epsilon", "final_epsilon"):
        value = exploration.get(key, EXPLORATION_DEFAULTS[key])
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0.0 <= value <= 1.0:
            raise ConfigError(f"exploration_config.{key} must be in [0, 1], got {value!r}.")
    steps = exploration.get("epsilon_timesteps", EXPLORATION_DEFAULTS["epsilon_timesteps"])
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 0:
        raise ConfigError(f"exploration_config.epsilon_timesteps must be an integer >= 0, got {steps!r}.")


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
