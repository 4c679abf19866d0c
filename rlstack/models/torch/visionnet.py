"""VisionNetwork: the catalog's CNN with classic RLlib's constructor.

It is :class:`~rlstack.models.torch.model.TorchModel` built from the catalog's spec for
an image space (``conv_filters``, ``conv_activation``, ``post_fcnet_hiddens``): the same
network the policies build, with a ``num_outputs`` head and a value head.
"""

from __future__ import annotations

import gymnasium as gym

from rlstack.errors import ConfigError
from rlstack.models.catalog import ModelCatalog
from rlstack.models.specs import initial_weights
from rlstack.models.torch.fcnet import _initial_seed
from rlstack.models.torch.model import TorchModel


class VisionNetwork(TorchModel):
    """A CNN over ``[B, H, W, C]`` images, then the heads.

    Args:
        obs_space: A rank-3 Box (HWC).
        action_space: The action space.
        num_outputs: Size of the output; None or 0 leaves the head out.
        model_config: The ``model`` sub-dict.
        name: The model's name.

    Raises:
        ConfigError: If ``obs_space`` is not an image space.
    """

    def __init__(self, obs_space: gym.Space, action_space: gym.Space, num_outputs: int | None,
                 model_config: dict, name: str) -> None:
        space = getattr(obs_space, "original_space", obs_space)
        if not (isinstance(space, gym.spaces.Box) and len(space.shape) == 3):
            raise ConfigError(
                f"VisionNetwork reads images (a Box of shape [height, width, channels]); got {space}. Use "
                "FullyConnectedNetwork for vector observations.")
        # 1.13's FullyConnectedNetwork / VisionNetwork ignored use_lstm (the LSTM wrapper
        # went around them): a custom model that wraps one passes its config along.
        spec = ModelCatalog.get_model_spec(space, action_space, {**model_config, "use_lstm": False},
                                           num_outputs=int(num_outputs or 0))
        super().__init__(spec, obs_space, action_space, name)
        self.set_canonical_weights(initial_weights(spec, _initial_seed()))
