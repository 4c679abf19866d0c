"""Action distributions in numpy (sampling and log-likelihoods for rollout workers).

They match models/torch/distributions.py and models/tf/distributions.py in what they
compute; the learner recomputes log-likelihoods in its framework.
"""

from __future__ import annotations

import math

import numpy as np

from rlstack.models.catalog import ActionDistSpec


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


class Categorical:
    """A categorical distribution over ``n`` actions from unnormalised logits ``[B, n]``."""

    def __init__(self, inputs: np.ndarray, spec: ActionDistSpec) -> None:
        self.logits = inputs
        self.log_probs = _log_softmax(inputs.astype(np.float64))

    def sample(self, rng: np.random.Generator) -> np.ndarray:
        """Draws one action per row (inverse-CDF sampling)."""
        cdf = np.cumsum(np.exp(self.log_probs), axis=-1)
        draws = rng.random((cdf.shape[0], 1)) * cdf[:, -1:]
        return np.minimum((draws >= cdf).sum(axis=-1), cdf.shape[-1] - 1).astype(np.int64)

    def deterministic_sample(self) -> np.ndarray:
        """The most likely action per row."""
        return self.logits.argmax(axis=-1).astype(np.int64)

    def logp(self, actions: np.ndarray) -> np.ndarray:
        """Log-probability of ``actions`` per row."""
        return np.take_along_axis(self.log_probs, actions[:, None].astype(np.int64), axis=-1)[:, 0].astype(np.float32)


class MultiCategorical:
    """Independent categoricals, one per entry of a MultiDiscrete action."""

    def __init__(self, inputs: np.ndarray, spec: ActionDistSpec) -> None:
        splits = np.cumsum(spec.nvec)[:-1]
        self.cats = [Categorical(part, spec) for part in np.split(inputs, splits, axis=-1)]

    def sample(self, rng: np.random.Generator) -> np.ndarray:
        """Draws one action vector per row."""
        return np.stack([cat.sample(rng) for cat in self.cats], axis=-1)

    def deterministic_sample(self) -> np.ndarray:
        """The most likely action vector per row."""
        return np.stack([cat.deterministic_sample() for cat in self.cats], axis=-1)

    def logp(self, actions: np.ndarray) -> np.ndarray:
        """Log-probability of ``actions`` per row."""
        return sum(cat.logp(actions[:, i]) for i, cat in enumerate(self.cats))


class DiagGaussian:
    """A Gaussian with diagonal covariance; inputs are ``[means, log_stds]``."""

    def __init__(self, inputs: np.ndarray, spec: ActionDistSpec) -> None:
        self.mean, self.log_std = np.split(inputs, 2, axis=-1)
        self.std = np.exp(self.log_std)

    def sample(self, rng: np.random.Generator) -> np.ndarray:
        """Draws one action per row."""
        return (self.mean + self.std * rng.standard_normal(self.mean.shape)).astype(np.float32)

    def deterministic_sample(self) -> np.ndarray:
        """The mean action per row."""
        return self.mean

    def logp(self, actions: np.ndarray) -> np.ndarray:
        """Log-density of ``actions`` per row."""
        actions = actions.reshape(self.mean.shape)
        return (
            -0.5 * (((actions - self.mean) / self.std) ** 2).sum(-1)
            - 0.5 * math.log(2.0 * math.pi) * self.mean.shape[-1]
            - self.log_std.sum(-1)
        ).astype(np.float32)


class MultiAction:
    """One distribution per leaf of a Tuple / Dict action space, acting with flat action
    vectors (each leaf's part side by side); log-likelihoods are the leaves' sum."""

    def __init__(self, inputs: np.ndarray, spec: ActionDistSpec) -> None:
        self.spec = spec
        splits = np.cumsum([child.num_outputs for child in spec.children])[:-1]
        self.children = [DISTRIBUTIONS[child.kind](part, child)
                         for part, child in zip(np.split(inputs, splits, axis=-1), spec.children)]

    def _flat(self, parts: list[np.ndarray]) -> np.ndarray:
        dtype = np.int64 if self.spec.layout.discrete else np.float32
        return np.concatenate([np.asarray(part).reshape(len(part), -1).astype(dtype) for part in parts], axis=1)

    def sample(self, rng: np.random.Generator) -> np.ndarray:
        """Draws one flat action per row."""
        return self._flat([child.sample(rng) for child in self.children])

    def deterministic_sample(self) -> np.ndarray:
        """The most likely flat action per row."""
        return self._flat([child.deterministic_sample() for child in self.children])

    def logp(self, actions: np.ndarray) -> np.ndarray:
        """Log-probability of flat ``actions`` per row."""
        parts = self.spec.layout.split(actions)
        return sum(child.logp(part[:, 0] if spec.kind == "categorical" else part)
                   for child, part, spec in zip(self.children, parts, self.spec.children)).astype(np.float32)


DISTRIBUTIONS = {"categorical": Categorical, "multi_categorical": MultiCategorical, "diag_gaussian": DiagGaussian,
                 "multi_action": MultiAction}


class SquashedGaussian:
    """``tanh`` of a diagonal Gaussian (SAC's actor), acting in [-1, 1]; inputs are
    ``[means, log_stds]``, log stds clipped to [-20, 2]. The twin of
    ``models/torch/torch_action_dist.TorchSquashedGaussian`` (see there for the formulas)."""

    def __init__(self, inputs: np.ndarray, spec: ActionDistSpec | None = None) -> None:
        self.mean, log_std = np.split(inputs, 2, axis=-1)
        self.log_std = np.clip(log_std, -20.0, 2.0)
        self.std = np.exp(self.log_std)

    def sample(self, rng: np.random.Generator) -> np.ndarray:
        """Draws one action per row."""
        return np.tanh(self.mean + self.std * rng.standard_normal(self.mean.shape)).astype(np.float32)

    def deterministic_sample(self) -> np.ndarray:
        """``tanh(mean)`` per row."""
        return np.tanh(self.mean).astype(np.float32)

    def logp(self, actions: np.ndarray) -> np.ndarray:
        """Log-density of ``actions`` in [-1, 1] per row."""
        u = np.arctanh(np.clip(np.asarray(actions, np.float64).reshape(self.mean.shape), -1 + 1e-6, 1 - 1e-6))
        gaussian = (-0.5 * ((u - self.mean) / self.std) ** 2 - self.log_std - 0.5 * math.log(2.0 * math.pi)).sum(-1)
        # log(1 - tanh(u)^2) = 2 * (log 2 - u - softplus(-2u)); softplus(x) = logaddexp(0, x).
        log_det = (2.0 * (math.log(2.0) - u - np.logaddexp(0.0, -2.0 * u))).sum(-1)
        return (gaussian - log_det).astype(np.float32)
