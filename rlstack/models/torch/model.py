"""TorchModel: the catalog's ModelSpec as a ``torch.nn.Module``.

Images arrive flattened in HWC order; they are reshaped, moved to NCHW for the convs and
moved back to NHWC before flattening, so the flattened features have the same order as
in the TF model (which convolves in NHWC) and weights convert one-to-one.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from rlstack.models.catalog import EncoderSpec, LayerSpec, ModelSpec

_ACTIVATIONS = {
    "tanh": torch.tanh,
    "relu": F.relu,
    "swish": F.silu,
    "silu": F.silu,
    "elu": F.elu,
    "linear": None,
}


def _same_padding(size: int, kernel: int, stride: int) -> tuple[int, int]:
    # TF's "same": output = ceil(size / stride); the extra pixel goes after, not before.
    total = max((math.ceil(size / stride) - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


class TorchModel(nn.Module):
    """The built-in policy-and-value network.

    Args:
        spec: The catalog's description of every layer.
    """

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        self.spec = spec
        self.layer_specs: dict[str, LayerSpec] = {layer.name: layer for layer in spec.layers}
        self.layers = nn.ModuleDict()
        for layer in spec.layers:
            if layer.kind == "dense":
                self.layers[layer.name] = nn.Linear(*layer.kernel_shape)
            else:
                kh, kw, cin, cout = layer.kernel_shape
                self.layers[layer.name] = nn.Conv2d(cin, cout, (kh, kw), stride=layer.stride)
        self.log_std = nn.Parameter(torch.zeros(spec.action_dim)) if spec.free_log_std else None


    def _run(self, layer: LayerSpec, x: torch.Tensor) -> torch.Tensor:
        if layer.kind == "conv" and layer.padding == "same":
            kh, kw = layer.kernel_shape[:2]
            top, bottom = _same_padding(x.shape[2], kh, layer.stride)
            left, right = _same_padding(x.shape[3], kw, layer.stride)
            x = F.pad(x, (left, right, top, bottom))
        x = self.layers[layer.name](x)
        activation = _ACTIVATIONS[layer.activation]
        return activation(x) if activation is not None else x

    def _encode(self, encoder: EncoderSpec, obs: torch.Tensor) -> torch.Tensor:
        parts = []
        if encoder.vector_columns:
            x = obs[:, encoder.column_index]
            for layer in encoder.fc:
                x = self._run(layer, x)
            parts.append(x)
        for branch in encoder.images:
            comp = branch.component
            x = obs[:, comp.start : comp.start + comp.size].reshape(-1, *comp.shape).permute(0, 3, 1, 2)
            for layer in branch.convs:
                x = self._run(layer, x)
            parts.append(x.permute(0, 2, 3, 1).reshape(x.shape[0], -1))
        x = parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)
        for layer in encoder.post_fc:
            x = self._run(layer, x)
        return x

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Returns ``(dist_inputs [B, num_outputs], values [B])`` for flat observations."""
        features = self._encode(self.spec.encoder, obs)
        dist_inputs = self.layers["logits"](features)
        if self.log_std is not None:
            dist_inputs = torch.cat([dist_inputs, self.log_std.expand_as(dist_inputs)], dim=1)
        vf_features = features if self.spec.vf_encoder is None else self._encode(self.spec.vf_encoder, obs)
        values = self.layers["value_out"](vf_features).squeeze(1)
        return dist_inputs, values

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """Returns ``values [B]`` only (skips the policy head when the encoder is separate)."""
        if self.spec.vf_encoder is None:
            return self.forward(obs)[1]
        return self.layers["value_out"](self._encode(self.spec.vf_encoder, obs)).squeeze(1)

    def get_canonical_weights(self) -> dict[str, np.ndarray]:
        """Weights in the catalog's canonical (TF) layout, as numpy arrays."""
        weights = {}
        for name, module in self.layers.items():
            kernel = module.weight.detach().cpu().numpy()
            if self.layer_specs[name].kind == "dense":
                kernel = kernel.T
            else:
                kernel = kernel.transpose(2, 3, 1, 0)
            weights[f"{name}/kernel"] = np.array(kernel, order="C", copy=True)  # never a view of the parameter
            weights[f"{name}/bias"] = module.bias.detach().cpu().numpy().copy()
        if self.log_std is not None:
            weights["log_std"] = self.log_std.detach().cpu().numpy().copy()
        return weights

    @torch.no_grad()
    def set_canonical_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Loads weights in the canonical layout.

        Raises:
            ValueError: If a weight is missing or has the wrong shape.
        """
        for name, module in self.layers.items():
            kernel = np.asarray(weights[f"{name}/kernel"])
            if self.layer_specs[name].kind == "dense":
                kernel = kernel.T
            else:
                kernel = kernel.transpose(3, 2, 0, 1)
            if tuple(kernel.shape) != tuple(module.weight.shape):
                raise ValueError(
                    f"Weight {name}/kernel has shape {weights[f'{name}/kernel'].shape}, which does "
                    "not fit this model; was it saved with another model config?"
                )
            # np.array copies: arrays from Ray's object store are read-only.
            module.weight.copy_(torch.from_numpy(np.array(kernel, dtype=np.float32)))
            module.bias.copy_(torch.from_numpy(np.array(weights[f"{name}/bias"], dtype=np.float32)))
        if self.log_std is not None:
            self.log_std.copy_(torch.from_numpy(np.array(weights["log_std"], dtype=np.float32)))


class TorchQModel(TorchModel):
    """The built-in Q-network (DQN family) of a :class:`~rlstack.models.catalog.QModelSpec`.

    Args:
        spec: The catalog's Q-network description.
    """

    def _head(self, layers: tuple[LayerSpec, ...], out: LayerSpec, x: torch.Tensor) -> torch.Tensor:
        for layer in layers:
            x = self._run(layer, x)
        return self._run(out, x)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        """Returns ``Q(s, .)`` as ``[B, num_actions]`` for flat observations."""
        spec = self.spec
        features = self._encode(spec.encoder, obs)
        advantages = self._head(spec.advantage_hiddens, spec.advantage_out, features)
        if spec.value_out is None:
            return advantages
        # Dueling: Q = V + A - mean_a A, which keeps V and A identifiable.
        value = self._head(spec.value_hiddens, spec.value_out, features)
        return value + advantages - advantages.mean(dim=1, keepdim=True)
