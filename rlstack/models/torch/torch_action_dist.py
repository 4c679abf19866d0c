"""Torch action distributions with classic RLlib 1.13's interface.

``TorchDistributionWrapper(inputs, model)`` is the base of users' custom distributions
(``ModelCatalog.register_custom_action_dist``); ``TorchCategorical``,
``TorchMultiCategorical`` and ``TorchDiagGaussian`` are the built-in ones, which the
policies use too (``models/torch/distributions.py`` names them for the policies). The
TF twins in ``models/tf`` compute the same formulas.

The second constructor argument is the model (as in RLlib) or the catalog's
:class:`~rlstack.models.catalog.ActionDistSpec` (what the policies pass: no per-call
work to find the category counts).
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F

from rlstack.models.catalog import ActionDistSpec


class TorchDistributionWrapper:
    """Base of torch action distributions (classic RLlib's ``TorchDistributionWrapper``).

    Args:
        inputs: The model's outputs ``[B, num_outputs]``.
        model: The model that produced them (or the catalog's ActionDistSpec).
    """

    def __init__(self, inputs: torch.Tensor, model: Any = None) -> None:
        self.inputs = inputs
        self.model = model
        self.last_sample: torch.Tensor | None = None

    def sample(self) -> torch.Tensor:
        """Draws one action per row."""
        raise NotImplementedError

    def deterministic_sample(self) -> torch.Tensor:
        """The most likely action per row."""
        raise NotImplementedError

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        """Log-likelihood of ``actions`` per row."""
        raise NotImplementedError

    def entropy(self) -> torch.Tensor:
        """Entropy per row."""
        raise NotImplementedError

    def kl(self, other: "TorchDistributionWrapper") -> torch.Tensor:
        """KL(self || other) per row."""
        raise NotImplementedError

    def sampled_action_logp(self) -> torch.Tensor:
        """Log-likelihood of the last :meth:`sample` (or :meth:`deterministic_sample`)."""
        if self.last_sample is None:
            raise ValueError("sampled_action_logp() needs a sample() or deterministic_sample() first.")
        return self.logp(self.last_sample)

    @staticmethod
    def required_model_output_shape(action_space: gym.Space, model_config: dict | None) -> int:
        """The model output size this distribution needs for ``action_space``."""
        raise NotImplementedError


class TorchCategorical(TorchDistributionWrapper):
    """A categorical over ``n`` actions from unnormalised logits ``[B, n]``.

    Args:
        inputs: The logits.
        model: The model (or an ActionDistSpec); unused.
        temperature: Logits are divided by it (classic RLlib's argument).
    """

    def __init__(self, inputs: torch.Tensor, model: Any = None, temperature: float = 1.0) -> None:
        if temperature != 1.0:
            inputs = inputs / temperature
        super().__init__(inputs, model)
        self.logits = inputs
        self.log_probs = F.log_softmax(inputs, dim=-1)

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        """Draws one action per row (from ``generator``, or torch's global one)."""
        self.last_sample = torch.multinomial(self.log_probs.exp(), 1, generator=generator).squeeze(-1)
        return self.last_sample

    def deterministic_sample(self) -> torch.Tensor:
        self.last_sample = self.logits.argmax(dim=-1)
        return self.last_sample

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        return self.log_probs.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)

    def entropy(self) -> torch.Tensor:
        return -(self.log_probs.exp() * self.log_probs).sum(-1)

    def kl(self, other: "TorchCategorical") -> torch.Tensor:
        return (self.log_probs.exp() * (self.log_probs - other.log_probs)).sum(-1)

    @staticmethod
    def required_model_output_shape(action_space: gym.Space, model_config: dict | None) -> int:
        return int(action_space.n)


def _nvec(model: Any, input_lens: Any) -> tuple[int, ...]:
    if input_lens is not None:
        return tuple(int(n) for n in input_lens)
    if isinstance(model, ActionDistSpec):
        return model.nvec
    space = getattr(model, "action_space", None)
    if isinstance(space, gym.spaces.MultiDiscrete):
        return tuple(int(n) for n in np.asarray(space.nvec).reshape(-1))
    raise ValueError("TorchMultiCategorical needs input_lens (the category counts) or a model whose "
                     "action_space is MultiDiscrete.")


class TorchMultiCategorical(TorchDistributionWrapper):
    """Independent categoricals, one per entry of a MultiDiscrete action.

    Args:
        inputs: The logits of every entry, concatenated ``[B, sum(nvec)]``.
        model: The model (its MultiDiscrete ``action_space`` gives the counts) or an
            ActionDistSpec.
        input_lens: The category counts (classic RLlib's argument; default: from
            ``model``).
    """

    def __init__(self, inputs: torch.Tensor, model: Any = None, input_lens: Any = None) -> None:
        super().__init__(inputs, model)
        self.cats = [TorchCategorical(part) for part in torch.split(inputs, list(_nvec(model, input_lens)), dim=-1)]

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        """Draws one action per row (from ``generator``, or torch's global one)."""
        self.last_sample = torch.stack([cat.sample(generator) for cat in self.cats], dim=-1)
        return self.last_sample

    def deterministic_sample(self) -> torch.Tensor:
        self.last_sample = torch.stack([cat.deterministic_sample() for cat in self.cats], dim=-1)
        return self.last_sample

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        return sum(cat.logp(actions[:, i]) for i, cat in enumerate(self.cats))

    def entropy(self) -> torch.Tensor:
        return sum(cat.entropy() for cat in self.cats)

    def kl(self, other: "TorchMultiCategorical") -> torch.Tensor:
        return sum(a.kl(b) for a, b in zip(self.cats, other.cats))

    @staticmethod
    def required_model_output_shape(action_space: gym.Space, model_config: dict | None) -> int:
        return int(np.sum(action_space.nvec))


class TorchDiagGaussian(TorchDistributionWrapper):
    """A Gaussian with diagonal covariance; inputs are ``[means, log_stds]``."""

    def __init__(self, inputs: torch.Tensor, model: Any = None) -> None:
        super().__init__(inputs, model)
        self.mean, self.log_std = torch.chunk(inputs, 2, dim=-1)
        self.std = self.log_std.exp()

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        """Draws one action per row (from ``generator``, or torch's global one)."""
        noise = torch.randn(self.mean.shape, generator=generator, device=self.mean.device, dtype=self.mean.dtype)
        self.last_sample = self.mean + self.std * noise
        return self.last_sample

    def deterministic_sample(self) -> torch.Tensor:
        self.last_sample = self.mean
        return self.last_sample

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        actions = actions.reshape(self.mean.shape)
        return (
            -0.5 * (((actions - self.mean) / self.std) ** 2).sum(-1)
            - 0.5 * math.log(2.0 * math.pi) * self.mean.shape[-1]
            - self.log_std.sum(-1)
        )

    def entropy(self) -> torch.Tensor:
        return (self.log_std + 0.5 * math.log(2.0 * math.pi * math.e)).sum(-1)

    def kl(self, other: "TorchDiagGaussian") -> torch.Tensor:
        return (
            other.log_std - self.log_std
            + (self.std**2 + (self.mean - other.mean) ** 2) / (2.0 * other.std**2)
            - 0.5
        ).sum(-1)

    @staticmethod
    def required_model_output_shape(action_space: gym.Space, model_config: dict | None) -> int:
        return 2 * int(np.prod(action_space.shape))
