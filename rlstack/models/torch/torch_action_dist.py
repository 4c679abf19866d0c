"""Torch action distributions with classic RLlib 1.13's interface.

``TorchDistributionWrapper(inputs, model)`` is the base of users' custom distributions
(``ModelCatalog.register_custom_action_dist``); ``TorchCategorical``,
``TorchMultiCategorical``, ``TorchDiagGaussian`` and ``TorchSquashedGaussian`` (SAC's
actor) are the built-in ones, which the policies use too (``models/torch/distributions.py``
names them for the policies). The TF twins in ``models/tf`` compute the same formulas.

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


# Bounds of the squashed Gaussian's log std (1.13's MIN/MAX_LOG_NN_OUTPUT as SAC used them).
LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0
# Keeps atanh finite for actions on the bounds.
_ATANH_LIMIT = 1.0 - 1e-6


class TorchSquashedGaussian(TorchDistributionWrapper):
    """``tanh`` of a diagonal Gaussian, mapped linearly from [-1, 1] onto [low, high]
    (SAC's policy; Haarnoja et al. 2018, appendix C).

    Inputs are ``[means, log_stds]`` (log stds clipped to [-20, 2]). For ``u ~ N(mean, std)``
    and ``a = tanh(u)``, ``log p(a) = log N(u) - sum log(1 - tanh(u)^2)``, with the
    correction computed stably as ``2 * (log 2 - u - softplus(-2 u))``. As in 1.13, the
    density is that of the action rescaled to [-1, 1] (the linear map onto the bounds
    adds no term), so target entropies mean the same whatever the bounds.

    Args:
        inputs: ``[B, 2 * action_dim]``.
        model: The model (or an ActionDistSpec); unused.
        low: Lower bound(s) of the actions.
        high: Upper bound(s) of the actions.
    """

    def __init__(self, inputs: torch.Tensor, model: Any = None, low: Any = -1.0, high: Any = 1.0) -> None:
        super().__init__(inputs, model)
        mean, log_std = torch.chunk(inputs, 2, dim=-1)
        self.mean = mean
        self.log_std = torch.clamp(log_std, LOG_STD_MIN, LOG_STD_MAX)
        self.std = self.log_std.exp()
        self.low, self.high = low, high
        self._unit = np.all(np.asarray(low) == -1.0) and np.all(np.asarray(high) == 1.0)
        self._last_logp: torch.Tensor | None = None

    def _squash(self, u: torch.Tensor) -> torch.Tensor:
        a = torch.tanh(u)
        if self._unit:
            return a
        low = torch.as_tensor(self.low, dtype=a.dtype, device=a.device)
        high = torch.as_tensor(self.high, dtype=a.dtype, device=a.device)
        return low + (a + 1.0) * 0.5 * (high - low)

    def _logp_of_u(self, u: torch.Tensor) -> torch.Tensor:
        gaussian = (-0.5 * ((u - self.mean) / self.std) ** 2 - self.log_std - 0.5 * math.log(2.0 * math.pi)).sum(-1)
        # log(1 - tanh(u)^2) = 2 * (log 2 - u - softplus(-2u)), finite for any u.
        log_det = (2.0 * (math.log(2.0) - u - F.softplus(-2.0 * u))).sum(-1)
        return gaussian - log_det

    def sample_with_logp(self, generator: torch.Generator | None = None,
                         noise: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """A reparameterised draw and its log-density: ``u = mean + std * noise`` (noise
        from ``generator`` unless given), ``(squash(u), log p)``; gradients flow to the
        inputs through both (SAC's actor loss)."""
        if noise is None:
            noise = torch.randn(self.mean.shape, generator=generator, device=self.mean.device, dtype=self.mean.dtype)
        u = self.mean + self.std * noise
        self.last_sample, self._last_logp = self._squash(u), self._logp_of_u(u)
        return self.last_sample, self._last_logp

    def sample_with_logp_input_grad(self, noise: torch.Tensor, grad_sample: torch.Tensor,
                                    grad_logp: torch.Tensor) -> torch.Tensor:
        """The chain rule through :meth:`sample_with_logp` ``(noise=noise)``: d loss /
        d inputs ``[B, 2 * action_dim]`` from d loss / d sample ``[B, action_dim]`` and
        d loss / d log p ``[B]`` (what SAC's closed-form gradient needs; no autograd).

        With ``u = mean + std * noise``, ``a = squash(u)`` and ``log p = sum(-noise^2 / 2 -
        log_std - log(2 pi) / 2) - sum log(1 - tanh(u)^2)`` (the Gaussian term's ``u - mean``
        is ``std * noise``, free of ``mean``)::

            d log p / d u       = 2 tanh(u)          (the tanh correction's derivative)
            d loss / d u        = g_a * d squash / d u + g_logp * 2 tanh(u)
            d loss / d mean     = d loss / d u
            d loss / d log_std  = (d loss / d u * std * noise - g_logp) * [log_std unclipped]

        where ``d squash / d u = (1 - tanh(u)^2) * (high - low) / 2``.
        """
        u = self.mean + self.std * noise
        tanh_u = torch.tanh(u)
        grad_logp = grad_logp.unsqueeze(1)
        dsquash_du = 1.0 - tanh_u * tanh_u
        if not self._unit:
            low = torch.as_tensor(self.low, dtype=u.dtype, device=u.device)
            high = torch.as_tensor(self.high, dtype=u.dtype, device=u.device)
            dsquash_du = dsquash_du * (0.5 * (high - low))
        grad_u = grad_sample * dsquash_du + 2.0 * grad_logp * tanh_u
        grad_log_std = grad_u * self.std * noise - grad_logp
        # clamp passes the gradient where the raw log-std lies within [min, max].
        raw_log_std = self.inputs[:, self.mean.shape[1]:]
        grad_log_std = grad_log_std * ((raw_log_std >= LOG_STD_MIN) & (raw_log_std <= LOG_STD_MAX))
        return torch.cat([grad_u, grad_log_std], dim=1)

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        """Draws one action per row (from ``generator``, or torch's global one)."""
        return self.sample_with_logp(generator)[0]

    def deterministic_sample(self) -> torch.Tensor:
        """``squash(mean)``: the action SAC takes without exploration."""
        self.last_sample, self._last_logp = self._squash(self.mean), self._logp_of_u(self.mean)
        return self.last_sample

    def sampled_action_logp(self) -> torch.Tensor:
        """Log-density of the last sample, computed from its pre-tanh value (exact even
        where ``atanh`` of the action would overflow)."""
        if self._last_logp is None:
            raise ValueError("sampled_action_logp() needs a sample() or deterministic_sample() first.")
        return self._last_logp

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        """Log-density of ``actions`` (in [low, high]) per row."""
        actions = actions.reshape(self.mean.shape)
        if not self._unit:
            low = torch.as_tensor(self.low, dtype=actions.dtype, device=actions.device)
            high = torch.as_tensor(self.high, dtype=actions.dtype, device=actions.device)
            actions = 2.0 * (actions - low) / (high - low) - 1.0
        return self._logp_of_u(torch.atanh(torch.clamp(actions, -_ATANH_LIMIT, _ATANH_LIMIT)))

    def entropy(self) -> torch.Tensor:
        """Not defined in closed form (SAC estimates it from samples: ``-log p``)."""
        raise ValueError("A squashed Gaussian has no closed-form entropy; use -logp of samples.")

    def kl(self, other: "TorchSquashedGaussian") -> torch.Tensor:
        """Not defined in closed form."""
        raise ValueError("A squashed Gaussian has no closed-form KL divergence.")

    @staticmethod
    def required_model_output_shape(action_space: gym.Space, model_config: dict | None) -> int:
        return 2 * int(np.prod(action_space.shape))


class TorchMultiActionDistribution(TorchDistributionWrapper):
    """One built-in distribution per leaf of a Tuple / Dict action space (classic RLlib's
    ``TorchMultiActionDistribution``), acting with flat action vectors: each leaf's part
    side by side (``rlstack.utils.spaces.space_utils.FlatActionLayout``). Log-likelihoods,
    entropies and KLs are the sums over the leaves.

    Args:
        inputs: The leaves' inputs, concatenated ``[B, num_outputs]``.
        model: The catalog's ``multi_action`` ActionDistSpec, or a model whose
            ``action_space`` is the Tuple / Dict space.
    """

    def __init__(self, inputs: torch.Tensor, model: Any = None) -> None:
        super().__init__(inputs, model)
        spec = model if isinstance(model, ActionDistSpec) else _multi_action_spec(model)
        self.spec = spec
        sizes = [child.num_outputs for child in spec.children]
        self.children = [_LEAF_DISTRIBUTIONS[child.kind](part, child)
                         for part, child in zip(torch.split(inputs, sizes, dim=-1), spec.children)]
        self.widths = list(spec.layout.widths)

    def _flat(self, parts: list[torch.Tensor]) -> torch.Tensor:
        dtype = torch.int64 if self.spec.layout.discrete else self.inputs.dtype
        return torch.cat([part.reshape(len(part), -1).to(dtype) for part in parts], dim=-1)

    def _leaf_actions(self, actions: torch.Tensor) -> list[torch.Tensor]:
        parts = torch.split(actions.reshape(len(actions), -1), self.widths, dim=-1)
        return [part[:, 0] if child.kind == "categorical" else part for part, child in zip(parts, self.spec.children)]

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        """Draws one flat action per row (from ``generator``, or torch's global one)."""
        self.last_sample = self._flat([child.sample(generator) for child in self.children])
        return self.last_sample

    def deterministic_sample(self) -> torch.Tensor:
        self.last_sample = self._flat([child.deterministic_sample() for child in self.children])
        return self.last_sample

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        return sum(child.logp(part) for child, part in zip(self.children, self._leaf_actions(actions)))

    def entropy(self) -> torch.Tensor:
        return sum(child.entropy() for child in self.children)

    def kl(self, other: "TorchMultiActionDistribution") -> torch.Tensor:
        return sum(a.kl(b) for a, b in zip(self.children, other.children))

    @staticmethod
    def required_model_output_shape(action_space: gym.Space, model_config: dict | None) -> int:
        from rlstack.models.catalog import action_dist_spec

        return action_dist_spec(action_space).num_outputs


def _multi_action_spec(model: Any) -> ActionDistSpec:
    from rlstack.models.catalog import action_dist_spec

    space = getattr(model, "action_space", None)
    if not isinstance(space, (gym.spaces.Tuple, gym.spaces.Dict)):
        raise ValueError("TorchMultiActionDistribution needs the catalog's ActionDistSpec or a model whose "
                         "action_space is a Tuple or Dict space.")
    return action_dist_spec(space)


# The distribution of each kind of leaf of a Tuple / Dict action space.
_LEAF_DISTRIBUTIONS = {"categorical": TorchCategorical, "multi_categorical": TorchMultiCategorical,
                       "diag_gaussian": TorchDiagGaussian}
