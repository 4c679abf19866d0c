"""TorchModelV2: classic RLlib's torch model base, and the adapter of shortcut models.

Used as in RLlib 1.13::

    class MyModel(TorchModelV2, nn.Module):
        def __init__(self, obs_space, action_space, num_outputs, model_config, name, **kw):
            TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name)
            nn.Module.__init__(self)
            ...

        def forward(self, input_dict, state, seq_lens):
            ...
            return logits, state

        def value_function(self):
            return self._value  # [B]

``super().__init__(obs_space, action_space, num_outputs, model_config, name)`` works too:
it initialises the ``nn.Module`` part when the class is one.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import torch
from torch import nn

from rlstack.models.modelv2 import ModelV2


class TorchModelV2(ModelV2):
    """The base of torch ModelV2s; subclasses also derive from ``torch.nn.Module``.

    Args:
        obs_space: The observation space (see :func:`rlstack.models.modelv2.model_obs_space`).
        action_space: The action space.
        num_outputs: Size of the output the action distribution reads.
        model_config: The ``model`` sub-dict of the trainer's config.
        name: The model's name.
        **kwargs: Ignored: 1.13's examples pass their ``custom_model_config`` entries
            on to this constructor.
    """

    def __init__(self, obs_space: gym.Space, action_space: gym.Space, num_outputs: int, model_config: dict,
                 name: str, **kwargs: Any) -> None:
        ModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name, framework="torch")
        # The super().__init__ style reaches no nn.Module.__init__ (ModelV2 does not chain
        # it): run it here, once; the 1.13 style's own call afterwards finds no layers yet.
        if isinstance(self, nn.Module) and "_parameters" not in self.__dict__:
            nn.Module.__init__(self)

    @property
    def tower_stats(self) -> dict[str, Any]:
        """A dict a classic RLlib torch loss may write statistics into (1.13 gathered it
        from each GPU tower); rlstack keeps what is written and reads nothing from it."""
        return self.__dict__.setdefault("_tower_stats", {})

    def variables(self, as_dict: bool = False) -> list[torch.Tensor] | dict[str, torch.Tensor]:
        """Every parameter and buffer (``state_dict()``), as a list or by name."""
        state = self.state_dict()  # type: ignore[attr-defined]
        return dict(state) if as_dict else list(state.values())

    def trainable_variables(self, as_dict: bool = False) -> list[torch.Tensor] | dict[str, torch.Tensor]:
        """The parameters that require gradients, as a list or by name."""
        named = {name: p for name, p in self.named_parameters() if p.requires_grad}  # type: ignore[attr-defined]
        return named if as_dict else list(named.values())


class ShortcutTorchModel(TorchModelV2, nn.Module):
    """A ModelV2 around rlstack's shortcut custom model: an ``nn.Module`` called on flat
    observations that returns ``(dist_inputs [B, n], values [B])``.

    Args:
        module: The user's module.
        obs_space: The observation space it was built with.
        action_space: The action space.
        num_outputs: Size of its ``dist_inputs``.
        model_config: The ``model`` sub-dict.
    """

    def __init__(self, module: nn.Module, obs_space: gym.Space, action_space: gym.Space, num_outputs: int,
                 model_config: dict) -> None:
        TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, "model")
        nn.Module.__init__(self)
        self.wrapped = module
        self._values: torch.Tensor | None = None

    def policy_and_value(self, obs_flat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.wrapped(obs_flat)

    def forward(self, input_dict: dict[str, Any], state: list[torch.Tensor],
                seq_lens: Any) -> tuple[torch.Tensor, list[torch.Tensor]]:
        obs = input_dict["obs_flat"]
        outputs, self._values = self.wrapped(obs.reshape(obs.shape[0], -1))
        return outputs, state

    def value_function(self) -> torch.Tensor:
        if self._values is None:
            raise ValueError("value_function() is read after a forward call; call the model first.")
        return self._values
