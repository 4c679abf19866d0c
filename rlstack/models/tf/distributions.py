"""Action distributions in TensorFlow, twins of models/torch/distributions.py."""

from __future__ import annotations

import math

from rlstack.models.catalog import ActionDistSpec
from rlstack.models.tf.framework import tf


class Categorical:
    """A categorical distribution over ``n`` actions from unnormalised logits ``[B, n]``."""

    def __init__(self, inputs: tf.Tensor, spec: ActionDistSpec) -> None:
        self.logits = inputs
        self.log_probs = tf.nn.log_softmax(inputs, axis=-1)

    def sample(self, rng: tf.random.Generator | None = None) -> tf.Tensor:
        """Draws one action per row (from ``rng``, or TF's global generator)."""
        rng = rng if rng is not None else tf.random.get_global_generator()
        # Gumbel-max: argmax(logits + Gumbel noise) is a draw from softmax(logits).
        uniform = rng.uniform(tf.shape(self.logits), minval=1e-20, maxval=1.0)
        return tf.argmax(self.logits - tf.math.log(-tf.math.log(uniform)), axis=-1)

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


class MultiCategorical:
    """Independent categoricals, one per entry of a MultiDiscrete action."""

    def __init__(self, inputs: tf.Tensor, spec: ActionDistSpec) -> None:
        self.cats = [Categorical(part, spec) for part in tf.split(inputs, list(spec.nvec), axis=-1)]

    def sample(self, rng: tf.random.Generator | None = None) -> tf.Tensor:
        """Draws one action per row (from ``rng``, or TF's global generator)."""
        return tf.stack([cat.sample(rng) for cat in self.cats], axis=-1)

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


class DiagGaussian:
    """A Gaussian with diagonal covariance; inputs are ``[means, log_stds]``."""

    def __init__(self, inputs: tf.Tensor, spec: ActionDistSpec) -> None:
        self.mean, self.log_std = tf.split(inputs, 2, axis=-1)
        self.std = tf.exp(self.log_std)

    def sample(self, rng: tf.random.Generator | None = None) -> tf.Tensor:
        """Draws one action per row (from ``rng``, or TF's global generator)."""
        rng = rng if rng is not None else tf.random.get_global_generator()
        return self.mean + self.std * rng.normal(tf.shape(self.mean))

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


DISTRIBUTIONS = {"categorical": Categorical, "multi_categorical": MultiCategorical, "diag_gaussian": DiagGaussian}
