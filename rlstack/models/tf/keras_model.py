"""The built-in TF networks as Keras models over their own variables: 1.13's ``base_model``.

RLlib 1.13's default TF models were Keras functional models, and user code reads them
through ``policy.model.base_model`` (``.summary()``, ``.layers``, ``.get_weights()``, or a
call inside another Keras model). rlstack's built-in models run on plain ``tf.Variable``\\ s
(``model.py``), so that acting and learning need no Keras; this module builds, on first
use, the same network as Keras layers (``Dense``, ``Conv2D``, an ``LSTMCell`` in an
``RNN``) that hold *those* variables: a Keras variable made from a ``tf.Variable`` wraps
it rather than copying it (Keras 3's TF backend), so the Keras model and the policy share
every weight, and each training step shows in the Keras model.

Keras is imported inside :func:`keras_base_model` only: a policy whose ``base_model`` is
never read never imports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rlstack.models.specs import EncoderSpec, LayerSpec

if TYPE_CHECKING:
    from rlstack.models.tf.model import TFModel

__all__ = ["keras_base_model"]

# rlstack's activation names as Keras's (None: no activation).
_KERAS_ACTIVATIONS = {"tanh": "tanh", "relu": "relu", "swish": "silu", "silu": "silu", "elu": "elu", "linear": None}


def _shared_weights_class(keras: Any, base: type) -> type:
    """``base`` (a Keras layer or cell class) whose ``add_weight`` hands out the given
    ``tf.Variable``\\ s instead of creating new ones; the class keeps ``base``'s name, so
    ``summary()`` shows ``Dense`` / ``Conv2D`` and ``isinstance`` checks hold."""

    def __init__(self: Any, *args: Any, shared: dict[str, Any], **kwargs: Any) -> None:
        base.__init__(self, *args, **kwargs)
        self._rlstack_shared = shared

    def add_weight(self: Any, shape: Any = None, initializer: Any = None, dtype: Any = None, trainable: bool = True,
                   *args: Any, name: str | None = None, **kwargs: Any) -> Any:
        variable = self._rlstack_shared[name]
        if shape is not None and tuple(shape) != tuple(variable.shape):
            raise ValueError(
                f"Keras layer {self.name} asks for a {name} of shape {tuple(shape)}, but the model's weight has "
                f"shape {tuple(variable.shape)}.")
        # Wraps the variable (Keras 3, TF backend): the layer and the policy share it.
        return keras.Variable(variable, trainable=trainable, name=name)

    return type(base.__name__, (base,), {"__init__": __init__, "add_weight": add_weight,
                                          "__module__": __name__})


class _Builder:
    """Keras layers over one model's ``weight_vars``, by canonical layer name.

    Args:
        keras: The ``keras`` module.
        weights: The model's variables, by canonical weight name.
        sequence: Inputs carry a time axis (``[B, T, ...]``: the LSTM model).
    """

    def __init__(self, keras: Any, weights: dict[str, Any], sequence: bool = False) -> None:
        self.keras = keras
        self.weights = weights
        self.sequence = sequence
        self.dense_class = _shared_weights_class(keras, keras.layers.Dense)
        self.conv_class = _shared_weights_class(keras, keras.layers.Conv2D)

    def layer(self, spec: LayerSpec, x: Any, activation: str | None = None) -> Any:
        """Applies ``spec``'s layer (its activation, or ``activation`` when given) to ``x``."""
        shared = {"kernel": self.weights[f"{spec.name}/kernel"], "bias": self.weights[f"{spec.name}/bias"]}
        act = _KERAS_ACTIVATIONS[activation or spec.activation]
        if spec.kind == "dense":
            return self.dense_class(spec.kernel_shape[1], activation=act, name=spec.name, shared=shared)(x)
        kh, kw, _, filters = spec.kernel_shape
        conv = self.conv_class(filters, (kh, kw), strides=spec.stride, padding=spec.padding, activation=act,
                               name=spec.name, shared=shared)
        return self.keras.layers.TimeDistributed(conv, name=f"{spec.name}_steps")(x) if self.sequence else conv(x)

    def encoder(self, encoder: EncoderSpec, obs: Any, name: str) -> Any:
        """The features of ``obs`` (flat observations, on the last axis) through
        ``encoder``'s layers, as ``model.encode`` computes them."""
        keras = self.keras
        size = obs.shape[-1]
        parts = []
        if encoder.vector_columns:
            index = encoder.column_index
            if isinstance(index, slice):
                x = obs if (index.start, index.stop) == (0, size) else obs[..., index]
            else:
                x = keras.ops.take(obs, index, axis=-1)
            for layer in encoder.fc:
                x = self.layer(layer, x)
            parts.append(x)
        lead = (-1,) if self.sequence else ()
        for i, branch in enumerate(encoder.images):
            comp = branch.component
            x = obs if (comp.start, comp.size) == (0, size) else obs[..., comp.start: comp.start + comp.size]
            x = keras.layers.Reshape((*lead, *comp.shape), name=f"{name}image{i}")(x)
            for layer in branch.convs:
                x = self.layer(layer, x)
            parts.append(keras.layers.Reshape((*lead, branch.out_size), name=f"{name}image{i}_flat")(x))
        x = parts[0] if len(parts) == 1 else keras.layers.Concatenate(axis=-1, name=f"{name}concat")(parts)
        for layer in encoder.post_fc:
            x = self.layer(layer, x)
        return x

    def dist_inputs(self, model: TFModel, features: Any) -> Any:
        """The ``logits`` layer, then the free log stds after it (``free_log_std``); the
        features themselves for a network built without outputs (``num_outputs=None``,
        1.13's feature extractor inside a custom model)."""
        if "logits" not in model.layer_specs or "logits/kernel" not in self.weights:
            return features
        x = self.layer(model.layer_specs["logits"], features)
        if model.spec.free_log_std:
            x = _append_log_std_class(self.keras)(model.weight_vars["log_std"], name="log_std")(x)
        return x


