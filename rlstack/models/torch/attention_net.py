"""GTrXL in torch: 1.13's ``GTrXLNet`` and the network ``use_attention`` builds.

The math, the weights' names and their initial values are in ``models/attention.py``
(shared with TF). :class:`GTrXLNet` reads observations directly (1.13's class, usable
as a ``custom_model``); :class:`AttentionWrapper` is ``use_attention: True``'s model: the
built-in dense encoder (``fcnet_hiddens``) in front of the same GTrXL, as 1.13 wrapped
its default model. Both are 1.13 ``RecurrentNetwork``s whose state is one memory per
transformer unit.
"""

from __future__ import annotations

import math
import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlstack.models.attention import GTrXLSpec
from rlstack.models.prev_inputs import with_prev_inputs
from rlstack.models.torch.recurrent_net import TORCH_OPS, RecurrentNetwork

_ACTIVATIONS = {"tanh": torch.tanh, "relu": torch.relu, "swish": nn.functional.silu, "silu": nn.functional.silu,
                "elu": nn.functional.elu, "linear": lambda x: x, None: lambda x: x}
LAYER_NORM_EPS = 1e-5


def _layer_norm(x: torch.Tensor, scale: torch.Tensor, offset: torch.Tensor) -> torch.Tensor:
    return nn.functional.layer_norm(x, x.shape[-1:], scale, offset, LAYER_NORM_EPS)


def _gate(x: torch.Tensor, y: torch.Tensor, w: dict[str, torch.Tensor], prefix: str) -> torch.Tensor:
    # GTrXL's GRU-type gate of the residual stream x by the sublayer's output y.
    r_y, z_y, h_y = (y @ w[prefix + "/w"]).chunk(3, dim=-1)
    r_x, z_x = (x @ w[prefix + "/u_rz"]).chunk(2, dim=-1)
    r = torch.sigmoid(r_y + r_x)
    z = torch.sigmoid(z_y + z_x - w[prefix + "/bias"])
    candidate = torch.tanh(h_y + (r * x) @ w[prefix + "/u_h"])
    return (1.0 - z) * x + z * candidate


