"""Recurrent TF models: 1.13's ``RecurrentNetwork`` base and the built-in LSTM model.

A user's recurrent model subclasses :class:`RecurrentNetwork` as in RLlib 1.13 and
defines ``forward_rnn(inputs [B, T, ...], state, seq_lens) -> (outputs [B, T,
num_outputs], new_state)``, ``get_initial_state()`` and ``value_function()``; ``forward``
adds the time dimension to the flat rows a policy passes (``T`` = 1 when acting).
:class:`TFLSTMModel` is ``use_lstm``'s network on the canonical weights of
``specs.LSTMSpec`` (shared with torch and numpy). ``TF_OPS`` are the tensor operations
``models/prev_inputs.py`` encodes previous actions with.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from rlstack.models.specs import ModelSpec
from rlstack.models.modelv2 import add_time_dimension
from rlstack.models.prev_inputs import TensorOps, with_prev_inputs
from rlstack.models.tf.framework import tf
from rlstack.models.tf.model import TFModel, encode
from rlstack.models.tf.tf_modelv2 import TFModelV2

TF_OPS = TensorOps(one_hot=lambda x, depth: tf.one_hot(tf.cast(x, tf.int32), depth),
                   to_float=lambda x: tf.cast(x, tf.float32), reshape=tf.reshape,
                   concat=lambda xs: tf.concat(xs, axis=-1))


class RecurrentNetwork(TFModelV2):
    """1.13's TF ``RecurrentNetwork``.

    Examples:
        >>> import gymnasium as gym
        >>> class MyRNN(RecurrentNetwork):
        ...     def __init__(self, obs_space, action_space, num_outputs, model_config, name):
        ...         super().__init__(obs_space, action_space, num_outputs, model_config, name)
        ...         self.rnn = tf.keras.layers.GRU(8, return_sequences=True, return_state=True)
        ...         self.logits, self.value_branch = tf.keras.layers.Dense(num_outputs), tf.keras.layers.Dense(1)
        ...     def get_initial_state(self):
        ...         return [tf.zeros([8])]
        ...     def forward_rnn(self, inputs, state, seq_lens):  # inputs [B, T, 3]
        ...         features, h = self.rnn(inputs, initial_state=state[0])
        ...         self._values = tf.reshape(self.value_branch(features), [-1])
        ...         return self.logits(features), [h]
        ...     def value_function(self):
        ...         return self._values
        >>> model = MyRNN(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(2), 2, {}, "rnn")
        >>> # 5 sequences of 2 steps as flat rows, the state at each sequence's start.
        >>> out, state = model({"obs": tf.zeros([10, 3])}, [tf.zeros([5, 8])], tf.fill([5], 2))
        >>> tuple(out.shape), tuple(state[0].shape), tuple(model.value_function().shape)
        ((10, 2), (5, 8), (10,))
    """

    def forward(self, input_dict: dict[str, Any], state: list[tf.Tensor],
                seq_lens: Any) -> tuple[tf.Tensor, list[tf.Tensor]]:
        """Adds the time dimension to ``input_dict["obs_flat"]`` (``[B * T, ...]`` with
        ``B = len(seq_lens)``), calls :meth:`forward_rnn` and returns its outputs as
        ``[B * T, num_outputs]`` rows."""
        flat = tf.cast(input_dict["obs_flat"], tf.float32)
        if seq_lens is None:  # one step per row (a plain model call)
            seq_lens = tf.ones(tf.shape(flat)[:1], tf.int32)
        inputs = add_time_dimension(flat, seq_lens=seq_lens, framework="tf")
        output, new_state = self.forward_rnn(inputs, state, seq_lens)
        return tf.reshape(output, [-1, output.shape[-1]]), new_state

    def forward_rnn(self, inputs: tf.Tensor, state: list[tf.Tensor],
                    seq_lens: tf.Tensor) -> tuple[tf.Tensor, list[tf.Tensor]]:
        """Returns ``(outputs [B, T, num_outputs], new_state)`` for ``inputs [B, T, ...]``
        and the state ``[B, ...]`` each at the sequences' start; subclasses define it."""
        raise NotImplementedError(f"{type(self).__name__} must define forward_rnn(inputs, state, seq_lens).")

    def get_initial_state(self) -> list[Any]:
        """The state at an episode's start, one array per state input, without the batch
        dimension; subclasses define it."""
        raise NotImplementedError(f"{type(self).__name__} must define get_initial_state().")


