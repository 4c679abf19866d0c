"""Custom models used by the tests (importable by Ray workers, unlike test modules' locals)."""

from __future__ import annotations

import numpy as np


def _torch_model():
    import torch
    from torch import nn

    class TinyTorchModel(nn.Module):
        """One hidden layer; returns (dist_inputs, values) per the custom-model contract."""

        def __init__(self, obs_space, action_space, num_outputs, model_config, name, hidden=4):
            super().__init__()
            size = int(obs_space.shape[0])
            self.body = nn.Sequential(nn.Linear(size, hidden), nn.Tanh())
            self.pi = nn.Linear(hidden, num_outputs)
            self.vf = nn.Linear(hidden, 1)

        def forward(self, obs: torch.Tensor):
            features = self.body(obs)
            return self.pi(features), self.vf(features).squeeze(1)

    return TinyTorchModel


def _tf_model():
    import tensorflow as tf

    class TinyTFModel(tf.Module):
        """A Keras-free model whose variables are created on the first call."""

        def __init__(self, obs_space, action_space, num_outputs, model_config, name):
            super().__init__(name=name)
            self.num_outputs = num_outputs
            self.w = None

        def __call__(self, obs):
            if self.w is None:
                size = obs.shape[-1]
                self.w = tf.Variable(tf.random.normal([size, self.num_outputs + 1], stddev=0.1, seed=1), name="w")
            out = tf.matmul(obs, self.w)
            return out[:, : self.num_outputs], out[:, self.num_outputs]

    return TinyTFModel


def _keras_model():
    import tensorflow as tf

    from rlstack.models.tf.misc import normc_initializer
    from rlstack.models.tf.tf_modelv2 import TFModelV2

    class KerasMetricsModel(TFModelV2):
        """A classic RLlib 1.13-style Keras model (functional Keras 3 model, one hidden
        layer, a value head) reporting one metric. Its layers are left unnamed on purpose:
        Keras then names them per process (dense, dense_1, ...)."""

        def __init__(self, obs_space, action_space, num_outputs, model_config, name):
            super().__init__(obs_space, action_space, num_outputs, model_config, name)
            self.inputs = tf.keras.layers.Input(shape=obs_space.shape, name="observations")
            hidden = tf.keras.layers.Dense(16, activation=tf.nn.tanh, kernel_initializer=normc_initializer(1.0))(
                self.inputs)
            layer_out = tf.keras.layers.Dense(num_outputs, kernel_initializer=normc_initializer(0.01))(hidden)
            value_out = tf.keras.layers.Dense(1, kernel_initializer=normc_initializer(0.01))(hidden)
            self.base_model = tf.keras.Model(self.inputs, [layer_out, value_out])

        def forward(self, input_dict, state, seq_lens):
            model_out, self._value_out = self.base_model(input_dict["obs"])
            return model_out, state

        def value_function(self):
            return tf.reshape(self._value_out, [-1])

        def metrics(self):
            return {"foo": tf.constant(42.0)}

    return KerasMetricsModel


def _tf_rnn_model():
    import tensorflow as tf

    from rlstack.models.tf.recurrent_net import RecurrentNetwork

    class TFRNNModel(RecurrentNetwork):
        """RLlib 1.13's ``examples/models/rnn_model.py`` (RNNModel) shape in Keras: a dense
        layer, a Keras LSTM over [B, T, ...] from the given state, the two heads."""

        seen_input_shapes: list = []

        def __init__(self, obs_space, action_space, num_outputs, model_config, name, cell_size=8):
            super().__init__(obs_space, action_space, num_outputs, model_config, name)
            self.cell_size = cell_size
            self.dense = tf.keras.layers.Dense(16, activation=tf.nn.tanh)
            self.lstm = tf.keras.layers.LSTM(cell_size, return_sequences=True, return_state=True)
            self.logits = tf.keras.layers.Dense(num_outputs)
            self.values = tf.keras.layers.Dense(1)

        def get_initial_state(self):
            return [np.zeros(self.cell_size, np.float32), np.zeros(self.cell_size, np.float32)]

        def forward_rnn(self, inputs, state, seq_lens):
            type(self).seen_input_shapes.append(tuple(inputs.shape))
            mask = tf.sequence_mask(seq_lens, maxlen=tf.shape(inputs)[1])
            features, h, c = self.lstm(self.dense(inputs), mask=mask, initial_state=list(state))
            self._value_out = self.values(features)
            return self.logits(features), [h, c]

        def value_function(self):
            return tf.reshape(self._value_out, [-1])

    return TFRNNModel


def _nan_grad_torch_model():
    import torch

    Tiny = _torch_model()

    class NanGradTorchModel(Tiny):
        """Finite outputs, NaN gradients: adds sqrt(logits - logits) = 0, whose gradient
        is inf - inf (a custom loss or model with sqrt or log at 0 does the same)."""

        def forward(self, obs: torch.Tensor):
            logits, values = super().forward(obs)
            return logits + torch.sqrt(logits - logits), values

    return NanGradTorchModel


def _nan_grad_tf_model():
    import tensorflow as tf

    Tiny = _tf_model()

    class NanGradTFModel(Tiny):
        """The TF twin of NanGradTorchModel."""

        def __call__(self, obs):
            logits, values = super().__call__(obs)
            return logits + tf.sqrt(logits - logits), values

    return NanGradTFModel


def __getattr__(name):
    if name == "NanGradTorchModel":
        return _nan_grad_torch_model()
    if name == "NanGradTFModel":
        return _nan_grad_tf_model()
    if name == "TinyTorchModel":
        return _torch_model()
    if name == "TinyTFModel":
        return _tf_model()
    if name == "KerasMetricsModel":
        return _keras_model()
    if name == "TFRNNModel":
        return _tf_rnn_model()
    raise AttributeError(name)
