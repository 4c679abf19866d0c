"""The actor-critic blocks of ``models/blocks.py`` in torch (SAC, TD3, DDPG).

:class:`TorchActorCritic` holds the actor and the critics of an
:class:`~rlstack.models.blocks.ActorCriticSpec`; :class:`TorchCritics` is the critics
alone, which is also what a target network copies. Twin critics over dense layers run
as one stacked product per layer (kernels ``[2, in, out]``): one batched matmul instead
of two per layer, forward and backward. Weights come and go in the canonical layout
(``"q/fc_0/kernel"`` ``[in, out]``, ...), whatever the internal stacking.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlstack.models.blocks import ActorCriticSpec, CriticSpec
from rlstack.models.specs import LayerSpec
from rlstack.models.torch.model import _ACTIVATIONS, encode, get_layer_weights, layer_module, set_layer_weights
from rlstack.models.torch.torch_modelv2 import TorchModelV2


def _critic_stack(critic: CriticSpec) -> list[LayerSpec]:
    # The dense layers of one critic in order: fc, post_fc, out.
    return [*critic.encoder.fc, *critic.encoder.post_fc, critic.out]


class TorchCritics(nn.Module):
    """One or two Q critics.

    Args:
        spec: The actor-critic spec whose critics to build.
    """

    def __init__(self, spec: ActorCriticSpec) -> None:
        super().__init__()
        self.critic_specs = spec.critics
        self.discrete = spec.discrete
        self.stacked = spec.stacked_critics
        if self.stacked:
            first = spec.critics[0]
            self.columns = first.encoder.column_index
            self.layer_names = [[layer.name for layer in _critic_stack(critic)] for critic in spec.critics]
            self.activations = [_ACTIVATIONS[layer.activation] for layer in _critic_stack(first)]
            shapes = [layer.kernel_shape for layer in _critic_stack(first)]
            self.kernels = nn.ParameterList([nn.Parameter(torch.zeros(2, n_in, n_out)) for n_in, n_out in shapes])
            self.biases = nn.ParameterList([nn.Parameter(torch.zeros(2, 1, n_out)) for _, n_out in shapes])
        else:
            self.layer_specs = {layer.name: layer for critic in spec.critics for layer in critic.layers}
            self.layers = nn.ModuleDict({name: layer_module(layer) for name, layer in self.layer_specs.items()})

    def forward(self, obs: torch.Tensor, actions: torch.Tensor | None = None, frozen: bool = False,
                first_only: bool = False) -> torch.Tensor:
        """Q-values of every critic: ``[C, B]`` for Q(s, a) (``actions [B, action_dim]``),
        ``[C, B, num_actions]`` for Q(s, .) (no actions).

        ``frozen=True`` reads the weights detached: gradients flow to ``obs`` and
        ``actions`` (an actor's loss) but never into the critics' parameters.
        ``first_only=True`` evaluates the first critic alone (``C`` = 1), as DDPG's and
        TD3's actor losses read it.
        """
        if frozen and not self.stacked:
            params = {name: param.detach() for name, param in self.named_parameters()}
            return torch.func.functional_call(self, params, (obs, actions), {"first_only": first_only})
        x = obs if actions is None else torch.cat([obs, actions], dim=1)
        if self.stacked:
            if not (isinstance(self.columns, slice) and self.columns == slice(0, x.shape[1])):
                x = x[:, self.columns]
            for i, (kernel, bias, activation) in enumerate(zip(self.kernels, self.biases, self.activations)):
                if frozen:
                    kernel, bias = kernel.detach(), bias.detach()
                if first_only:
                    kernel, bias = kernel[:1], bias[:1]
                # [B, in] @ [2, in, out] broadcasts to [2, B, out]; then [2, B, in] @ [2, in, out].
                x = torch.matmul(x, kernel) + bias if i == 0 else torch.baddbmm(bias, x, kernel)
                if activation is not None:
                    x = activation(x)
            q = x
        else:
            critics = self.critic_specs[:1] if first_only else self.critic_specs
            q = torch.stack([self.layers[critic.out.name](encode(self.layers, critic.encoder, x))
                             for critic in critics])
        return q if self.discrete else q.squeeze(-1)

    def get_canonical_weights(self, copy: bool = True) -> dict[str, np.ndarray]:
        """The critics' weights in the canonical layout, as numpy copies (``copy=False``:
        views of the CPU parameters)."""
        if not self.stacked:
            return get_layer_weights(self.layers, self.layer_specs, copy)
        weights = {}
        for j, (kernel, bias) in enumerate(zip(self.kernels, self.biases)):
            kernel, bias = kernel.detach().cpu().numpy(), bias.detach().cpu().numpy()
            for c, names in enumerate(self.layer_names):
                weights[f"{names[j]}/kernel"] = kernel[c].copy() if copy else kernel[c]
                weights[f"{names[j]}/bias"] = bias[c, 0].copy() if copy else bias[c, 0]
        return weights

    @torch.no_grad()
    def set_canonical_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Loads the critics' weights from canonical-layout arrays (other keys are ignored).

        Raises:
            ValueError: If a weight has the wrong shape.
        """
        if not self.stacked:
            set_layer_weights(self.layers, self.layer_specs, weights)
            return
        for j, (kernel, bias) in enumerate(zip(self.kernels, self.biases)):
            kernels = np.stack([np.asarray(weights[f"{names[j]}/kernel"], np.float32) for names in self.layer_names])
            biases = np.stack([np.asarray(weights[f"{names[j]}/bias"], np.float32) for names in self.layer_names])
            if kernels.shape != tuple(kernel.shape):
                raise ValueError(f"Weight {self.layer_names[0][j]}/kernel has shape {kernels.shape[1:]}, which does "
                                 "not fit this model; was it saved with another model config?")
            kernel.copy_(torch.from_numpy(kernels))
            bias.copy_(torch.from_numpy(biases[:, None, :]))