def lstm_sequence(x: tf.Tensor, h: tf.Tensor, c: tf.Tensor, kernel: tf.Variable, recurrent_kernel: tf.Variable,
                  bias: tf.Variable) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """The LSTM over ``x [B, T, in]`` from ``(h, c)`` (``T`` may be unknown until run);
    gates and formulas as ``models/numpy/recurrent.py``'s ``lstm_step``. Returns
    ``(outputs [B, T, cell], h, c)``."""
    x_part = tf.tensordot(x, kernel, axes=1) + bias  # every step's input term in one product

    def step(carry: tuple[tf.Tensor, tf.Tensor], x_t: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        h, c = carry
        i, f, g, o = tf.split(x_t + tf.matmul(h, recurrent_kernel), 4, axis=1)
        c = tf.sigmoid(f) * c + tf.sigmoid(i) * tf.tanh(g)
        return tf.sigmoid(o) * tf.tanh(c), c

    hs, cs = tf.scan(step, tf.transpose(x_part, [1, 0, 2]), initializer=(h, c))
    return tf.transpose(hs, [1, 0, 2]), hs[-1], cs[-1]


class TFLSTMModel(TFModel, RecurrentNetwork):
    """``use_lstm``'s network (1.13's LSTM wrapper): the built-in encoder, an LSTM of
    ``lstm_cell_size`` over the features (and the previous action and reward, with
    ``lstm_use_prev_*``), then the ``logits`` and ``value_out`` heads on its output.

    Args:
        spec: A catalog spec with ``lstm`` set.
        obs_space: The observation space the model sees.
        action_space: The action space.
        model_config: The ``model`` config (default: the spec's).
        name: The model's name.
    """

    def __init__(self, spec: ModelSpec, obs_space: gym.Space | None = None, action_space: gym.Space | None = None,
                 model_config: dict | None = None, name: str = "default_model") -> None:
        if spec.lstm is None:
            raise ValueError("TFLSTMModel needs a spec with an LSTM (model.use_lstm=True).")
        super().__init__(spec, obs_space, action_space, model_config, name)
        self.prev_inputs = spec.prev

    def get_initial_state(self) -> list[Any]:
        """``[h, c]``: zeros ``[lstm_cell_size]`` each."""
        cell = self.spec.lstm.cell_size
        return [tf.zeros([cell], tf.float32), tf.zeros([cell], tf.float32)]

    def forward(self, input_dict: dict[str, Any], state: list[tf.Tensor],
                seq_lens: Any) -> tuple[tf.Tensor, list[tf.Tensor]]:
        """As the torch model: the encoder on every row, the previous action and reward
        after its features, then :meth:`RecurrentNetwork.forward` over them."""
        features = encode(self.weight_vars, self.spec.encoder, tf.cast(input_dict["obs_flat"], tf.float32))
        features = with_prev_inputs(self.prev_inputs, features, input_dict, TF_OPS)
        return RecurrentNetwork.forward(self, {**input_dict, "obs_flat": features}, state, seq_lens)

    def forward_rnn(self, inputs: tf.Tensor, state: list[tf.Tensor],
                    seq_lens: tf.Tensor) -> tuple[tf.Tensor, list[tf.Tensor]]:
        # inputs: the LSTM's inputs [B, T, in] (see forward).
        w = self.weight_vars
        shape = tf.shape(inputs)
        out, h, c = lstm_sequence(inputs, state[0], state[1], w["lstm/kernel"], w["lstm/recurrent_kernel"],
                                  w["lstm/bias"])
        rows = tf.reshape(out, [-1, out.shape[-1]])
        dist_inputs = self._run(self.layer_specs["logits"], rows) if "logits" in self.layer_specs else rows
        if self.spec.free_log_std:
            dist_inputs = tf.concat([dist_inputs, tf.zeros_like(dist_inputs) + w["log_std"]], axis=1)
        self._values = tf.squeeze(self._run(self.layer_specs["value_out"], rows), axis=1)
        return tf.reshape(dist_inputs, [shape[0], shape[1], dist_inputs.shape[-1]]), [h, c]

    def policy_and_value(self, obs_flat: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        raise TypeError("The LSTM model needs its state: call policy_and_value_rnn(obs, state, seq_lens).")

    def value(self, obs_flat: tf.Tensor) -> tf.Tensor:
        raise TypeError("The LSTM model needs its state: call policy_and_value_rnn(obs, state, seq_lens).")
