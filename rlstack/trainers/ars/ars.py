"""ARSTrainer: augmented random search (ARS v2-t; Mania et al. 2018,
https://arxiv.org/abs/1803.07055), classic RLlib 1.13's ARS.

Each iteration the ``num_workers`` actors run antithetic pairs of episodes with weights
``theta +- noise_stdev * delta`` until ``num_rollouts`` noisy episodes are in; the
``rollouts_used`` directions with the best ``max(r+, r-)`` are kept, and
``theta += sgd_stepsize / (b * sigma_R) * sum_k (r_k+ - r_k-) * delta_k`` with ``sigma_R``
the std of the kept returns (SGD with momentum 0.9, as 1.13). The policy is the model
config's network: ``model: {fcnet_hiddens: []}`` is the paper's linear policy. The
shared machinery (noise table, actors, observation filter, results) is
:mod:`rlstack.trainers.common.evolution`'s.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlstack.errors import ConfigError
from rlstack.trainers.common.config import COMMON_CONFIG, DefaultConfig, merge_config
from rlstack.trainers.common.evolution import EvolutionTrainer, noise_slice

# Classic RLlib 1.13 ARS defaults, on top of COMMON_CONFIG.
DEFAULT_CONFIG: dict[str, Any] = DefaultConfig(merge_config(
    {
        **COMMON_CONFIG,
        # Std of the Gaussian noise added to Box actions in the noisy episodes.
        "action_noise_std": 0.0,
        # Std of the parameter perturbations: theta +- noise_stdev * delta.
        "noise_stdev": 0.02,
        # At least this many noisy episodes (two per direction) per iteration.
        "num_rollouts": 32,
        # How many directions (the best by max(r+, r-)) the step uses.
        "rollouts_used": 32,
        # Remote actors that run the episodes (each reads the one noise table of its node).
        "num_workers": 2,
        # Step size of the (momentum 0.9) SGD step on the flat weights.
        "sgd_stepsize": 0.01,
        # Observations normalised by running statistics merged from every actor (ARS v2).
        "observation_filter": "MeanStdFilter",
        # float32 entries of the shared noise table (250M: 1 GB in the object store).
        "noise_size": 250000000,
        # Probability that an actor runs an episode of theta itself (no noise) instead of
        # a pair; those returns are episode_reward_mean.
        "eval_prob": 0.03,
        # episode_reward_mean averages the last report_length iterations' mean return.
        "report_length": 10,
        # |offset| is subtracted from every step's reward of the noisy episodes (the
        # paper's removal of a survival bonus); reported returns are not shifted.
        "offset": 0,
    },
    {},
    "ARS",
))


class SGD:
    """SGD with momentum on a flat vector; ``update`` descends ``gradient``."""

    def __init__(self, dim: int, stepsize: float, momentum: float = 0.9) -> None:
        self.stepsize, self.momentum = stepsize, momentum
        self.v = np.zeros(dim, dtype=np.float32)

    def update(self, theta: np.ndarray, gradient: np.ndarray) -> tuple[np.ndarray, float]:
        """Returns ``(theta + step, |step| / |theta + step|)``."""
        self.v = self.momentum * self.v + (1.0 - self.momentum) * gradient
        step = -self.stepsize * self.v
        new_theta = (theta + step).astype(np.float32)
        return new_theta, float(np.linalg.norm(step) / max(np.linalg.norm(new_theta), 1e-12))


def top_directions(noisy_returns: np.ndarray, rollouts_used: int) -> np.ndarray:
    """Indices of the ``rollouts_used`` directions with the largest ``max(r+, r-)``
    (all of them if fewer), best first; ties keep the earlier direction.

    Examples:
        >>> top_directions(np.array([[1.0, 5.0], [3.0, 2.0], [0.0, 9.0]]), 2)
        array([2, 0])
    """
    best = np.max(noisy_returns, axis=1)
    return np.argsort(-best, kind="stable")[:min(rollouts_used, len(best))]


def ars_gradient(noise: np.ndarray, noise_indices: np.ndarray, noisy_returns: np.ndarray, dim: int,
                 rollouts_used: int) -> np.ndarray:
    """ARS v2's ascent direction: ``sum_k (r_k+ - r_k-) * delta_k / (b * sigma_R)`` over the
    top ``b`` directions, ``sigma_R`` the std of their 2b returns (1 if they are all equal)."""
    kept = top_directions(noisy_returns, rollouts_used)
    returns = noisy_returns[kept]
    gradient = np.zeros(dim, dtype=np.float64)
    for weight, index in zip(returns[:, 0] - returns[:, 1], noise_indices[kept]):
        gradient += weight * noise_slice(noise, int(index), dim)
    std = float(np.std(returns))
    return (gradient / len(kept) / (std if std > 0 else 1.0)).astype(np.float32)


class ARSTrainer(EvolutionTrainer):
    """Augmented random search with the classic RLlib API.

    Examples:
        >>> from rlstack.trainers.ars import ARSTrainer, DEFAULT_CONFIG
        >>> DEFAULT_CONFIG["num_rollouts"], DEFAULT_CONFIG["rollouts_used"]
        (32, 32)
    """

    _name = "ARS"
    _default_config = DEFAULT_CONFIG

    @classmethod
    def validate_config(cls, config: dict[str, Any]) -> None:
        super().validate_config(config)
        for key in ("num_rollouts", "rollouts_used"):
            if not isinstance(config[key], int) or config[key] < 1:
                raise ConfigError(f"{key}={config[key]!r}: must be an int >= 1.")
        for key in ("sgd_stepsize", "action_noise_std", "offset"):
            if not isinstance(config[key], (int, float)) or (key != "offset" and config[key] < 0):
                raise ConfigError(f"{key}={config[key]!r}: must be a number{' >= 0' if key != 'offset' else ''}.")
        if not config["sgd_stepsize"]:
            raise ConfigError("sgd_stepsize=0: the step size must be > 0 (1.13's default is 0.01).")

    policy_classes = {"torch": "rlstack.trainers.ars.ars_torch_policy:ARSTorchPolicy",
                      "tf": "rlstack.trainers.ars.ars_tf_policy:ARSTFPolicy"}

    def setup(self, config: dict[str, Any]) -> None:
        super().setup(config)
        self.optimizer = SGD(sum(self.learner_policy.get_weights()[n].size for n in self._weight_names),
                             self.config["sgd_stepsize"])

    def batch_minimums(self) -> tuple[int, int]:
        return self.config["num_rollouts"], 0

    def reward_offset(self) -> float:
        return float(self.config["offset"])

    def update(self, theta: np.ndarray, noise_indices: np.ndarray, noisy_returns: np.ndarray
               ) -> tuple[np.ndarray, dict[str, float]]:
        g = ars_gradient(self._noise, noise_indices, noisy_returns, theta.size, self.config["rollouts_used"])
        new_theta, update_ratio = self.optimizer.update(theta, -g)
        return new_theta, {"grad_norm": float(np.linalg.norm(g)), "update_ratio": update_ratio}

    def extra_checkpoint_arrays(self) -> dict[str, dict[str, np.ndarray]]:
        return {"ars_optimizer": {"v": self.optimizer.v}}

    def restore_extra_arrays(self, arrays: dict[str, dict[str, np.ndarray]]) -> None:
        state = arrays.get("ars_optimizer")
        if state:
            self.optimizer.v = np.array(state["v"])
