"""Classic RLlib's ``DistributionalQTFModel``: the base of a custom TensorFlow Q-model for
DQN, the TF twin of :mod:`rlstack.trainers.dqn.dqn_torch_model` (same head, same
arguments; distributional and noisy heads are the built-in Q-network's only)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym

from rlstack.models.tf.framework import tf
from rlstack.models.tf.tf_modelv2 import TFModelV2
from rlstack.trainers.dqn.dqn_torch_model import check_plain_q_head

__all__ = ["DistributionalQTFModel"]


class DistributionalQTFModel(TFModelV2):
    """A TF Q-model: the subclass's embedding (``num_outputs`` features from
    ``forward``), then the Q-head of ``q_hiddens`` layers, dueling or not."""

    def __init__(self, obs_space: gym.Space, action_space: gym.Space, num_outputs: int, model_config: dict,
                 name: str, *, q_hiddens: Sequence[int] = (256,), dueling: bool = False,
                 dueling_activation: str = "relu", num_atoms: int = 1, use_noisy: bool = False,
                 v_min: float = -10.0, v_max: float = 10.0, sigma0: float = 0.5, add_layer_norm: bool = False,
                 **kwargs: Any) -> None:
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        check_plain_q_head(num_atoms, use_noisy, type(self).__name__)
        self.dueling = dueling
        self.advantage_module = self._stream(q_hiddens, int(action_space.n), dueling_activation, add_layer_norm,
                                             f"{name}_advantage")
        self.value_module = self._stream(q_hiddens, 1, dueling_activation, add_layer_norm, f"{name}_value") \
            if dueling else None

    @staticmethod
    def _stream(hiddens: Sequence[int], outs: int, activation: str, layer_norm: bool, name: str) -> Any:
        layers: list[Any] = []
        for i, size in enumerate(hiddens):
            layers.append(tf.keras.layers.Dense(int(size), activation=activation, name=f"{name}_hidden_{i}"))
            if layer_norm:
                layers.append(tf.keras.layers.LayerNormalization(name=f"{name}_norm_{i}"))
        layers.append(tf.keras.layers.Dense(outs, activation=None, name=f"{name}_out"))
        return tf.keras.Sequential(layers, name=name)

    def get_q_value_distributions(self, model_out: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """``(action_scores, logits, probs)`` of the advantage stream (1.13's triple; with
        one atom the last two are ones)."""
        scores = self.advantage_module(model_out)
        ones = tf.expand_dims(tf.ones_like(scores), -1)
        return scores, ones, ones

    def get_state_value(self, model_out: tf.Tensor) -> tf.Tensor:
        """The value stream's ``V(s)`` ``[B, 1]`` (dueling only)."""
        if self.value_module is None:
            raise ValueError(f"{type(self).__name__} has no value stream: it was built with dueling=False.")
        return self.value_module(model_out)

    def q_values(self, obs_flat: tf.Tensor, noise: bool = True) -> tf.Tensor:
        """``Q(s, .)`` ``[B, num_actions]``: the subclass's embedding through the Q-head."""
        model_out, _ = self({"obs": obs_flat, "obs_flat": obs_flat}, self.get_initial_state(), None)
        advantages = self.advantage_module(model_out)
        if self.value_module is None:
            return advantages
        return self.value_module(model_out) + advantages - tf.reduce_mean(advantages, axis=1, keepdims=True)
