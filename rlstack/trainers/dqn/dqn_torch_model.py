"""Classic RLlib's ``DQNTorchModel``: the base of a custom torch Q-model for DQN.

A subclass's ``forward`` returns an embedding of ``num_outputs`` features; this base
puts the Q-head on top of it (``q_hiddens`` layers, then one output per action, or with
``dueling`` a value stream and an advantage stream combined as ``V + A - mean(A)``), and
:meth:`DQNTorchModel.q_values` is what rlstack's DQN policy reads. The DQN policy passes
its ``hiddens`` and ``dueling`` keys as ``q_hiddens`` and ``dueling``, as 1.13 did.

Distributional (``num_atoms > 1``) and noisy heads are the built-in Q-network's only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import torch
from torch import nn

from rlstack.errors import ConfigError
from rlstack.models.torch.misc import SlimFC
from rlstack.models.torch.torch_modelv2 import TorchModelV2

__all__ = ["DQNTorchModel"]


def check_plain_q_head(num_atoms: int, use_noisy: bool, name: str) -> None:
    """Refuses the distributional and noisy heads a custom Q-model base does not build.

    Raises:
        ConfigError: Naming the keys to change.
    """
    if num_atoms > 1 or use_noisy:
        raise ConfigError(f"{name}: num_atoms={num_atoms} / noisy={use_noisy} build the heads of rlstack's built-in "
                          "Q-network; with a custom Q-model set num_atoms=1 and noisy=False, or drop custom_model.")


class DQNTorchModel(TorchModelV2, nn.Module):
    """A torch Q-model: the subclass's embedding, then the Q-head.

    Args:
        obs_space, action_space, num_outputs, model_config, name: As for any ModelV2
            (``num_outputs``: the size of the embedding ``forward`` returns).
        q_hiddens: The Q-head's hidden layer sizes (the DQN config's ``hiddens``).
        dueling: Separate value and advantage streams.
        dueling_activation: The hidden layers' activation.
        num_atoms, use_noisy, v_min, v_max, sigma0: Accepted at 1 / False only (see
            the module docstring).
        add_layer_norm: Layer normalisation after each hidden layer of the head.
    """

    def __init__(self, obs_space: gym.Space, action_space: gym.Space, num_outputs: int, model_config: dict,
                 name: str, *, q_hiddens: Sequence[int] = (256,), dueling: bool = False,
                 dueling_activation: str = "relu", num_atoms: int = 1, use_noisy: bool = False,
                 v_min: float = -10.0, v_max: float = 10.0, sigma0: float = 0.5, add_layer_norm: bool = False,
                 **kwargs: Any) -> None:
        nn.Module.__init__(self)
        TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name)
        check_plain_q_head(num_atoms, use_noisy, type(self).__name__)
        self.dueling = dueling
        self.advantage_module = self._stream(num_outputs, q_hiddens, int(action_space.n), dueling_activation,
                                             add_layer_norm)
        self.value_module = self._stream(num_outputs, q_hiddens, 1, dueling_activation, add_layer_norm) \
            if dueling else None

    @staticmethod
    def _stream(ins: int, hiddens: Sequence[int], outs: int, activation: str, layer_norm: bool) -> nn.Sequential:
        layers: list[nn.Module] = []
        for size in hiddens:
            layers.append(SlimFC(ins, int(size), activation_fn=activation))
            if layer_norm:
                layers.append(nn.LayerNorm(int(size)))
            ins = int(size)
        layers.append(SlimFC(ins, outs, activation_fn=None))
        return nn.Sequential(*layers)

    def get_q_value_distributions(self, model_out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(action_scores, logits, probs)`` of the advantage stream (1.13's triple; with
        one atom the last two are ones)."""
        scores = self.advantage_module(model_out)
        ones = torch.ones_like(scores).unsqueeze(-1)
        return scores, ones, ones

    def get_state_value(self, model_out: torch.Tensor) -> torch.Tensor:
        """The value stream's ``V(s)`` ``[B, 1]`` (dueling only)."""
        if self.value_module is None:
            raise ValueError(f"{type(self).__name__} has no value stream: it was built with dueling=False.")
        return self.value_module(model_out)

    def q_values(self, obs_flat: torch.Tensor, noise: bool = True) -> torch.Tensor:
        """``Q(s, .)`` ``[B, num_actions]``: the subclass's embedding through the Q-head."""
        model_out, _ = self({"obs": obs_flat, "obs_flat": obs_flat}, self.get_initial_state(), None)
        advantages = self.advantage_module(model_out)
        if self.value_module is None:
            return advantages
        return self.value_module(model_out) + advantages - advantages.mean(dim=1, keepdim=True)
