"""FullyConnectedNetwork: the built-in network with classic RLlib's constructor.

A custom model may wrap one, as RLlib 1.13's examples do::

    self.internal_model = FullyConnectedNetwork(orig_space["observations"], action_space, num_outputs,
                                                model_config, name + "_internal")

It is :class:`~rlstack.models.torch.model.TorchModel` built from the catalog's spec for
the given spaces: one implementation of the built-in network.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch

from rlstack.models.catalog import ModelCatalog
from rlstack.models.specs import initial_weights
from rlstack.models.torch.model import TorchModel


def _initial_seed() -> int:
    # From torch's generator, so torch.manual_seed makes the init reproducible.
    return int(torch.randint(0, 2**31 - 1, (1,)).item())


class FullyConnectedNetwork(TorchModel):
    """An MLP of ``fcnet_hiddens`` with a ``num_outputs`` head and a value head.

    Args:
        obs_space: The observations it reads (a Box; a flattened space's
            ``original_space`` is read as its structure).
        action_space: The action space.
        num_outputs: Size of the output; None or 0 leaves the head out, so the outputs
            are the last hidden layer (``self.num_outputs`` is then its size).
        model_config: The ``model`` sub-dict (``fcnet_hiddens``, ``fcnet_activation``,
            ``vf_share_layers``, ``free_log_std``, ...).
        name: The model's name.
    """

    def __init__(self, obs_space: gym.Space, action_space: gym.Space, num_outputs: int | None,
                 model_config: dict, name: str) -> None:
        space = getattr(obs_space, "original_space", obs_space)
        if isinstance(space, gym.spaces.Box) and len(space.shape) == 3:
            # A fully connected network reads images flattened (no CNN).
            space = gym.spaces.Box(-np.inf, np.inf, (int(np.prod(space.shape)),), np.float32)
        # 1.13's FullyConnectedNetwork / VisionNetwork ignored use_lstm (the LSTM wrapper
        # went around them): a custom model that wraps one passes its config along.
        spec = ModelCatalog.get_model_spec(space, action_space, {**model_config, "use_lstm": False},
                                           num_outputs=int(num_outputs or 0))
        super().__init__(spec, obs_space, action_space, name)
        self.set_canonical_weights(initial_weights(spec, _initial_seed()))
