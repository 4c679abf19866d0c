"""TorchModel: the catalog's ModelSpec as a torch ModelV2 (the built-in network).

Policies call :meth:`TorchModel.policy_and_value` on flat observations (the direct
path, which PPO's closed-form gradient in ``closed_form.py`` mirrors); users' code calls
it as any 1.13 model, ``model(input_dict, state, seq_lens)`` then ``model.value_function()``.
``fcnet.FullyConnectedNetwork`` and ``visionnet.VisionNetwork`` are this class with
classic RLlib's constructor.

Images arrive flattened in HWC order; they are reshaped, moved to NCHW for the convs and
moved back to NHWC before flattening, so the flattened features have the same order as
in the TF model (which convolves in NHWC) and weights convert one-to-one.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from rlstack.models.specs import EncoderSpec, LayerSpec, ModelSpec, QModelSpec
from rlstack.models.torch.misc import same_padding_1d
from rlstack.models.torch.torch_modelv2 import TorchModelV2

_ACTIVATIONS = {
    "tanh": torch.tanh,
    "relu": F.relu,
    "swish": F.silu,
    "silu": F.silu,
    "elu": F.elu,
    "linear": None,
}


def layer_module(spec: LayerSpec) -> nn.Module:
    """The torch module of one layer spec (``nn.Linear`` or ``nn.Conv2d``, unpadded:
    :func:`run_layer` pads "same" convs as TF does)."""
    if spec.kind == "dense":
        return nn.Linear(*spec.kernel_shape)
    kh, kw, cin, cout = spec.kernel_shape
    return nn.Conv2d(cin, cout, (kh, kw), stride=spec.stride)


def run_layer(layers: nn.ModuleDict, layer: LayerSpec, x: torch.Tensor) -> torch.Tensor:
    """Applies ``layers[layer.name]`` and the layer's activation to ``x``."""
    if layer.kind == "conv" and layer.padding == "same":
        kh, kw = layer.kernel_shape[:2]
        top, bottom = same_padding_1d(x.shape[2], kh, layer.stride)
        left, right = same_padding_1d(x.shape[3], kw, layer.stride)
        x = F.pad(x, (left, right, top, bottom))
    x = layers[layer.name](x)
    activation = _ACTIVATIONS[layer.activation]
    return activation(x) if activation is not None else x


def encode(layers: nn.ModuleDict, encoder: EncoderSpec, obs: torch.Tensor) -> torch.Tensor:
    """The features of flat observations ``obs [B, size]`` through ``encoder``'s layers
    (held in ``layers`` by name): each image component through its CNN (in NHWC order
    once flattened, as the TF model), the vector columns through the dense layers, then
    the concatenation through ``post_fc``."""
    parts = []
    if encoder.vector_columns:
        x = obs[:, encoder.column_index]
        for layer in encoder.fc:
            x = run_layer(layers, layer, x)
        parts.append(x)
    for branch in encoder.images:
        comp = branch.component
        x = obs[:, comp.start : comp.start + comp.size].reshape(-1, *comp.shape).permute(0, 3, 1, 2)
        for layer in branch.convs:
            x = run_layer(layers, layer, x)
        parts.append(x.permute(0, 2, 3, 1).reshape(x.shape[0], -1))
    x = parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)
    for layer in encoder.post_fc:
        x = run_layer(layers, layer, x)
    return x


def get_layer_weights(layers: nn.ModuleDict, specs: dict[str, LayerSpec], copy: bool = True) -> dict[str, np.ndarray]:
    """The weights of ``layers`` in the canonical (TF) layout, as numpy copies, or with
    ``copy=False`` as views of the (CPU) parameters' memory."""
    weights = {}
    for name, module in layers.items():
        kernel = module.weight.detach().cpu().numpy()
        kernel = kernel.T if specs[name].kind == "dense" else kernel.transpose(2, 3, 1, 0)
        bias = module.bias.detach().cpu().numpy()
        weights[f"{name}/kernel"] = np.array(kernel, order="C", copy=True) if copy else kernel
        weights[f"{name}/bias"] = bias.copy() if copy else bias
    return weights


