"""GTrXL in TensorFlow: 1.13's ``GTrXLNet`` and the network ``use_attention`` builds.

The same function as ``models/torch/attention_net.py`` on the same weights (the math, names
and initial values are in ``models/attention.py``); the number of steps may be unknown
until the graph runs.
"""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np

from rlstack.models.attention import GTrXLSpec
from rlstack.models.prev_inputs import with_prev_inputs
from rlstack.models.tf.framework import tf
from rlstack.models.tf.recurrent_net import TF_OPS, RecurrentNetwork

_ACTIVATIONS = {"tanh": tf.tanh, "relu": tf.nn.relu, "swish": tf.nn.silu, "silu": tf.nn.silu, "elu": tf.nn.elu,
                "linear": lambda x: x}
LAYER_NORM_EPS = 1e-5  # as torch's


def _layer_norm(x: tf.Tensor, scale: tf.Tensor, offset: tf.Tensor) -> tf.Tensor:
    mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
    return (x - mean) * tf.math.rsqrt(variance + LAYER_NORM_EPS) * scale + offset


def _gate(x: tf.Tensor, y: tf.Tensor, w: dict[str, tf.Tensor], prefix: str) -> tf.Tensor:
    # GTrXL's GRU-type gate of the residual stream x by the sublayer's output y.
    r_y, z_y, h_y = tf.split(tf.matmul(y, w[prefix + "/w"]), 3, axis=-1)
    r_x, z_x = tf.split(tf.matmul(x, w[prefix + "/u_rz"]), 2, axis=-1)
    r = tf.sigmoid(r_y + r_x)
    z = tf.sigmoid(z_y + z_x - w[prefix + "/bias"])
    candidate = tf.tanh(h_y + tf.matmul(r * x, w[prefix + "/u_h"]))
    return (1.0 - z) * x + z * candidate


