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

    def sample(self) -> torch.Tensor:
        return torch.multinomial(self.log_probs.exp(), 1).squeeze(-1)

    def deterministic_sample(self) -> torch.Tensor:
        return self.logits.argmax(dim=-1)

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        return self.log_probs.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)

    def entropy(self) -> torch.Tensor:
        return -(self.log_probs.exp() * self.log_probs).sum(-1)

    def kl(self, other: "Categorical") -> torch.Tensor:
        """KL(self || other)."""
        return (self.log_probs.exp() * (self.log_probs - other.log_probs)).sum(-1)


class MultiCategorical:
    """Independent categoricals, one per entry of a MultiDiscrete action."""

    def __init__(self, inputs: torch.Tensor, spec: ActionDistSpec) -> None:
        self.cats = [Categorical(part, spec) for part in torch.split(inputs, list(spec.nvec), dim=-1)]

    def sample(self) -> torch.Tensor:
        return torch.stack([cat.sample() for cat in self.cats], dim=-1)

    def deterministic_sample(self) -> torch.Tensor:
        return torch.stack([cat.deterministic_sample() for cat in self.cats], dim=-1)

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        return sum(cat.logp(actions[:, i]) for i, cat in enumerate(self.cats))

    def entropy(self) -> torch.Tensor:
        return sum(cat.entropy() for cat in self.cats)

    def kl(self, other: "MultiCategorical") -> torch.Tensor:
        return sum(a.kl(b) for a, b in zip(self.cats, other.cats))


class DiagGaussian:
    """A Gaussian with diagonal covariance; inputs are ``[means, log_stds]``."""

    def __init__(self, inputs: torch.Tensor, spec: ActionDistSpec) -> None:
        self.mean, self.log_std = torch.chunk(inputs, 2, dim=-1)
        self.std = self.log_std.exp()

    def sample(self) -> torch.Tensor:
        return self.mean + self.std * torch.randn_like(self.mean)

    def deterministic_sample(self) -> torch.Tensor:
        return self.mean

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        actions = actions.reshape(self.mean.shape)
        return (
            -0.5 * (((actions - self.mean) / self.std) ** 2).sum(-1)
            - 0.5 * math.log(2.0 * math.pi) * self.mean.shape[-1]
            - self.log_std.sum(-1)
        )

    def entropy(self) -> torch.Tensor:
        return (self.log_std + 0.5 * math.log(2.0 * math.pi * math.e)).sum(-1)

    def kl(self, other: "DiagGaussian") -> torch.Tensor:
        return (
            other.log_std - self.log_std
            + (self.std**2 + (self.mean - other.mean) ** 2) / (2.0 * other.std**2)
            - 0.5
        ).sum(-1)


DISTRIBUTIONS = {"categorical": Categorical, "multi_categorical": MultiCategorical, "diag_gaussian": DiagGaussian}
