"""Action distributions in TensorFlow, twins of models/torch/distributions.py.

The classes have classic RLlib's interface (``cls(inputs, model)``, public as
:mod:`rlstack.models.tf.tf_action_dist`), so a user's distribution can subclass
:class:`TFActionDistribution` or one of them and be named in
``config["model"]["custom_action_dist"]``. rlstack's own policies pass their sampling
generator to :meth:`~TFActionDistribution.sample`.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np

from rlstack.models.catalog import ActionDistSpec
from rlstack.models.tf.framework import tf


class TFActionDistribution:
    """Base of TF action distributions (classic RLlib's ``TFActionDistribution``).

    Subclasses define ``logp``, ``entropy``, ``kl``, ``deterministic_sample`` and
    either :meth:`sample` or classic RLlib's ``_build_sample_op``.

    Args:
        inputs: The model's outputs ``[B, num_outputs]`` (the distribution's parameters).
        model: The model that computed them (None where there is none).
    """

    def __init__(self, inputs: tf.Tensor, model: Any = None) -> None:
        self.inputs = inputs
        self.model = model
        self._last_sample: tf.Tensor | None = None

    @staticmethod
    def required_model_output_shape(action_space: gym.Space, model_config: dict) -> int:
        """How many model outputs the distribution reads for ``action_space`` (each
        distribution defines it, as in classic RLlib)."""
        raise NotImplementedError(
            f"A custom action distribution must define required_model_output_shape(action_space, model_config) "
            f"(the model output size it reads for {action_space}).")

    def sample(self, rng: tf.random.Generator | None = None) -> tf.Tensor:
        """Draws one action per row (rlstack's policies pass their generator as ``rng``)."""
        self._last_sample = self._build_sample_op()
        return self._last_sample

    def _build_sample_op(self) -> tf.Tensor:
        raise NotImplementedError(f"{type(self).__name__} must define sample() or _build_sample_op().")

    def sampled_action_logp(self) -> tf.Tensor:
        """The log-probability of the last :meth:`sample` (drawing one if none yet)."""
        if self._last_sample is None:
            self.sample()
        return self.logp(self._last_sample)

    def deterministic_sample(self) -> tf.Tensor:
        """The most likely action per row."""
        raise NotImplementedError

    def logp(self, actions: tf.Tensor) -> tf.Tensor:
        """Log-probability (density) of ``actions`` per row."""
        raise NotImplementedError

    def entropy(self) -> tf.Tensor:
        """Entropy per row."""
        raise NotImplementedError

    def kl(self, other: "TFActionDistribution") -> tf.Tensor:
        """KL(self || other) per row."""
        raise NotImplementedError


class Categorical(TFActionDistribution):
    """A categorical distribution over ``n`` actions from unnormalised logits ``[B, n]``."""

    def __init__(self, inputs: tf.Tensor, model: Any = None, temperature: float = 1.0) -> None:
        super().__init__(inputs, model)
        self.logits = inputs if temperature == 1.0 else inputs / temperature
        self.log_probs = tf.nn.log_softmax(self.logits, axis=-1)

    @staticmethod
    def required_model_output_shape(action_space: gym.Space, model_config: dict) -> int:
        return int(action_space.n)

    def sample(self, rng: tf.random.Generator | None = None) -> tf.Tensor:
        """Draws one action per row (from ``rng``, or TF's global generator)."""
        rng = rng if rng is not None else tf.random.get_global_generator()
        # Gumbel-max: argmax(logits + Gumbel noise) is a draw from softmax(logits).
        uniform = rng.uniform(tf.shape(self.logits), minval=1e-20, maxval=1.0)
        self._last_sample = tf.argmax(self.logits - tf.math.log(-tf.math.log(uniform)), axis=-1)
        return self._last_sample

    def deterministic_sample(self) -> tf.Tensor:
        """The most likely action per row (the mode)."""
        return tf.argmax(self.logits, axis=-1)

    def logp(self, actions: tf.Tensor) -> tf.Tensor:
        """Log-probability (density) of ``actions`` per row."""
        actions = tf.cast(actions, tf.int32)
        return tf.gather(self.log_probs, actions, axis=1, batch_dims=1)

    def entropy(self) -> tf.Tensor:
        """Entropy per row."""
        return -tf.reduce_sum(tf.exp(self.log_probs) * self.log_probs, axis=-1)

    def kl(self, other: "Categorical") -> tf.Tensor:
        """KL(self || other)."""
        return tf.reduce_sum(tf.exp(self.log_probs) * (self.log_probs - other.log_probs), axis=-1)

class MultiCategorical(TFActionDistribution):
    """Independent categoricals, one per entry of a MultiDiscrete action.

    Args:
        inputs: Logits of every categorical, concatenated.
        model: The model (its ``action_space.nvec`` gives ``input_lens`` when omitted).
        input_lens: The number of categories of each entry.
    """

    def __init__(self, inputs: tf.Tensor, model: Any = None, input_lens: Any = None) -> None:
        super().__init__(inputs, model)
        if input_lens is None:
            input_lens = np.asarray(getattr(getattr(model, "action_space", None), "nvec", [inputs.shape[-1]]))
        self.input_lens = [int(n) for n in np.asarray(input_lens).reshape(-1)]
        self.cats = [Categorical(part, model) for part in tf.split(inputs, self.input_lens, axis=-1)]

    @staticmethod
    def required_model_output_shape(action_space: gym.Space, model_config: dict) -> int:
        return int(np.sum(action_space.nvec))

    def sample(self, rng: tf.random.Generator | None = None) -> tf.Tensor:
        """Draws one action per row (from ``rng``, or TF's global generator)."""
        self._last_sample = tf.stack([cat.sample(rng) for cat in self.cats], axis=-1)
        return self._last_sample

    def deterministic_sample(self) -> tf.Tensor:
        """The most likely action per row (the mode)."""
        return tf.stack([cat.deterministic_sample() for cat in self.cats], axis=-1)

    def logp(self, actions: tf.Tensor) -> tf.Tensor:
        """Log-probability (density) of ``actions`` per row."""
        return tf.add_n([cat.logp(actions[:, i]) for i, cat in enumerate(self.cats)])

    def entropy(self) -> tf.Tensor:
        """Entropy per row."""
        return tf.add_n([cat.entropy() for cat in self.cats])

    def kl(self, other: "MultiCategorical") -> tf.Tensor:
        """KL(self || other) per row."""
        return tf.add_n([a.kl(b) for a, b in zip(self.cats, other.cats)])


class DiagGaussian(TFActionDistribution):
    """A Gaussian with diagonal covariance; inputs are ``[means, log_stds]``."""

    def __init__(self, inputs: tf.Tensor, model: Any = None) -> None:
        super().__init__(inputs, model)
        self.mean, self.log_std = tf.split(inputs, 2, axis=-1)
        self.std = tf.exp(self.log_std)

    @staticmethod
    def required_model_output_shape(action_space: gym.Space, model_config: dict) -> int:
        return 2 * int(np.prod(action_space.shape))

    def sample(self, rng: tf.random.Generator | None = None) -> tf.Tensor:
        """Draws one action per row (from ``rng``, or TF's global generator)."""
        rng = rng if rng is not None else tf.random.get_global_generator()
        self._last_sample = self.mean + self.std * rng.normal(tf.shape(self.mean))
        return self._last_sample

    def deterministic_sample(self) -> tf.Tensor:
        """The most likely action per row (the mode)."""
        return self.mean

    def logp(self, actions: tf.Tensor) -> tf.Tensor:
        """Log-probability (density) of ``actions`` per row."""
        actions = tf.reshape(tf.cast(actions, tf.float32), tf.shape(self.mean))
        dim = tf.cast(tf.shape(self.mean)[-1], tf.float32)
        return (
            -0.5 * tf.reduce_sum(tf.square((actions - self.mean) / self.std), axis=-1)
            - 0.5 * math.log(2.0 * math.pi) * dim
            - tf.reduce_sum(self.log_std, axis=-1)
        )

    def entropy(self) -> tf.Tensor:
        """Entropy per row."""
        return tf.reduce_sum(self.log_std + 0.5 * math.log(2.0 * math.pi * math.e), axis=-1)

    def kl(self, other: "DiagGaussian") -> tf.Tensor:
        """KL(self || other) per row."""
        return tf.reduce_sum(
            other.log_std - self.log_std
            + (tf.square(self.std) + tf.square(self.mean - other.mean)) / (2.0 * tf.square(other.std))
            - 0.5,
            axis=-1,
        )

# Bounds of the squashed Gaussian's log std (1.13's MIN/MAX_LOG_NN_OUTPUT as SAC used them).
LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0
# Keeps atanh finite for actions on the bounds.
_ATANH_LIMIT = 1.0 - 1e-6


class SquashedGaussian(TFActionDistribution):
    """``tanh`` of a diagonal Gaussian, mapped linearly from [-1, 1] onto [low, high]; the
    twin of :class:`rlstack.models.torch.torch_action_dist.TorchSquashedGaussian` (see
    there for the formulas).

    Args:
        inputs: ``[B, 2 * action_dim]``: means and log stds (clipped to [-20, 2]).
        model: The model; unused.
        low: Lower bound(s) of the actions.
        high: Upper bound(s) of the actions.
    """

    def __init__(self, inputs: tf.Tensor, model: Any = None, low: Any = -1.0, high: Any = 1.0) -> None:
        super().__init__(inputs, model)
        mean, log_std = tf.split(inputs, 2, axis=-1)
        self.mean = mean
        self.log_std = tf.clip_by_value(log_std, LOG_STD_MIN, LOG_STD_MAX)
        self.std = tf.exp(self.log_std)
        self.low, self.high = low, high
        self._unit = bool(np.all(np.asarray(low) == -1.0) and np.all(np.asarray(high) == 1.0))
        self._last_logp: tf.Tensor | None = None

    @staticmethod
    def required_model_output_shape(action_space: gym.Space, model_config: dict) -> int:
        return 2 * int(np.prod(action_space.shape))

    def _squash(self, u: tf.Tensor) -> tf.Tensor:
        a = tf.tanh(u)
        if self._unit:
            return a
        low, high = tf.constant(self.low, tf.float32), tf.constant(self.high, tf.float32)
        return low + (a + 1.0) * 0.5 * (high - low)

    def _logp_of_u(self, u: tf.Tensor) -> tf.Tensor:
        gaussian = tf.reduce_sum(-0.5 * tf.square((u - self.mean) / self.std) - self.log_std
                                 - 0.5 * math.log(2.0 * math.pi), axis=-1)
        # log(1 - tanh(u)^2) = 2 * (log 2 - u - softplus(-2u)), finite for any u.
        log_det = tf.reduce_sum(2.0 * (math.log(2.0) - u - tf.nn.softplus(-2.0 * u)), axis=-1)
        return gaussian - log_det

    def sample_with_logp(self, rng: tf.random.Generator | None = None,
                         noise: tf.Tensor | None = None) -> tuple[tf.Tensor, tf.Tensor]:
        """A reparameterised draw and its log-density: ``u = mean + std * noise`` (noise
        from ``rng`` unless given), ``(squash(u), log p)``."""
        if noise is None:
            rng = rng if rng is not None else tf.random.get_global_generator()
            noise = rng.normal(tf.shape(self.mean))
        u = self.mean + self.std * noise
        self._last_sample, self._last_logp = self._squash(u), self._logp_of_u(u)
        return self._last_sample, self._last_logp

    def sample(self, rng: tf.random.Generator | None = None) -> tf.Tensor:
        """Draws one action per row (from ``rng``, or TF's global generator)."""
        return self.sample_with_logp(rng)[0]

    def deterministic_sample(self) -> tf.Tensor:
        """``squash(mean)``: the action SAC takes without exploration."""
        self._last_sample, self._last_logp = self._squash(self.mean), self._logp_of_u(self.mean)
        return self._last_sample

    def sampled_action_logp(self) -> tf.Tensor:
        """Log-density of the last sample, from its pre-tanh value (drawing one if none yet)."""
        if self._last_logp is None:
            self.sample()
        return self._last_logp

    def logp(self, actions: tf.Tensor) -> tf.Tensor:
        """Log-density of ``actions`` (in [low, high]) per row."""
        actions = tf.reshape(tf.cast(actions, tf.float32), tf.shape(self.mean))
        if not self._unit:
            low, high = tf.constant(self.low, tf.float32), tf.constant(self.high, tf.float32)
            actions = 2.0 * (actions - low) / (high - low) - 1.0
        return self._logp_of_u(tf.atanh(tf.clip_by_value(actions, -_ATANH_LIMIT, _ATANH_LIMIT)))

    def entropy(self) -> tf.Tensor:
        """Not defined in closed form (SAC estimates it from samples: ``-log p``)."""
        raise ValueError("A squashed Gaussian has no closed-form entropy; use -logp of samples.")

    def kl(self, other: "SquashedGaussian") -> tf.Tensor:
        """Not defined in closed form."""
        raise ValueError("A squashed Gaussian has no closed-form KL divergence.")


class MultiActionDistribution(TFActionDistribution):
    """One built-in distribution per leaf of a Tuple / Dict action space (classic RLlib's
    ``MultiActionDistribution``), acting with flat action vectors: each leaf's part side
    by side (``rlstack.utils.spaces.space_utils.FlatActionLayout``). Log-likelihoods,
    entropies and KLs are the sums over the leaves.

    Args:
        inputs: The leaves' inputs, concatenated ``[B, num_outputs]``.
        model: The catalog's ``multi_action`` ActionDistSpec, or a model whose
            ``action_space`` is the Tuple / Dict space.
    """

    def __init__(self, inputs: tf.Tensor, model: Any = None) -> None:
        super().__init__(inputs, model)
        if isinstance(model, ActionDistSpec):
            spec = model
        else:
            from rlstack.models.catalog import action_dist_spec

            spec = action_dist_spec(getattr(model, "action_space", None))
        self.spec = spec
        sizes = [child.num_outputs for child in spec.children]
        self.children = [make_distribution(DISTRIBUTIONS[child.kind], part, child)
                         for part, child in zip(tf.split(inputs, sizes, axis=-1), spec.children)]
        self.widths = list(spec.layout.widths)

    @staticmethod
    def required_model_output_shape(action_space: gym.Space, model_config: dict) -> int:
        from rlstack.models.catalog import action_dist_spec

        return action_dist_spec(action_space).num_outputs

    def _flat(self, parts: list[tf.Tensor]) -> tf.Tensor:
        dtype = tf.int64 if self.spec.layout.discrete else tf.float32
        rows = tf.shape(self.inputs)[0]
        return tf.concat([tf.reshape(tf.cast(part, dtype), [rows, -1]) for part in parts], axis=-1)

    def _leaf_actions(self, actions: tf.Tensor) -> list[tf.Tensor]:
        parts = tf.split(tf.reshape(actions, [tf.shape(actions)[0], -1]), self.widths, axis=-1)
        return [part[:, 0] if child.kind == "categorical" else part for part, child in zip(parts, self.spec.children)]

    def sample(self, rng: tf.random.Generator | None = None) -> tf.Tensor:
        """Draws one flat action per row (from ``rng``, or TF's global generator)."""
        self._last_sample = self._flat([child.sample(rng) for child in self.children])
        return self._last_sample

    def deterministic_sample(self) -> tf.Tensor:
        """The most likely flat action per row."""
        return self._flat([child.deterministic_sample() for child in self.children])

    def logp(self, actions: tf.Tensor) -> tf.Tensor:
        """Log-probability (density) of flat ``actions`` per row: the leaves' sum."""
        return tf.add_n([child.logp(part) for child, part in zip(self.children, self._leaf_actions(actions))])

    def entropy(self) -> tf.Tensor:
        """Entropy per row: the leaves' sum."""
        return tf.add_n([child.entropy() for child in self.children])

    def kl(self, other: "MultiActionDistribution") -> tf.Tensor:
        """KL(self || other) per row: the leaves' sum."""
        return tf.add_n([a.kl(b) for a, b in zip(self.children, other.children)])


DISTRIBUTIONS = {"categorical": Categorical, "multi_categorical": MultiCategorical, "diag_gaussian": DiagGaussian,
                 "multi_action": MultiActionDistribution}


def make_distribution(dist_class: type, inputs: tf.Tensor, spec: ActionDistSpec, model: Any = None) -> Any:
    """``dist_class(inputs, model)``, with the category counts of ``spec`` for the
    built-in :class:`MultiCategorical` and the leaves of ``spec`` for
    :class:`MultiActionDistribution`."""
    if dist_class is MultiCategorical:
        return MultiCategorical(inputs, model, spec.nvec)
    if dist_class is MultiActionDistribution:
        return MultiActionDistribution(inputs, spec)
    return dist_class(inputs, model)