def _relative_positions(memory: int, steps: tf.Tensor, window: tf.Tensor, dim: int,
                        ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    # The sinusoidal encodings of the distances 0 .. keys - 1, each query/key pair's
    # distance index, and which keys each query reads (itself and `window` steps back).
    keys = memory + steps
    distance = tf.cast(tf.range(keys), tf.float32)
    inverse = 1.0 / (10000.0 ** (tf.range(0, dim, 2, dtype=tf.float32) / dim))
    angles = distance[:, None] * inverse[None, :]
    sines, cosines = tf.sin(angles), tf.cos(angles)[:, : dim // 2]
    # Interleaved: even columns sines, odd columns cosines.
    encoding = tf.reshape(tf.stack([sines[:, : dim // 2], cosines], axis=2), [keys, 2 * (dim // 2)])
    if dim % 2:
        encoding = tf.concat([encoding, sines[:, dim // 2 :]], axis=1)
    delta = memory + tf.range(steps)[:, None] - tf.range(keys)[None, :]
    return encoding, tf.clip_by_value(delta, 0, keys - 1), tf.logical_and(delta >= 0, delta <= window)


def gtrxl(spec: GTrXLSpec, w: dict[str, tf.Tensor], x: tf.Tensor, memories: list[tf.Tensor],
          ) -> tuple[tf.Tensor, list[tf.Tensor]]:
    """As the torch ``gtrxl``: ``(h [B, T, D], new memories)`` for ``x [B, T, in]`` and the
    memories ``[B, spec.memory, D]`` at the sequences' start."""
    batch, steps = tf.shape(x)[0], tf.shape(x)[1]
    window = tf.where(steps == 1, spec.memory_inference, spec.memory_training)
    heads, head_dim = spec.num_heads, spec.head_dim
    encoding, distance, visible = _relative_positions(spec.memory, steps, window, spec.dim)
    h = tf.matmul(x, w["embed/kernel"])
    new_memories = []
    for u, stored in enumerate(memories):
        p = f"unit{u}/"
        full = tf.concat([stored, h], axis=1)
        new_memories.append(full[:, -spec.memory :])
        z = _layer_norm(full, w[p + "ln_attn/scale"], w[p + "ln_attn/offset"])
        q = tf.reshape(tf.matmul(z[:, spec.memory :], w[p + "query"]), [batch, steps, heads, head_dim])
        k = tf.reshape(tf.matmul(z, w[p + "key"]), [batch, -1, heads, head_dim])
        v = tf.reshape(tf.matmul(z, w[p + "value"]), [batch, -1, heads, head_dim])
        r = tf.reshape(tf.matmul(encoding, w[p + "pos"]), [-1, heads, head_dim])
        content = tf.einsum("bthd,bkhd->bhtk", q + w[p + "u_bias"], k)
        # Each query/key pair's encoding [T, K, H, d], read by its distance.
        position = tf.einsum("bthd,tkhd->bhtk", q + w[p + "v_bias"], tf.gather(r, distance))
        scores = tf.where(visible, (content + position) / math.sqrt(head_dim), float("-inf"))
        attended = tf.reshape(tf.einsum("bhtk,bkhd->bthd", tf.nn.softmax(scores, axis=-1), v), [batch, steps, -1])
        h = _gate(h, tf.nn.relu(tf.matmul(attended, w[p + "out"])), w, p + "gate_attn")
        y = _layer_norm(h, w[p + "ln_mlp/scale"], w[p + "ln_mlp/offset"])
        mlp = tf.matmul(tf.nn.relu(tf.matmul(y, w[p + "mlp/kernel0"]) + w[p + "mlp/bias0"]), w[p + "mlp/kernel1"])
        h = _gate(h, tf.nn.relu(mlp + w[p + "mlp/bias1"]), w, p + "gate_mlp")
    return h, new_memories


def dense_encoder(spec: GTrXLSpec, w: dict[str, tf.Tensor], x: tf.Tensor) -> tf.Tensor:
    """``use_attention``'s encoder in front of the GTrXL (none for GTrXLNet)."""
    activation = _ACTIVATIONS[spec.encoder_activation]
    for i in range(len(spec.encoder_hiddens)):
        x = activation(tf.matmul(x, w[f"encoder/kernel{i}"]) + w[f"encoder/bias{i}"])
    return x


class GTrXLNet(RecurrentNetwork):
    """1.13's TF ``GTrXLNet`` (arguments as the torch class's)."""

    # No Python control flow on tensors: the policy's graphs skip AutoGraph's rewriting.
    autograph_free = True

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, num_outputs: int | None,
                 model_config: dict, name: str, *, num_transformer_units: int = 1, attention_dim: int = 64,
                 num_heads: int = 2, memory_inference: int = 50, memory_training: int = 50, head_dim: int = 32,
                 position_wise_mlp_dim: int = 32, init_gru_gate_bias: float = 2.0) -> None:
        spec = GTrXLSpec(int(np.prod(observation_space.shape)), num_outputs, num_transformer_units, attention_dim,
                         num_heads, head_dim, memory_inference, memory_training, position_wise_mlp_dim,
                         float(init_gru_gate_bias))
        self._build(observation_space, action_space, num_outputs, model_config, name, spec)

    def _build(self, observation_space: gym.Space, action_space: gym.Space, num_outputs: int | None,
               model_config: dict, name: str, spec: GTrXLSpec) -> None:
        RecurrentNetwork.__init__(self, observation_space, action_space, num_outputs, model_config, name)
        self.gtrxl_spec = spec
        self.prev_inputs = spec.prev
        # Initial weights from TF's generator (seeded by the trainer's `seed`); a policy
        # with use_attention loads the framework-independent ones of its seed instead.
        seed = int(tf.random.uniform([], 0, 2**31 - 1, dtype=tf.int64))
        self.gtrxl_weights = {name: tf.Variable(value, name=name.replace("/", "_"))
                              for name, value in spec.initial_weights(seed).items()}
        self._values = None

    def get_initial_state(self) -> list[np.ndarray]:
        """One zero memory ``[memory, attention_dim]`` per transformer unit."""
        return self.gtrxl_spec.initial_state()

    def forward_rnn(self, inputs: tf.Tensor, state: list[tf.Tensor],
                    seq_lens: tf.Tensor) -> tuple[tf.Tensor, list[tf.Tensor]]:
        spec, w = self.gtrxl_spec, self.gtrxl_weights
        memories = [tf.cast(s, tf.float32) for s in state]
        h, memories = gtrxl(spec, w, tf.cast(inputs, tf.float32), memories)
        self._values = tf.reshape(tf.matmul(h, w["value_out/kernel"]) + w["value_out/bias"], [-1])
        out = tf.matmul(h, w["logits/kernel"]) + w["logits/bias"] if spec.num_outputs else h
        return out, memories

    def value_function(self) -> tf.Tensor:
        return self._values

    def canonical_weights(self) -> dict[str, np.ndarray]:
        """Every weight under its ``models/attention.py`` name, as numpy copies."""
        return {name: var.numpy().copy() for name, var in self.gtrxl_weights.items()}

    def load_canonical_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Loads :meth:`canonical_weights` (of either framework's model).

        Raises:
            ValueError: If a weight is missing or has the wrong shape.
        """
        for name, var in self.gtrxl_weights.items():
            if name not in weights:
                raise ValueError(f"weight {name} is missing; was it saved with another attention config?")
            value = np.asarray(weights[name], np.float32)
            if value.shape != tuple(var.shape):
                raise ValueError(f"weight {name} has shape {value.shape}, the model's is {tuple(var.shape)}")
            var.assign(value)


class AttentionWrapper(GTrXLNet):
    """``use_attention: True``'s TF model (see the torch class)."""

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, num_outputs: int | None,
                 model_config: dict, name: str) -> None:
        spec = GTrXLSpec.from_model_config(int(np.prod(observation_space.shape)), num_outputs, model_config,
                                           action_space)
        self._build(observation_space, action_space, num_outputs, model_config, name, spec)

    def forward(self, input_dict: dict, state: list[tf.Tensor],
                seq_lens: tf.Tensor) -> tuple[tf.Tensor, list[tf.Tensor]]:
        """As the torch class: the encoder on every row, the previous actions and rewards
        after its features, then the GTrXL over the sequences."""
        spec, w = self.gtrxl_spec, self.gtrxl_weights
        features = dense_encoder(spec, w, tf.cast(input_dict["obs_flat"], tf.float32))
        features = with_prev_inputs(spec.prev, features, input_dict, TF_OPS)
        return RecurrentNetwork.forward(self, {**input_dict, "obs_flat": features}, state, seq_lens)
