"""Action distributions in TensorFlow, twins of models/torch/distributions.py."""

from __future__ import annotations

import math

import tensorflow as tf

from rlstack.models.catalog import ActionDistSpec


class Categorical:
    """A categorical distribution over ``n`` actions from unnormalised logits ``[B, n]``."""

    def __init__(self, inputs: tf.Tensor, spec: ActionDistSpec) -> None:
        self.logits = inputs
        self.log_probs = tf.nn.log_softmax(inputs, axis=-1)

    def sample(self) -> tf.Tensor:
        return tf.squeeze(tf.random.categorical(self.logits, 1), axis=-1)

    def deterministic_sample(self) -> tf.Tensor:
        return tf.argmax(self.logits, axis=-1)

    def logp(self, actions: tf.Tensor) -> tf.Tensor:
        actions = tf.cast(actions, tf.int32)
        return tf.gather(self.log_probs, actions, axis=1, batch_dims=1)

    def entropy(self) -> tf.Tensor:
        return -tf.reduce_sum(tf.exp(self.log_probs) * self.log_probs, axis=-1)

    def kl(self, other: "Categorical") -> tf.Tensor:
        """KL(self || other)."""
        return tf.reduce_sum(tf.exp(self.log_probs) * (self.log_probs - other.log_probs), axis=-1)


class MultiCategorical:
    """Independent categoricals, one per entry of a MultiDiscrete action."""

    def __init__(self, inputs: tf.Tensor, spec: ActionDistSpec) -> None:
        self.cats = [Categorical(part, spec) for part in tf.split(inputs, list(spec.nvec), axis=-1)]

    def sample(self) -> tf.Tensor:
        return tf.stack([cat.sample() for cat in self.cats], axis=-1)

    def deterministic_sample(self) -> tf.Tensor:
        return tf.stack([cat.deterministic_sample() for cat in self.cats], axis=-1)

    def logp(self, actions: tf.Tensor) -> tf.Tensor:
        return tf.add_n([cat.logp(actions[:, i]) for i, cat in enumerate(self.cats)])

    def entropy(self) -> tf.Tensor:
        return tf.add_n([cat.entropy() for cat in self.cats])

    def kl(self, other: "MultiCategorical") -> tf.Tensor:
        return tf.add_n([a.kl(b) for a, b in zip(self.cats, other.cats)])


class DiagGaussian:
    """A Gaussian with diagonal covariance; inputs are ``[means, log_stds]``."""

    def __init__(self, inputs: tf.Tensor, spec: ActionDistSpec) -> None:
        self.mean, self.log_std = tf.split(inputs, 2, axis=-1)
        self.std = tf.exp(self.log_std)

    def sample(self) -> tf.Tensor:
        return self.mean + self.std * tf.random.normal(tf.shape(self.mean))

    def deterministic_sample(self) -> tf.Tensor:
        return self.mean

    def logp(self, actions: tf.Tensor) -> tf.Tensor:
        actions = tf.reshape(tf.cast(actions, tf.float32), tf.shape(self.mean))
        dim = tf.cast(tf.shape(self.mean)[-1], tf.float32)
        return (
            -0.5 * tf.reduce_sum(tf.square((actions - self.mean) / self.std), axis=-1)
            - 0.5 * math.log(2.0 * math.pi) * dim
            - tf.reduce_sum(self.log_std, axis=-1)
        )

    def entropy(self) -> tf.Tensor:
        return tf.reduce_sum(self.log_std + 0.5 * math.log(2.0 * math.pi * math.e), axis=-1)

    def kl(self, other: "DiagGaussian") -> tf.Tensor:
        return tf.reduce_sum(
            other.log_std - self.log_std
            + (tf.square(self.std) + tf.square(self.mean - other.mean)) / (2.0 * tf.square(other.std))
            - 0.5,
            axis=-1,
        )


DISTRIBUTIONS = {"categorical": Categorical, "multi_categorical": MultiCategorical, "diag_gaussian": DiagGaussian}
