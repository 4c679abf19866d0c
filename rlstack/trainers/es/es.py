"""ESTrainer: evolution strategies (OpenAI-ES; Salimans et al. 2017,
https://arxiv.org/abs/1703.03864), classic RLlib 1.13's ES.

Each iteration the ``num_workers`` actors run antithetic pairs of episodes with weights
``theta + noise_stdev * eps`` and ``theta - noise_stdev * eps`` (``eps`` a slice of the
shared noise table) until ``episodes_per_batch`` episodes and ``train_batch_size`` steps
are in; the returns are shaped into centered ranks, the gradient estimate is
``g = sum_i (F(+eps_i) - F(-eps_i)) * eps_i / (2n)``, and Adam (``stepsize``) climbs it
with an L2 penalty ``l2_coeff * theta``. The shared machinery (noise table, actors,
observation filter, results) is :mod:`rlstack.trainers.common.evolution`'s.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlstack.errors import ConfigError
from rlstack.trainers.common.config import COMMON_CONFIG, DefaultConfig, merge_config
from rlstack.trainers.common.evolution import EvolutionTrainer, centered_ranks, noise_slice

# Classic RLlib 1.13 ES defaults, on top of COMMON_CONFIG.
DEFAULT_CONFIG: dict[str, Any] = DefaultConfig(merge_config(
    {
        **COMMON_CONFIG,
        # Std of the Gaussian noise added to Box actions in the noisy episodes.
        "action_noise_std": 0.01,
        # L2 penalty on the weights, added to the (negated) gradient estimate.
        "l2_coeff": 0.005,
        # Std of the parameter perturbations: theta +- noise_stdev * eps.
        "noise_stdev": 0.02,
        # At least this many noisy episodes (two per pair) per iteration ...
        "episodes_per_batch": 1000,
        # ... and at least this many env steps of them.
        "train_batch_size": 10000,
        # Probability that an actor runs an episode of theta itself (no noise) instead of
        # a pair; those returns are episode_reward_mean.
        "eval_prob": 0.003,
        # How returns become weights: "centered_rank" (ranks in [-0.5, 0.5]) or "raw".
        "return_proc_mode": "centered_rank",
        # Remote actors that run the episodes (each reads the one noise table of its node).
        "num_workers": 10,
        # Adam's step size on the flat weights.
        "stepsize": 0.01,
        # Observations normalised by running statistics merged from every actor.
        "observation_filter": "MeanStdFilter",
        # float32 entries of the shared noise table (250M: 1 GB in the object store).
        "noise_size": 250000000,
        # episode_reward_mean averages the last report_length iterations' mean return.
        "report_length": 10,
    },
    {},
    "ES",
))

RETURN_PROC_MODES = ("centered_rank", "raw")


class Adam:
    """Adam (Kingma & Ba 2015) on a flat vector; ``update`` descends ``gradient``.

    Args:
        dim: Length of the vector.
        stepsize: The step size.
        beta1, beta2, epsilon: Adam's constants.
    """

    def __init__(self, dim: int, stepsize: float, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-08) -> None:
        self.stepsize, self.beta1, self.beta2, self.epsilon = stepsize, beta1, beta2, epsilon
        self.m = np.zeros(dim, dtype=np.float32)
        self.v = np.zeros(dim, dtype=np.float32)
        self.t = 0

    def update(self, theta: np.ndarray, gradient: np.ndarray) -> tuple[np.ndarray, float]:
        """Returns ``(theta + step, |step| / |theta + step|)``."""
        self.t += 1
        # The bias corrections of m and v folded into the step size.
        a = self.stepsize * np.sqrt(1 - self.beta2 ** self.t) / (1 - self.beta1 ** self.t)
        self.m = self.beta1 * self.m + (1 - self.beta1) * gradient
        self.v = self.beta2 * self.v + (1 - self.beta2) * (gradient * gradient)
        step = -a * self.m / (np.sqrt(self.v) + self.epsilon)
        new_theta = (theta + step).astype(np.float32)
        return new_theta, float(np.linalg.norm(step) / max(np.linalg.norm(new_theta), 1e-12))


def es_gradient(noise: np.ndarray, noise_indices: np.ndarray, noisy_returns: np.ndarray, dim: int,
                return_proc_mode: str = "centered_rank") -> np.ndarray:
    """The ascent direction ``sum_i (F_i+ - F_i-) * eps_i / (2n)`` with shaped returns ``F``.

    Args:
        noise: The shared noise table.
        noise_indices: [n] start of each pair's ``eps``.
        noisy_returns: [n, 2] returns with ``+eps`` and ``-eps``.
        dim: Number of weights.
        return_proc_mode: "centered_rank" or "raw".
    """
    shaped = centered_ranks(noisy_returns) if return_proc_mode == "centered_rank" else np.asarray(noisy_returns)
    gradient = np.zeros(dim, dtype=np.float64)
    for weight, index in zip(shaped[:, 0] - shaped[:, 1], noise_indices):
        gradient += weight * noise_slice(noise, int(index), dim)
    return (gradient / noisy_returns.size).astype(np.float32)


class ESTrainer(EvolutionTrainer):
    """Evolution strategies with the classic RLlib API.

    Examples:
        >>> from rlstack.trainers.es import ESTrainer, DEFAULT_CONFIG
        >>> DEFAULT_CONFIG["return_proc_mode"], DEFAULT_CONFIG["noise_size"]
        ('centered_rank', 250000000)
    """

    _name = "ES"
    _default_config = DEFAULT_CONFIG

    @classmethod
    def validate_config(cls, config: dict[str, Any]) -> None:
        super().validate_config(config)
        if config["return_proc_mode"] not in RETURN_PROC_MODES:
            raise ConfigError(f"return_proc_mode={config['return_proc_mode']!r} is not allowed; use one of "
                              f"{', '.join(RETURN_PROC_MODES)}.")
        for key in ("stepsize", "l2_coeff", "action_noise_std"):
            if not isinstance(config[key], (int, float)) or config[key] < 0 or (key == "stepsize" and not config[key]):
                raise ConfigError(f"{key}={config[key]!r}: must be a number >= 0{' (> 0)' if key == 'stepsize' else ''}.")
        for key in ("episodes_per_batch", "train_batch_size"):
            if not isinstance(config[key], int) or config[key] < 0:
                raise ConfigError(f"{key}={config[key]!r}: must be an int >= 0 (a minimum per iteration).")

    policy_classes = {"torch": "rlstack.trainers.es.es_torch_policy:ESTorchPolicy",
                      "tf": "rlstack.trainers.es.es_tf_policy:ESTFPolicy"}

    def setup(self, config: dict[str, Any]) -> None:
        super().setup(config)
        self.optimizer = Adam(sum(self.learner_policy.get_weights()[n].size for n in self._weight_names),
                              self.config["stepsize"])

    def batch_minimums(self) -> tuple[int, int]:
        return self.config["episodes_per_batch"], self.config["train_batch_size"]

    def update(self, theta: np.ndarray, noise_indices: np.ndarray, noisy_returns: np.ndarray
               ) -> tuple[np.ndarray, dict[str, float]]:
        cfg = self.config
        g = es_gradient(self._noise, noise_indices, noisy_returns, theta.size, cfg["return_proc_mode"])
        # Adam descends: the negated ascent direction plus the L2 penalty's gradient.
        new_theta, update_ratio = self.optimizer.update(theta, -g + cfg["l2_coeff"] * theta)
        return new_theta, {"grad_norm": float(np.linalg.norm(g)), "update_ratio": update_ratio}

    def extra_checkpoint_arrays(self) -> dict[str, dict[str, np.ndarray]]:
        return {"es_optimizer": {"m": self.optimizer.m, "v": self.optimizer.v, "t": np.asarray(self.optimizer.t)}}

    def restore_extra_arrays(self, arrays: dict[str, dict[str, np.ndarray]]) -> None:
        state = arrays.get("es_optimizer")
        if state:
            self.optimizer.m, self.optimizer.v = np.array(state["m"]), np.array(state["v"])
            self.optimizer.t = int(state["t"])