@torch.no_grad()
def set_layer_weights(layers: nn.ModuleDict, specs: dict[str, LayerSpec], weights: dict[str, np.ndarray]) -> None:
    """Loads canonical-layout weights into ``layers``.

    Raises:
        ValueError: If a weight has the wrong shape.
    """
    for name, module in layers.items():
        kernel = np.asarray(weights[f"{name}/kernel"])
        kernel = kernel.T if specs[name].kind == "dense" else kernel.transpose(3, 2, 0, 1)
        if tuple(kernel.shape) != tuple(module.weight.shape):
            raise ValueError(
                f"Weight {name}/kernel has shape {weights[f'{name}/kernel'].shape}, which does "
                "not fit this model; was it saved with another model config?"
            )
        # np.array copies: arrays from Ray's object store are read-only.
        module.weight.copy_(torch.from_numpy(np.array(kernel, dtype=np.float32)))
        module.bias.copy_(torch.from_numpy(np.array(weights[f"{name}/bias"], dtype=np.float32)))


class TorchModel(TorchModelV2, nn.Module):
    """The built-in policy-and-value network.

    Args:
        spec: The catalog's description of every layer.
        obs_space: The observation space the model sees (default: a Box of the flat
            observation size).
        action_space: The action space (default: None).
        name: The model's name.
    """

    def __init__(self, spec: ModelSpec | QModelSpec, obs_space: gym.Space | None = None,
                 action_space: gym.Space | None = None, name: str = "default_model") -> None:
        if obs_space is None:
            obs_space = gym.spaces.Box(-np.inf, np.inf, (spec.obs_size,), np.float32)
        num_outputs = spec.num_actions if isinstance(spec, QModelSpec) else spec.num_outputs
        TorchModelV2.__init__(self, obs_space, action_space, num_outputs, spec.model_config, name)
        nn.Module.__init__(self)
        self.spec = spec
        self._values: torch.Tensor | None = None
        self.layer_specs: dict[str, LayerSpec] = {layer.name: layer for layer in spec.layers}
        self.layers = nn.ModuleDict()
        for layer in spec.layers:
            self.layers[layer.name] = layer_module(layer)
        self.log_std = nn.Parameter(torch.zeros(spec.action_dim)) if spec.free_log_std else None

    def _run(self, layer: LayerSpec, x: torch.Tensor) -> torch.Tensor:
        return run_layer(self.layers, layer, x)

    def _encode(self, encoder: EncoderSpec, obs: torch.Tensor) -> torch.Tensor:
        return encode(self.layers, encoder, obs)

    def policy_and_value(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Returns ``(dist_inputs [B, num_outputs], values [B])`` for flat observations."""
        features = self._encode(self.spec.encoder, obs)
        if self.spec.logits is None:  # no head asked for: the outputs are the features
            dist_inputs = features
        else:
            dist_inputs = self.layers["logits"](features)
        if self.log_std is not None:
            dist_inputs = torch.cat([dist_inputs, self.log_std.expand_as(dist_inputs)], dim=1)
        vf_features = features if self.spec.vf_encoder is None else self._encode(self.spec.vf_encoder, obs)
        values = self.layers["value_out"](vf_features).squeeze(1)
        return dist_inputs, values

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """Returns ``values [B]`` only (skips the policy head when the encoder is separate)."""
        if self.spec.vf_encoder is None:
            return self.policy_and_value(obs)[1]
        return self.layers["value_out"](self._encode(self.spec.vf_encoder, obs)).squeeze(1)

    def forward(self, input_dict: dict[str, Any], state: list[torch.Tensor],
                seq_lens: Any) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Classic RLlib's call: ``(outputs, state)`` from ``input_dict["obs_flat"]``;
        :meth:`value_function` then returns the values of the same rows."""
        obs = input_dict["obs_flat"].float()
        outputs, self._values = self.policy_and_value(obs.reshape(obs.shape[0], -1))
        return outputs, state

    def value_function(self) -> torch.Tensor:
        """The values ``[B]`` of the last :meth:`forward` call."""
        if self._values is None:
            raise ValueError("value_function() is read after a forward call; call the model first.")
        return self._values

    def get_canonical_weights(self) -> dict[str, np.ndarray]:
        """Weights in the catalog's canonical (TF) layout, as numpy arrays."""
        weights = get_layer_weights(self.layers, self.layer_specs)
        if self.log_std is not None:
            weights["log_std"] = self.log_std.detach().cpu().numpy().copy()
        return weights

    @torch.no_grad()
    def set_canonical_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Loads weights in the canonical layout.

        Raises:
            ValueError: If a weight is missing or has the wrong shape.
        """
        set_layer_weights(self.layers, self.layer_specs, weights)
        if self.log_std is not None:
            self.log_std.copy_(torch.from_numpy(np.array(weights["log_std"], dtype=np.float32)))


class TorchQModel(TorchModel):
    """The built-in Q-network (DQN family) of a :class:`~rlstack.models.specs.QModelSpec`.

    Distributional specs (``num_atoms > 1``) output logits per action and atom; noisy
    specs draw fresh factorised noise at every call with ``noise=True`` (or use
    ``fixed_noise``: ``{layer name: (eps_in, eps_out)}``, raw Gaussian draws) and use the
    mean weights with ``noise=False``.

    Args:
        spec: The catalog's Q-network description.
    """

    fixed_noise: dict[str, tuple[np.ndarray, np.ndarray]] | None = None

    def _noisy(self, layer: LayerSpec, x: torch.Tensor, noise: bool) -> torch.Tensor:
        # y = x W_mu + b_mu + ((x * f(e_in)) W_sigma + b_sigma) * f(e_out), f(e) = sign(e) sqrt|e|
        # (factorised Gaussian noise, Fortunato et al. 2018, eq. 10-11), without forming
        # the [in, out] noise matrix.
        y = self.layers[layer.name](x)
        if not noise:
            return y
        fan_in, fan_out = layer.kernel_shape
        if self.fixed_noise is not None:
            eps_in, eps_out = (torch.as_tensor(e, dtype=x.dtype, device=x.device) for e in self.fixed_noise[layer.name])
        else:
            eps_in, eps_out = torch.randn(fan_in, device=x.device), torch.randn(fan_out, device=x.device)
        f_in, f_out = eps_in.sign() * eps_in.abs().sqrt(), eps_out.sign() * eps_out.abs().sqrt()
        return y + self.layers[f"{layer.name}_sigma"](x * f_in) * f_out

    def _head(self, layers: tuple[LayerSpec, ...], out: LayerSpec, x: torch.Tensor, noise: bool = True) -> torch.Tensor:
        if not self.spec.noisy:
            for layer in layers:
                x = self._run(layer, x)
            return self._run(out, x)
        for layer in layers:
            x = F.relu(self._noisy(layer, x, noise))
        return self._noisy(out, x, noise)

    def policy_and_value(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(Q(s, .), max_a Q(s, a))``: the Q-values are the outputs, their maximum the
        value (the ModelV2 call and exported models: noisy layers use their mean weights)."""
        q = self.q_values(obs, noise=False)
        return q, q.max(dim=1).values

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """``max_a Q(s, a)`` ``[B]`` (noisy layers at their mean weights)."""
        return self.q_values(obs, noise=False).max(dim=1).values

    def q_logits(self, obs: torch.Tensor, noise: bool = True) -> torch.Tensor:
        """The heads' outputs as ``[B, num_actions, num_atoms]``: Q-values (one atom) or
        the logits of each action's value distribution."""
        spec = self.spec
        features = self._encode(spec.encoder, obs)
        advantages = self._head(spec.advantage_hiddens, spec.advantage_out, features, noise)
        advantages = advantages.reshape(-1, spec.num_actions, spec.num_atoms)
        if spec.value_out is None:
            return advantages
        # Dueling: Q = V + A - mean_a A (per atom when distributional), which keeps V and A identifiable.
        value = self._head(spec.value_hiddens, spec.value_out, features, noise).unsqueeze(1)
        return value + advantages - advantages.mean(dim=1, keepdim=True)

    def q_values(self, obs: torch.Tensor, noise: bool = True) -> torch.Tensor:
        """Returns ``Q(s, .)`` as ``[B, num_actions]`` for flat observations; with atoms
        ``Q(s, a) = sum_i z_i softmax(logits(s, a))_i``."""
        logits = self.q_logits(obs, noise)
        if self.spec.num_atoms == 1:
            return logits.squeeze(2)
        support = torch.as_tensor(self.spec.support, device=logits.device)
        return (torch.softmax(logits, dim=2) * support).sum(dim=2)
