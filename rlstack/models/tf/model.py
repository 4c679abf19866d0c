"""TFModel: the catalog's ModelSpec as a ``tf.Module`` of plain ``tf.Variable``\\ s.

Keras is deliberately not used: TF 2.21 ships Keras 3, whose layers and optimizers
changed under RLlib's feet; plain variables keep the weights in the catalog's canonical
layout (which *is* TF's layout) and the import light.
"""

from __future__ import annotations

import numpy as np

from rlstack.models.catalog import EncoderSpec, LayerSpec, ModelSpec, initial_weights
from rlstack.models.tf.framework import tf

_ACTIVATIONS = {
    "tanh": tf.tanh,
    "relu": tf.nn.relu,
    "swish": tf.nn.silu,
    "silu": tf.nn.silu,
    "elu": tf.nn.elu,
    "linear": None,
}


def vector_part(obs: tf.Tensor, encoder: EncoderSpec) -> tf.Tensor:
    """The columns of flat observations that ``encoder``'s dense layers read."""
    index = encoder.column_index
    return obs[:, index] if isinstance(index, slice) else tf.gather(obs, index, axis=1)


class TFModel(tf.Module):
    """The built-in policy-and-value network.

    Args:
        spec: The catalog's description of every layer.
    """

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__(name="rlstack_model")
        self.spec = spec
        self.layer_specs: dict[str, LayerSpec] = {layer.name: layer for layer in spec.layers}
        zeros = initial_weights(spec, seed=0)
        # Variables keyed by canonical weight name, in a stable order.
        self.weight_vars: dict[str, tf.Variable] = {
            name: tf.Variable(value, name=name.replace("/", "_"), trainable=True) for name, value in zeros.items()
        }

    @property
    def variables_list(self) -> list[tf.Variable]:
        """The trainable variables, in canonical-name order."""
        return [self.weight_vars[name] for name in sorted(self.weight_vars)]

    def _run(self, layer: LayerSpec, x: tf.Tensor) -> tf.Tensor:
        kernel = self.weight_vars[f"{layer.name}/kernel"]
        bias = self.weight_vars[f"{layer.name}/bias"]
        if layer.kind == "dense":
            x = tf.matmul(x, kernel) + bias
        else:
            x = tf.nn.conv2d(x, kernel, strides=layer.stride, padding=layer.padding.upper()) + bias
        activation = _ACTIVATIONS[layer.activation]
        return activation(x) if activation is not None else x

    def _encode(self, encoder: EncoderSpec, obs: tf.Tensor) -> tf.Tensor:
        parts = []
        if encoder.vector_columns:
            x = vector_part(obs, encoder)
            for layer in encoder.fc:
                x = self._run(layer, x)
            parts.append(x)
        for branch in encoder.images:
            comp = branch.component
            x = tf.reshape(obs[:, comp.start : comp.start + comp.size], [-1, *comp.shape])
            for layer in branch.convs:
                x = self._run(layer, x)
            parts.append(tf.reshape(x, [-1, branch.out_size]))
        x = parts[0] if len(parts) == 1 else tf.concat(parts, axis=1)
        for layer in encoder.post_fc:
            x = self._run(layer, x)
        return x

    def __call__(self, obs: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """Returns ``(dist_inputs [B, num_outputs], values [B])`` for flat observations."""
        features = self._encode(self.spec.encoder, obs)
        dist_inputs = self._run(self.layer_specs["logits"], features)
        if self.spec.free_log_std:
            log_std = self.weight_vars["log_std"]
            dist_inputs = tf.concat([dist_inputs, tf.zeros_like(dist_inputs) + log_std], axis=1)
        vf_features = features if self.spec.vf_encoder is None else self._encode(self.spec.vf_encoder, obs)
        values = tf.squeeze(self._run(self.layer_specs["value_out"], vf_features), axis=1)
        return dist_inputs, values

    def value(self, obs: tf.Tensor) -> tf.Tensor:
        """Returns ``values [B]`` only."""
        if self.spec.vf_encoder is None:
            return self(obs)[1]
        features = self._encode(self.spec.vf_encoder, obs)
        return tf.squeeze(self._run(self.layer_specs["value_out"], features), axis=1)

    def get_canonical_weights(self) -> dict[str, np.ndarray]:
        """Weights in the canonical layout, as numpy arrays."""
        # One graph call reads every variable: eager reads cost ~0.2 ms each, which
        # adds up when weights are synced after every few env steps (DQN).
        if getattr(self, "_read_all", None) is None:
            self._read_all = tf.function(lambda: {name: tf.identity(var) for name, var in self.weight_vars.items()},
                                         autograph=False)
        return {name: value.numpy().copy() for name, value in self._read_all().items()}

    def set_canonical_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Loads weights in the canonical layout.

        Raises:
            ValueError: If a weight is missing or has the wrong shape.
        """
        for name, var in self.weight_vars.items():
            value = np.asarray(weights[name], dtype=np.float32)
            if tuple(value.shape) != tuple(var.shape):
                raise ValueError(
                    f"Weight {name} has shape {value.shape} but the model expects {tuple(var.shape)}; "
                    "was it saved with another model config?"
                )
            var.assign(value)


class TFQModel(TFModel):
    """The built-in Q-network (DQN family) of a :class:`~rlstack.models.catalog.QModelSpec`.

    Args:
        spec: The catalog's Q-network description.
    """

    def _head(self, layers: tuple[LayerSpec, ...], out: LayerSpec, x: tf.Tensor) -> tf.Tensor:
        for layer in layers:
            x = self._run(layer, x)
        return self._run(out, x)

    def __call__(self, obs: tf.Tensor) -> tf.Tensor:  # type: ignore[override]
        """Returns ``Q(s, .)`` as ``[B, num_actions]`` for flat observations."""
        spec = self.spec
        features = self._encode(spec.encoder, obs)
        advantages = self._head(spec.advantage_hiddens, spec.advantage_out, features)
        if spec.value_out is None:
            return advantages
        # Dueling: Q = V + A - mean_a A, which keeps V and A identifiable.
        value = self._head(spec.value_hiddens, spec.value_out, features)
        return value + advantages - tf.reduce_mean(advantages, axis=1, keepdims=True)
