"""TFModel: the catalog's ModelSpec as a :class:`TFModelV2` of plain ``tf.Variable``\\ s.

Keras is deliberately not used: TF 2.21 ships Keras 3, whose layers and optimizers
changed under RLlib's feet; plain variables keep the weights in the catalog's canonical
layout (which *is* TF's layout) and the import light. (Users' own models may use Keras
3: see :mod:`rlstack.models.tf.tf_modelv2`.) 1.13's ``model.base_model``, the network as
a Keras model, is built on first use over these same variables (``keras_model.py``).

The one implementation of the built-in network: the policies' default model, and the
1.13 ``FullyConnectedNetwork`` / ``VisionNetwork`` classes (``fcnet.py``,
``visionnet.py``) that custom models wrap.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from rlstack.models.specs import EncoderSpec, LayerSpec, ModelSpec, QModelSpec, initial_weights
from rlstack.models.tf.framework import tf
from rlstack.models.tf.graph_function import GraphFunction
from rlstack.models.tf.tf_modelv2 import TFModelV2

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


def _flat(obs: tf.Tensor) -> tf.Tensor:
    # A Box observation may arrive in its own shape (an image); the layers read flat rows.
    return obs if len(obs.shape) == 2 else tf.reshape(obs, [tf.shape(obs)[0], -1])


def run_layer(weights: dict[str, tf.Variable], layer: LayerSpec, x: tf.Tensor) -> tf.Tensor:
    """Applies one layer (its ``"<name>/kernel"`` and ``"<name>/bias"`` from ``weights``)
    and its activation to ``x``."""
    kernel = weights[f"{layer.name}/kernel"]
    bias = weights[f"{layer.name}/bias"]
    if layer.kind == "dense":
        x = tf.matmul(x, kernel) + bias
    else:
        x = tf.nn.conv2d(x, kernel, strides=layer.stride, padding=layer.padding.upper()) + bias
    activation = _ACTIVATIONS[layer.activation]
    return activation(x) if activation is not None else x


def encode(weights: dict[str, tf.Variable], encoder: EncoderSpec, obs: tf.Tensor) -> tf.Tensor:
    """The features of flat observations ``obs [B, size]`` through ``encoder``'s layers:
    each image component through its CNN (NHWC), the vector columns through the dense
    layers, then the concatenation through ``post_fc``."""
    parts = []
    if encoder.vector_columns:
        x = vector_part(obs, encoder)
        for layer in encoder.fc:
            x = run_layer(weights, layer, x)
        parts.append(x)
    for branch in encoder.images:
        comp = branch.component
        x = tf.reshape(obs[:, comp.start : comp.start + comp.size], [-1, *comp.shape])
        for layer in branch.convs:
            x = run_layer(weights, layer, x)
        parts.append(tf.reshape(x, [-1, branch.out_size]))
    x = parts[0] if len(parts) == 1 else tf.concat(parts, axis=1)
    for layer in encoder.post_fc:
        x = run_layer(weights, layer, x)
    return x


class TFModel(TFModelV2):
    """The built-in policy-and-value network.

    Policies call :meth:`policy_and_value` / :meth:`value` on flat observations (the
    fast path); users' code may call it 1.13-style, ``model(input_dict) -> (outputs, [])``
    then ``model.value_function()``.

    Args:
        spec: The catalog's description of every layer.
        obs_space: The observation space (default: a flat Box of ``spec.obs_size``).
        action_space: The action space.
        model_config: The ``model`` config (default: the spec's).
        name: The model's name.
        logits_layer: False leaves out the ``logits`` layer: the outputs are then the
            last hidden layer's (1.13's ``num_outputs=None``).
        seed: Seed of the initial weights (policies load their own right after).
    """

    def __init__(self, spec: ModelSpec | QModelSpec, obs_space: gym.Space | None = None,
                 action_space: gym.Space | None = None, model_config: dict | None = None,
                 name: str = "default_model", logits_layer: bool = True, seed: int | None = 0) -> None:
        if obs_space is None:
            obs_space = gym.spaces.Box(-np.inf, np.inf, (spec.obs_size,), np.float32)
        self.spec = spec
        # A spec without a logits layer (model.no_final_linear) outputs its features too.
        self.has_logits = logits_layer and not (isinstance(spec, ModelSpec) and spec.logits is None)
        super().__init__(obs_space, action_space, self._output_size(), spec.model_config if model_config is None
                         else model_config, name)
        self.layer_specs: dict[str, LayerSpec] = {layer.name: layer for layer in spec.layers}
        initial = initial_weights(spec, seed=seed)
        # Variables keyed by canonical weight name, in a stable order.
        self.weight_vars: dict[str, tf.Variable] = {
            name: tf.Variable(value, name=name.replace("/", "_"), trainable=True) for name, value in initial.items()
            if self.has_logits or not (name.startswith("logits/") or name == "log_std")
        }
        self._values: tf.Tensor | None = None

    def _output_size(self) -> int:
        spec = self.spec
        if not self.has_logits:
            return spec.encoder.out_size
        return spec.logits.kernel_shape[1] + (spec.action_dim if spec.free_log_std else 0)

    @property
    def variables_list(self) -> list[tf.Variable]:
        """The trainable variables, in canonical-name order."""
        return [self.weight_vars[name] for name in sorted(self.weight_vars)]

    def _collect(self, trainable_only: bool, as_dict: bool) -> list[tf.Variable] | dict[str, tf.Variable]:
        # Canonical names and order, not the attribute walk of TFModelV2.
        named = {name: self.weight_vars[name] for name in sorted(self.weight_vars)}
        return named if as_dict else list(named.values())

    def _run(self, layer: LayerSpec, x: tf.Tensor) -> tf.Tensor:
        return run_layer(self.weight_vars, layer, x)

    def _encode(self, encoder: EncoderSpec, obs: tf.Tensor) -> tf.Tensor:
        return encode(self.weight_vars, encoder, obs)

    def policy_and_value(self, obs_flat: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """Returns ``(dist_inputs [B, num_outputs], values [B])`` for flat observations."""
        features = self._encode(self.spec.encoder, obs_flat)
        if self.has_logits:
            dist_inputs = self._run(self.layer_specs["logits"], features)
            if self.spec.free_log_std:
                log_std = self.weight_vars["log_std"]
                dist_inputs = tf.concat([dist_inputs, tf.zeros_like(dist_inputs) + log_std], axis=1)
        else:
            dist_inputs = features
        vf_features = features if self.spec.vf_encoder is None else self._encode(self.spec.vf_encoder, obs_flat)
        values = tf.squeeze(self._run(self.layer_specs["value_out"], vf_features), axis=1)
        return dist_inputs, values

    def value(self, obs_flat: tf.Tensor) -> tf.Tensor:
        """Returns ``values [B]`` only."""
        if self.spec.vf_encoder is None:
            return self.policy_and_value(obs_flat)[1]
        features = self._encode(self.spec.vf_encoder, obs_flat)
        return tf.squeeze(self._run(self.layer_specs["value_out"], features), axis=1)

    def forward(self, input_dict: dict[str, Any], state: list, seq_lens: Any) -> tuple[tf.Tensor, list]:
        """1.13's entry: reads ``input_dict["obs_flat"]`` (or ``"obs"``, flattened)."""
        obs = input_dict.get("obs_flat", input_dict["obs"])
        outputs, self._values = self.policy_and_value(_flat(tf.cast(obs, tf.float32)))
        return outputs, state

    def value_function(self) -> tf.Tensor:
        """The values ``[B]`` of the last :meth:`forward` call."""
        return self._values

    @property
    def base_model(self) -> Any:
        """1.13's Keras functional model of the network (``model.base_model.summary()``):
        Keras layers over this model's own variables, built on first use
        (:func:`~rlstack.models.tf.keras_model.keras_base_model` says what goes in and
        out). A subclass may assign its own Keras model under this name."""
        if "_own_base_model" not in self.__dict__:
            from rlstack.models.tf.keras_model import keras_base_model

            self.__dict__["_own_base_model"] = keras_base_model(self)
        return self.__dict__["_own_base_model"]

    @base_model.setter
    def base_model(self, model: Any) -> None:
        # A subclass that builds its own Keras model under 1.13's name keeps it.
        self.__dict__["_own_base_model"] = model

    def get_canonical_weights(self) -> dict[str, np.ndarray]:
        """Weights in the canonical layout, as numpy arrays."""
        # One graph call reads every variable: an eager read per variable adds up when
        # weights are synced after every few env steps (DQN).
        if getattr(self, "_read_all", None) is None:
            self._read_all = GraphFunction(lambda: {name: tf.identity(var) for name, var in self.weight_vars.items()},
                                           [])
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
    """The built-in Q-network (DQN family) of a :class:`~rlstack.models.specs.QModelSpec`.

    Distributional and noisy specs as :class:`~rlstack.models.torch.model.TorchQModel`
    (the same math, the same ``fixed_noise``).

    Args:
        spec: The catalog's Q-network description.
    """

    fixed_noise: dict[str, tuple[np.ndarray, np.ndarray]] | None = None

    def _noisy(self, layer: LayerSpec, x: tf.Tensor, noise: bool) -> tf.Tensor:
        # y = x W_mu + b_mu + ((x * f(e_in)) W_sigma + b_sigma) * f(e_out), f(e) = sign(e) sqrt|e|
        # (factorised Gaussian noise, Fortunato et al. 2018, eq. 10-11).
        y = self._run(layer, x)
        if not noise:
            return y
        fan_in, fan_out = layer.kernel_shape
        if self.fixed_noise is not None:
            eps_in, eps_out = (tf.constant(e, tf.float32) for e in self.fixed_noise[layer.name])
        else:
            eps_in, eps_out = tf.random.normal([fan_in]), tf.random.normal([fan_out])
        f_in, f_out = tf.sign(eps_in) * tf.sqrt(tf.abs(eps_in)), tf.sign(eps_out) * tf.sqrt(tf.abs(eps_out))
        return y + self._run(self.layer_specs[f"{layer.name}_sigma"], x * f_in) * f_out

    def _head(self, layers: tuple[LayerSpec, ...], out: LayerSpec, x: tf.Tensor, noise: bool = True) -> tf.Tensor:
        if not self.spec.noisy:
            for layer in layers:
                x = self._run(layer, x)
            return self._run(out, x)
        for layer in layers:
            x = tf.nn.relu(self._noisy(layer, x, noise))
        return self._noisy(out, x, noise)

    def _output_size(self) -> int:
        return self.spec.num_actions

    def policy_and_value(self, obs_flat: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """``(Q(s, .), max_a Q(s, a))``: a Q-network's outputs are its Q-values (the
        ModelV2 call and exported models: noisy layers use their mean weights)."""
        q = self.q_values(obs_flat, noise=False)
        return q, tf.reduce_max(q, axis=1)

    def value(self, obs_flat: tf.Tensor) -> tf.Tensor:
        """``max_a Q(s, a)`` (noisy layers at their mean weights)."""
        return tf.reduce_max(self.q_values(obs_flat, noise=False), axis=1)

    def q_logits(self, obs_flat: tf.Tensor, noise: bool = True) -> tf.Tensor:
        """The heads' outputs as ``[B, num_actions, num_atoms]``: Q-values (one atom) or
        the logits of each action's value distribution."""
        spec = self.spec
        features = self._encode(spec.encoder, obs_flat)
        advantages = self._head(spec.advantage_hiddens, spec.advantage_out, features, noise)
        advantages = tf.reshape(advantages, [-1, spec.num_actions, spec.num_atoms])
        if spec.value_out is None:
            return advantages
        # Dueling: Q = V + A - mean_a A (per atom when distributional), which keeps V and A identifiable.
        value = self._head(spec.value_hiddens, spec.value_out, features, noise)[:, None, :]
        return value + advantages - tf.reduce_mean(advantages, axis=1, keepdims=True)

    def q_values(self, obs_flat: tf.Tensor, noise: bool = True) -> tf.Tensor:
        """Returns ``Q(s, .)`` as ``[B, num_actions]`` for flat observations; with atoms
        ``Q(s, a) = sum_i z_i softmax(logits(s, a))_i``."""
        logits = self.q_logits(obs_flat, noise)
        if self.spec.num_atoms == 1:
            return logits[:, :, 0]
        return tf.reduce_sum(tf.nn.softmax(logits, axis=2) * self.spec.support, axis=2)