def _relative_positions(memory: int, steps: int, window: int, dim: int, device: torch.device,
                        ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    # As models/attention.py's relative_positions, computed on the device.
    keys = memory + steps
    distance = torch.arange(keys, dtype=torch.float32, device=device)
    inverse = 1.0 / (10000.0 ** (torch.arange(0, dim, 2, dtype=torch.float32, device=device) / dim))
    angles = distance[:, None] * inverse[None, :]
    encoding = torch.zeros(keys, dim, device=device)
    encoding[:, 0::2] = torch.sin(angles)
    encoding[:, 1::2] = torch.cos(angles)[:, : dim // 2]
    delta = memory + torch.arange(steps, device=device)[:, None] - torch.arange(keys, device=device)[None, :]
    return encoding, delta.clamp(0, keys - 1), (delta >= 0) & (delta <= window)


def gtrxl(spec: GTrXLSpec, w: dict[str, torch.Tensor], x: torch.Tensor, memories: list[torch.Tensor],
          ) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The GTrXL over ``x [B, T, in]`` from the memories ``[B, spec.memory, D]`` at the
    sequences' start; returns ``(h [B, T, D], new memories)`` (each unit's inputs of the
    last ``spec.memory`` steps). Every step attends to itself and the ``window`` steps
    before it (``memory_inference`` for one step, when acting, ``memory_training`` for a
    sequence): with the two equal (1.13's defaults) a sequence gives exactly what acting
    step by step gave."""
    batch, steps = x.shape[:2]
    window = spec.memory_inference if steps == 1 else spec.memory_training
    heads, head_dim = spec.num_heads, spec.head_dim
    encoding, distance, visible = _relative_positions(spec.memory, steps, window, spec.dim, x.device)
    h = x @ w["embed/kernel"]
    new_memories = []
    for u, stored in enumerate(memories):
        p = f"unit{u}/"
        z = _layer_norm(torch.cat([stored, h], dim=1), w[p + "ln_attn/scale"], w[p + "ln_attn/offset"])
        new_memories.append(torch.cat([stored, h], dim=1)[:, -spec.memory :])
        q = (z[:, spec.memory :] @ w[p + "query"]).view(batch, steps, heads, head_dim)
        k = (z @ w[p + "key"]).view(batch, -1, heads, head_dim)
        v = (z @ w[p + "value"]).view(batch, -1, heads, head_dim)
        r = (encoding @ w[p + "pos"]).view(-1, heads, head_dim)
        content = torch.einsum("bthd,bkhd->bhtk", q + w[p + "u_bias"], k)
        position = torch.einsum("bthd,nhd->bhtn", q + w[p + "v_bias"], r)
        position = torch.gather(position, 3, distance.expand(batch, heads, steps, -1))
        scores = ((content + position) / math.sqrt(head_dim)).masked_fill(~visible, float("-inf"))
        attended = torch.einsum("bhtk,bkhd->bthd", torch.softmax(scores, dim=-1), v).reshape(batch, steps, -1)
        h = _gate(h, torch.relu(attended @ w[p + "out"]), w, p + "gate_attn")
        y = _layer_norm(h, w[p + "ln_mlp/scale"], w[p + "ln_mlp/offset"])
        mlp = torch.relu(y @ w[p + "mlp/kernel0"] + w[p + "mlp/bias0"]) @ w[p + "mlp/kernel1"] + w[p + "mlp/bias1"]
        h = _gate(h, torch.relu(mlp), w, p + "gate_mlp")
    return h, new_memories


def dense_encoder(spec: GTrXLSpec, w: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """``use_attention``'s encoder in front of the GTrXL (none for GTrXLNet)."""
    activation = _ACTIVATIONS[spec.encoder_activation]
    for i in range(len(spec.encoder_hiddens)):
        x = activation(x @ w[f"encoder/kernel{i}"] + w[f"encoder/bias{i}"])
    return x


class GTrXLNet(RecurrentNetwork, nn.Module):
    """1.13's ``GTrXLNet``: observations -> GTrXL -> ``logits`` and ``value_out``.

    Args:
        observation_space, action_space, num_outputs, model_config, name: As every ModelV2.
        num_transformer_units, attention_dim, num_heads, memory_inference,
        memory_training, head_dim, position_wise_mlp_dim, init_gru_gate_bias: 1.13's
            arguments and defaults (see ``models/attention.py``).
    """

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
        nn.Module.__init__(self)
        RecurrentNetwork.__init__(self, observation_space, action_space, num_outputs, model_config, name)
        self.gtrxl_spec = spec
        self.prev_inputs = spec.prev
        # Initial weights from torch's generator (seeded by the trainer's `seed`); a policy
        # with use_attention loads the framework-independent ones of its seed instead.
        seed = int(torch.randint(0, 2**31 - 1, ()).item())
        self.gtrxl_weights = nn.ParameterDict({
            name.replace("/", "__"): nn.Parameter(torch.from_numpy(value))
            for name, value in spec.initial_weights(seed).items()
        })
        self._values: torch.Tensor | None = None

    def _weights(self) -> dict[str, torch.Tensor]:
        return {name.replace("__", "/"): value for name, value in self.gtrxl_weights.items()}

    def get_initial_state(self) -> list[torch.Tensor]:
        """One zero memory ``[memory, attention_dim]`` per transformer unit."""
        return [torch.from_numpy(value) for value in self.gtrxl_spec.initial_state()]

    def forward_rnn(self, inputs: torch.Tensor, state: list[torch.Tensor],
                    seq_lens: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        spec, w = self.gtrxl_spec, self._weights()
        h, memories = gtrxl(spec, w, inputs.float(), [s.float() for s in state])
        self._values = (h @ w["value_out/kernel"] + w["value_out/bias"]).reshape(-1)
        out = h @ w["logits/kernel"] + w["logits/bias"] if spec.num_outputs else h
        return out, memories

    def value_function(self) -> torch.Tensor:
        return self._values

    def canonical_weights(self) -> dict[str, np.ndarray]:
        """Every weight under its ``models/attention.py`` name, as numpy copies."""
        return {name: value.detach().cpu().numpy().copy() for name, value in self._weights().items()}

    @torch.no_grad()
    def load_canonical_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Loads :meth:`canonical_weights` (of either framework's model).

        Raises:
            ValueError: If a weight is missing or has the wrong shape.
        """
        for name, param in self._weights().items():
            if name not in weights:
                raise ValueError(f"weight {name} is missing; was it saved with another attention config?")
            value = np.asarray(weights[name], np.float32)
            if value.shape != tuple(param.shape):
                raise ValueError(f"weight {name} has shape {value.shape}, the model's is {tuple(param.shape)}")
            param.copy_(torch.from_numpy(value))


class AttentionWrapper(GTrXLNet):
    """``use_attention: True``'s model: the dense encoder of ``fcnet_hiddens`` /
    ``fcnet_activation`` in front of a GTrXL configured by the ``attention_*`` keys
    (1.13's defaults), with the ``logits`` and ``value_out`` heads on its output; the
    last ``attention_use_n_prev_actions`` / ``_rewards`` follow the encoder's features."""

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, num_outputs: int | None,
                 model_config: dict, name: str) -> None:
        spec = GTrXLSpec.from_model_config(int(np.prod(observation_space.shape)), num_outputs, model_config,
                                           action_space)
        self._build(observation_space, action_space, num_outputs, model_config, name, spec)

    def forward(self, input_dict: dict, state: list[torch.Tensor],
                seq_lens: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """As 1.13's attention wrapper: the encoder on every row, the previous actions and
        rewards after its features, then the GTrXL over the sequences."""
        spec, w = self.gtrxl_spec, self._weights()
        features = with_prev_inputs(spec.prev, dense_encoder(spec, w, input_dict["obs_flat"].float()), input_dict,
                                    TORCH_OPS)
        return RecurrentNetwork.forward(self, {**input_dict, "obs_flat": features}, state, seq_lens)