def _append_log_std_class(keras: Any) -> type:
    class AppendLogStd(keras.layers.Layer):
        """``[mean, log_std]``: the free log stds (a variable) after the predicted means."""

        def __init__(self, log_std: Any, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.log_std = keras.Variable(log_std, name="log_std")

        def call(self, mean: Any) -> Any:
            return keras.ops.concatenate([mean, keras.ops.zeros_like(mean) + self.log_std], axis=-1)

    return AppendLogStd


def _dense_model(keras: Any, model: TFModel) -> Any:
    # 1.13's FullyConnectedNetwork / VisionNetwork: flat observations in,
    # [dist_inputs (or the features), value_out [B, 1]] out.
    build = _Builder(keras, model.weight_vars)
    spec = model.spec
    obs = keras.Input(shape=(spec.obs_size,), name="observations")
    features = build.encoder(spec.encoder, obs, "")
    vf_features = features if spec.vf_encoder is None else build.encoder(spec.vf_encoder, obs, "vf_")
    values = build.layer(model.layer_specs["value_out"], vf_features)
    return keras.Model(obs, [build.dist_inputs(model, features), values], name=f"{model.name}_base_model")


def _q_model(keras: Any, model: TFModel) -> Any:
    # The Q-network: flat observations in, Q(s, .) [B, num_actions] out. Noisy heads use
    # their mean weights (greedy acting's network; the sigma layers are not in it).
    build = _Builder(keras, model.weight_vars)
    spec = model.spec
    obs = keras.Input(shape=(spec.obs_size,), name="observations")
    features = build.encoder(spec.encoder, obs, "")

    def head(layers: tuple[LayerSpec, ...], out: LayerSpec) -> Any:
        x = features
        for layer in layers:
            x = build.layer(layer, x, "relu" if spec.noisy else None)
        return build.layer(out, x)

    advantages = keras.layers.Reshape((spec.num_actions, spec.num_atoms), name="q_logits")(
        head(spec.advantage_hiddens, spec.advantage_out))
    logits = advantages
    if spec.value_out is not None:
        value = keras.layers.Reshape((1, spec.num_atoms), name="v_logits")(head(spec.value_hiddens, spec.value_out))
        logits = value + advantages - keras.ops.mean(advantages, axis=1, keepdims=True)
    if spec.num_atoms == 1:
        q_values = logits[:, :, 0]
    else:
        q_values = keras.ops.sum(keras.ops.softmax(logits, axis=2) * spec.support.astype("float32"), axis=2)
    return keras.Model(obs, q_values, name=f"{model.name}_base_model")


def _lstm_model(keras: Any, model: TFModel) -> Any:
    # use_lstm's network on sequences: [observations [B, T, obs], (prev_inputs [B, T, k]),
    # state_in_h, state_in_c] in, [dist_inputs [B, T, n], values [B, T, 1], state_out_h,
    # state_out_c] out (1.13's LSTM wrapper, its encoder included).
    build = _Builder(keras, model.weight_vars, sequence=True)
    spec = model.spec
    cell_size = spec.lstm.cell_size
    obs = keras.Input(shape=(None, spec.obs_size), name="observations")
    h = keras.Input(shape=(cell_size,), name="state_in_h")
    c = keras.Input(shape=(cell_size,), name="state_in_c")
    inputs = [obs]
    x = build.encoder(spec.encoder, obs, "")
    extra = spec.lstm.in_size - spec.encoder.out_size
    if extra:  # lstm_use_prev_action / _reward: their encoded columns after the features
        prev = keras.Input(shape=(None, extra), name="prev_inputs")
        inputs.append(prev)
        x = keras.layers.Concatenate(axis=-1, name="lstm_inputs")([x, prev])
    shared = {name: model.weight_vars[f"lstm/{name}"] for name in ("kernel", "recurrent_kernel", "bias")}
    cell = _shared_weights_class(keras, keras.layers.LSTMCell)(cell_size, shared=shared, name="lstm_cell")
    rows, h_out, c_out = keras.layers.RNN(cell, return_sequences=True, return_state=True, name="lstm")(
        x, initial_state=[h, c])
    values = build.layer(model.layer_specs["value_out"], rows)
    return keras.Model([*inputs, h, c], [build.dist_inputs(model, rows), values, h_out, c_out],
                       name=f"{model.name}_base_model")


def keras_base_model(model: TFModel) -> Any:
    """A Keras functional model of ``model``'s network over ``model``'s own variables.

    For the dense and vision networks: ``observations [B, obs_size] -> [dist_inputs,
    value_out [B, 1]]`` (1.13's ``FullyConnectedNetwork.base_model``); for a Q-network:
    ``-> Q(s, .)``; for ``use_lstm``'s model: ``[observations [B, T, obs_size],
    (prev_inputs), state_in_h, state_in_c] -> [dist_inputs, values, state_out_h,
    state_out_c]``.

    Args:
        model: A built-in TF model (``TFModel``, ``TFQModel``, ``TFLSTMModel`` or a
            ``FullyConnectedNetwork`` / ``VisionNetwork``).

    Returns:
        The ``keras.Model``; its weights are ``model``'s variables (not copies).
    """
    from rlstack.models.specs import QModelSpec
    from rlstack.models.tf.framework import tf  # noqa: F401  (TensorFlow before Keras picks its backend)

    import keras

    if isinstance(model.spec, QModelSpec):
        return _q_model(keras, model)
    if model.spec.lstm is not None:
        return _lstm_model(keras, model)
    return _dense_model(keras, model)
