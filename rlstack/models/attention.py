"""GTrXL, the gated Transformer-XL of ``use_attention`` (Parisotto et al. 2019, 1.13's
``GTrXLNet`` / attention wrapper), framework-free: its hyper-parameters from the model
config, its weights' names, shapes and initial values, and the constants of its relative
attention. ``models/torch/attention_net.py`` and ``models/tf/attention_net.py`` compute
the same function on these weights (tested equal), so weights move between frameworks.

The network, for inputs ``x [B, T, in]`` and one memory ``[B, M, D]`` per transformer
unit (the unit's inputs at the ``M`` steps before; zeros at an episode's start)::

    x = concat(encoder(obs), prev actions, prev rewards)   use_attention's model only
    h = x @ embed                                   the input embedding, [B, T, D]
    per unit:
        z = LayerNorm(concat(memory, h))            [B, M + T, D]
        a = relative multi-head attention of h's steps over z, causal
        h = GRUGate(h, relu(a @ out))
        h = GRUGate(h, relu(MLP(LayerNorm(h))))
    logits = h @ logits, value = h @ value_out

The attention scores of step ``i`` over position ``j`` are Transformer-XL's:
``(q_i + u) . k_j + (q_i + v) . (R_{i-j} @ pos)`` with ``R`` the sinusoidal encoding of
the distance ``i - j`` and ``u``, ``v`` learned per head. The gate is GTrXL's GRU-type
gate, ``z = sigmoid(y @ Wz + x @ Uz - gate_bias)``, initialised so that each unit starts
close to the identity (``attention_init_gru_gate_bias``, 2.0).

The memory is the recurrent state, stored when acting: each step attends to itself and
the ``attention_memory_inference`` steps before it when acting, ``attention_memory_training``
when training on sequences (the state holds the larger number of steps). With the two
equal, as 1.13's defaults are, training recomputes exactly the outputs acting produced.

``attention_use_n_prev_actions: n`` / ``attention_use_n_prev_rewards: m`` (1.13's
attention wrapper): each step also reads the last ``n`` actions and ``m`` rewards,
oldest first, encoded as ``models/prev_inputs.py`` says, after the dense encoder's
features; ``embed`` has that many more input rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

import gymnasium as gym

from rlstack.errors import ConfigError
from rlstack.models.prev_inputs import PrevInputsSpec

# 1.13's attention keys and defaults (model config).
ATTENTION_DEFAULTS: dict[str, Any] = {
    # Wrap the model in a GTrXL (gated transformer-XL) attention net; not with use_lstm.
    "use_attention": False,
    # Number of transformer blocks (attention + position-wise MLP) stacked.
    "attention_num_transformer_units": 1,
    # Width of the attention net's inputs, outputs and memory rows.
    "attention_dim": 64,
    # Attention heads per transformer block.
    "attention_num_heads": 1,
    # Width of each head's queries, keys and values.
    "attention_head_dim": 32,
    # Past steps each block remembers while acting (the memory fed back as state).
    "attention_memory_inference": 50,
    # Past steps each block remembers while learning on a sequence.
    "attention_memory_training": 50,
    # Hidden width of each block's position-wise MLP.
    "attention_position_wise_mlp_dim": 32,
    # Initial bias of the GRU gates that replace the residual connections (a high bias
    # starts each block close to the identity, which keeps early training stable).
    "attention_init_gru_gate_bias": 2.0,
    # Feed the last n actions to the attention net beside the observation.
    "attention_use_n_prev_actions": 0,
    # Feed the last n rewards to the attention net beside the observation.
    "attention_use_n_prev_rewards": 0,
}


@dataclass(frozen=True)
class GTrXLSpec:
    """The GTrXL's sizes (from the model config or ``GTrXLNet``'s arguments)."""

    in_size: int
    num_outputs: int | None
    num_units: int = 1
    dim: int = 64
    num_heads: int = 1
    head_dim: int = 32
    memory_inference: int = 50
    memory_training: int = 50
    mlp_dim: int = 32
    gate_bias: float = 2.0
    # use_attention's dense encoder in front (fcnet_hiddens, fcnet_activation); none in GTrXLNet.
    encoder_hiddens: tuple[int, ...] = ()
    encoder_activation: str = "tanh"
    # attention_use_n_prev_actions / _rewards: what the GTrXL reads after the encoder's
    # features (None: nothing).
    prev: PrevInputsSpec | None = None

    @property
    def memory(self) -> int:
        """Steps each memory state holds: enough for acting and for training."""
        return max(self.memory_inference, self.memory_training)

    @classmethod
    def from_model_config(cls, in_size: int, num_outputs: int | None, model_config: dict,
                          action_space: gym.Space | None = None) -> GTrXLSpec:
        """``use_attention``'s network for ``model_config``: the dense encoder of
        ``fcnet_hiddens`` / ``fcnet_activation``, then the GTrXL of the ``attention_*``
        keys (1.13's defaults where absent), reading the previous actions of
        ``action_space`` and rewards when ``attention_use_n_prev_*`` ask.

        Raises:
            ConfigError: Naming a key whose value is out of range.
        """
        config = {**ATTENTION_DEFAULTS, **{k: v for k, v in model_config.items() if k in ATTENTION_DEFAULTS}}
        check_attention_config(config)
        n_actions, n_rewards = config["attention_use_n_prev_actions"], config["attention_use_n_prev_rewards"]
        if n_actions and action_space is None:
            raise ConfigError("model.attention_use_n_prev_actions needs the action space to encode the actions.")
        prev = PrevInputsSpec.for_action_space(action_space, n_actions, n_rewards, window=True,
                                               what="model.attention_use_n_prev_actions")
        return cls(in_size, num_outputs, config["attention_num_transformer_units"], config["attention_dim"],
                   config["attention_num_heads"], config["attention_head_dim"], config["attention_memory_inference"],
                   config["attention_memory_training"], config["attention_position_wise_mlp_dim"],
                   float(config["attention_init_gru_gate_bias"]),
                   tuple(model_config.get("fcnet_hiddens", (256, 256))), model_config.get("fcnet_activation") or "linear",
                   prev)

    def weight_shapes(self) -> dict[str, tuple[int, ...]]:
        """Every weight's canonical name and shape; matrices are ``[in, out]`` (``x @ W``)."""
        d, inner = self.dim, self.num_heads * self.head_dim
        sizes = (self.in_size, *self.encoder_hiddens)
        shapes: dict[str, tuple[int, ...]] = {}
        for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
            shapes.update({f"encoder/kernel{i}": (fan_in, fan_out), f"encoder/bias{i}": (fan_out,)})
        shapes["embed/kernel"] = (sizes[-1] + (self.prev.size if self.prev else 0), d)
        for u in range(self.num_units):
            p = f"unit{u}/"
            shapes.update({
                p + "ln_attn/scale": (d,), p + "ln_attn/offset": (d,),
                p + "query": (d, inner), p + "key": (d, inner), p + "value": (d, inner), p + "pos": (d, inner),
                p + "u_bias": (self.num_heads, self.head_dim), p + "v_bias": (self.num_heads, self.head_dim),
                p + "out": (inner, d),
                p + "ln_mlp/scale": (d,), p + "ln_mlp/offset": (d,),
                p + "mlp/kernel0": (d, self.mlp_dim), p + "mlp/bias0": (self.mlp_dim,),
                p + "mlp/kernel1": (self.mlp_dim, d), p + "mlp/bias1": (d,),
            })
            for gate in ("gate_attn", "gate_mlp"):
                shapes.update({f"{p}{gate}/w": (d, 3 * d), f"{p}{gate}/u_rz": (d, 2 * d), f"{p}{gate}/u_h": (d, d),
                               f"{p}{gate}/bias": (d,)})
        if self.num_outputs:
            shapes.update({"logits/kernel": (d, self.num_outputs), "logits/bias": (self.num_outputs,)})
        shapes.update({"value_out/kernel": (d, 1), "value_out/bias": (1,)})
        return shapes

    def initial_weights(self, seed: int | None = None) -> dict[str, np.ndarray]:
        """Initial values: Glorot-uniform matrices, zero biases and offsets, unit scales,
        the gates' bias at ``gate_bias`` and small output heads (1.13's 0.01 scale)."""
        rng = np.random.default_rng(seed)
        weights = {}
        for name, shape in self.weight_shapes().items():
            leaf = name.rsplit("/", 1)[-1]
            if leaf == "scale":
                value = np.ones(shape)
            elif name.endswith("gate_attn/bias") or name.endswith("gate_mlp/bias"):
                value = np.full(shape, self.gate_bias)
            elif leaf in ("offset", "bias", "u_bias", "v_bias") or leaf.startswith("bias"):
                value = np.zeros(shape)
            else:
                limit = np.sqrt(6.0 / (shape[0] + shape[-1]))
                value = rng.uniform(-limit, limit, shape)
                if name.startswith(("logits/", "value_out/")):
                    value *= 0.01
            weights[name] = value.astype(np.float32)
        return weights

    def initial_state(self) -> list[np.ndarray]:
        """One zero memory ``[memory, dim]`` per transformer unit."""
        return [np.zeros((self.memory, self.dim), np.float32) for _ in range(self.num_units)]


def check_attention_config(config: dict) -> None:
    """Raises a :class:`ConfigError` naming the first ``attention_*`` key out of range."""
    for key in ("attention_num_transformer_units", "attention_dim", "attention_num_heads", "attention_head_dim",
                "attention_memory_inference", "attention_memory_training", "attention_position_wise_mlp_dim"):
        value = config.get(key, ATTENTION_DEFAULTS[key])
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"model.{key} must be an integer >= 1 (1.13's default: {ATTENTION_DEFAULTS[key]}); "
                              f"got {value!r}.")
    bias = config.get("attention_init_gru_gate_bias", 2.0)
    if isinstance(bias, bool) or not isinstance(bias, (int, float)):
        raise ConfigError(f"model.attention_init_gru_gate_bias must be a number; got {bias!r}.")
    for key in ("attention_use_n_prev_actions", "attention_use_n_prev_rewards"):
        value = config.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ConfigError(f"model.{key} must be an integer >= 0 (how many past steps the attention net reads; "
                              f"1.13's default: 0); got {value!r}.")
    if not isinstance(config.get("use_attention", False), bool):
        raise ConfigError(f"model.use_attention must be True or False; got {config['use_attention']!r}.")