class TorchActorCritic(TorchModelV2, nn.Module):
    """The actor and critics of an :class:`~rlstack.models.blocks.ActorCriticSpec`.

    Policies call :meth:`actor_outputs` and :meth:`critic_values` on flat observations;
    as a ModelV2, ``model(input_dict)`` returns the actor's outputs.

    Args:
        spec: The actor-critic spec.
        obs_space: The observation space (default: a Box of the flat observation size).
        action_space: The action space.
        name: The model's name.
    """

    def __init__(self, spec: ActorCriticSpec, obs_space: gym.Space | None = None,
                 action_space: gym.Space | None = None, name: str = "actor_critic") -> None:
        if obs_space is None:
            obs_space = gym.spaces.Box(-np.inf, np.inf, (spec.obs_size,), np.float32)
        TorchModelV2.__init__(self, obs_space, action_space, spec.actor.num_outputs, spec.model_config, name)
        nn.Module.__init__(self)
        self.spec = spec
        self.actor_specs = {layer.name: layer for layer in spec.actor.layers}
        self.actor = nn.ModuleDict({name: layer_module(layer) for name, layer in self.actor_specs.items()})
        self.critics = TorchCritics(spec)

    def actor_outputs(self, obs: torch.Tensor) -> torch.Tensor:
        """The actor's outputs ``[B, num_outputs]`` for flat observations (distribution
        inputs, or the deterministic actor's pre-tanh actions)."""
        return self.actor["actor/out"](encode(self.actor, self.spec.actor.encoder, obs))

    def critic_values(self, obs: torch.Tensor, actions: torch.Tensor | None = None,
                      frozen: bool = False, first_only: bool = False) -> torch.Tensor:
        """Every critic's Q-values: ``[C, B]`` for Q(s, a), ``[C, B, num_actions]`` for
        Q(s, .); ``frozen=True``: through detached weights, ``first_only=True``: the first
        critic alone (see :meth:`TorchCritics.forward`)."""
        return self.critics(obs, actions, frozen, first_only)

    def policy_and_value(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """ModelV2's flat-observation call (what exports serve): the actor's outputs, and
        the critics' value of the actor's greedy behaviour, ``min_j Q_j(s, a*)`` with
        ``a* = tanh(mean)`` (a deterministic actor's own action for ``"deterministic"``),
        or ``sum_a pi(a|s) min_j Q_j(s, a)`` for a categorical actor."""
        outputs = self.actor_outputs(obs)
        kind = self.spec.actor.kind
        if kind == "categorical":
            probs = torch.softmax(outputs, dim=-1)
            return outputs, (probs * self.critics(obs).min(dim=0).values).sum(dim=-1)
        greedy = torch.tanh(outputs[:, : self.spec.actor.action_dim] if kind == "squashed_gaussian" else outputs)
        return outputs, self.critics(obs, greedy).min(dim=0).values

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """The greedy value of :meth:`policy_and_value` ``[B]``."""
        return self.policy_and_value(obs)[1]

    def actor_parameters(self) -> list[nn.Parameter]:
        """The actor's parameters (what the actor's optimizer steps)."""
        return list(self.actor.parameters())

    def critic_parameters(self) -> list[nn.Parameter]:
        """The critics' parameters (what the critics' optimizer steps)."""
        return list(self.critics.parameters())

    def forward(self, input_dict: dict[str, Any], state: list[torch.Tensor],
                seq_lens: Any) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Classic RLlib's call: the actor's outputs for ``input_dict["obs_flat"]``."""
        obs = input_dict["obs_flat"].float()
        return self.actor_outputs(obs.reshape(obs.shape[0], -1)), state

    def value_function(self) -> torch.Tensor:
        """Not defined: an actor-critic of Q critics has no state-value head."""
        raise NotImplementedError("An actor with Q critics has no value_function(); call critic_values(obs, "
                                  "actions) for Q-values.")

    def get_canonical_weights(self) -> dict[str, np.ndarray]:
        """The actor's and critics' weights in the canonical layout, as numpy copies."""
        return {**get_layer_weights(self.actor, self.actor_specs), **self.critics.get_canonical_weights()}

    def canonical_weight_views(self) -> dict[str, np.ndarray]:
        """:meth:`get_canonical_weights` as views of the parameters' memory (CPU only): a
        numpy acting copy that holds them acts with the weights of the moment, whatever
        updated them in place (optimizer steps, ``set_canonical_weights``)."""
        return {**get_layer_weights(self.actor, self.actor_specs, copy=False),
                **self.critics.get_canonical_weights(copy=False)}

    @torch.no_grad()
    def set_canonical_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Loads canonical-layout weights of the actor and the critics.

        Raises:
            ValueError: If a weight has the wrong shape.
            KeyError: If a weight is missing.
        """
        set_layer_weights(self.actor, self.actor_specs, weights)
        self.critics.set_canonical_weights(weights)
