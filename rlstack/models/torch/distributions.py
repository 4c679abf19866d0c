"""Action distributions in torch; the TF twins in models/tf/distributions.py match them."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from rlstack.models.catalog import ActionDistSpec


class Categorical:
    """A categorical distribution over ``n`` actions from unnormalised logits ``[B, n]``."""

    def __init__(self, inputs: torch.Tensor, spec: ActionDistSpec) -> None:
        self.logits = inputs
        self.log_probs = F.log_softmax(inputs, dim=-1)

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        """Draws one action per row (from ``generator``, or torch's global one)."""
        return torch.multinomial(self.log_probs.exp(), 1, generator=generator).squeeze(-1)

    def deterministic_sample(self) -> torch.Tensor:
        """The most likely action per row (the mode)."""
        return self.logits.argmax(dim=-1)

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        """Log-probability (density) of ``actions`` per row."""
        return self.log_probs.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)

    def entropy(self) -> torch.Tensor:
        """Entropy per row."""
        return -(self.log_probs.exp() * self.log_probs).sum(-1)

    def kl(self, other: "Categorical") -> torch.Tensor:
        """KL(self || other)."""
        return (self.log_probs.exp() * (self.log_probs - other.log_probs)).sum(-1)


class MultiCategorical:
    """Independent categoricals, one per entry of a MultiDiscrete action."""

    def __init__(self, inputs: torch.Tensor, spec: ActionDistSpec) -> None:
        self.cats = [Categorical(part, spec) for part in torch.split(inputs, list(spec.nvec), dim=-1)]

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        """Draws one action per row (from ``generator``, or torch's global one)."""
        return torch.stack([cat.sample(generator) for cat in self.cats], dim=-1)

    def deterministic_sample(self) -> torch.Tensor:
        """The most likely action per row (the mode)."""
        return torch.stack([cat.deterministic_sample() for cat in self.cats], dim=-1)

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        """Log-probability (density) of ``actions`` per row."""
        return sum(cat.logp(actions[:, i]) for i, cat in enumerate(self.cats))

    def entropy(self) -> torch.Tensor:
        """Entropy per row."""
        return sum(cat.entropy() for cat in self.cats)

    def kl(self, other: "MultiCategorical") -> torch.Tensor:
        """KL(self || other) per row."""
        return sum(a.kl(b) for a, b in zip(self.cats, other.cats))


class DiagGaussian:
    """A Gaussian with diagonal covariance; inputs are ``[means, log_stds]``."""

    def __init__(self, inputs: torch.Tensor, spec: ActionDistSpec) -> None:
        self.mean, self.log_std = torch.chunk(inputs, 2, dim=-1)
        self.std = self.log_std.exp()

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        """Draws one action per row (from ``generator``, or torch's global one)."""
        noise = torch.randn(self.mean.shape, generator=generator, device=self.mean.device, dtype=self.mean.dtype)
        return self.mean + self.std * noise

    def deterministic_sample(self) -> torch.Tensor:
        """The most likely action per row (the mode)."""
        return self.mean

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        """Log-probability (density) of ``actions`` per row."""
        actions = actions.reshape(self.mean.shape)
        return (
            -0.5 * (((actions - self.mean) / self.std) ** 2).sum(-1)
            - 0.5 * math.log(2.0 * math.pi) * self.mean.shape[-1]
            - self.log_std.sum(-1)
        )

    def entropy(self) -> torch.Tensor:
        """Entropy per row."""
        return (self.log_std + 0.5 * math.log(2.0 * math.pi * math.e)).sum(-1)

    def kl(self, other: "DiagGaussian") -> torch.Tensor:
        """KL(self || other) per row."""
        return (
            other.log_std - self.log_std
            + (self.std**2 + (self.mean - other.mean) ** 2) / (2.0 * other.std**2)
            - 0.5
        ).sum(-1)


DISTRIBUTIONS = {"categorical": Categorical, "multi_categorical": MultiCategorical, "diag_gaussian": DiagGaussian}
