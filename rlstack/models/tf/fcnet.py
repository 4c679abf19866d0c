"""FullyConnectedNetwork: classic RLlib's dense TF model (``ray.rllib.models.tf.fcnet``).

The built-in network (:class:`~rlstack.models.tf.model.TFModel`) under 1.13's
constructor, so that a custom model can wrap one, as RLlib's action-masking example does::

    self.internal_model = FullyConnectedNetwork(
        orig_space["observations"], action_space, num_outputs, model_config, name + "_internal")
    logits, _ = self.internal_model({"obs": input_dict["obs"]["observations"]})
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from rlstack.models.catalog import ModelCatalog
from rlstack.models.specs import ModelSpec
from rlstack.models.tf.model import TFModel

__all__ = ["FullyConnectedNetwork", "network_spec"]


def network_spec(obs_space: gym.Space, num_outputs: int | None, model_config: dict, flatten: bool) -> ModelSpec:
    """The catalog's network for ``obs_space`` with a ``num_outputs``-wide output layer.

    Args:
        obs_space: What the network reads (its ``original_space`` is ignored: 1.13's
            networks read the flat observation).
        num_outputs: Width of the ``logits`` layer (with ``free_log_std``, half of it is
            predicted and half is a free variable); None or 0 for no output layer.
        model_config: The ``model`` config.
        flatten: Read the observation as one flat vector (dense layers only) instead
            of letting the catalog give image shapes their conv layers.
    """
    config = {key: value for key, value in (model_config or {}).items()
              if key not in ("custom_model", "custom_model_config", "custom_action_dist", "use_lstm")}
    config["free_log_std"] = bool(config.get("free_log_std", False)) and bool(num_outputs)
    space = obs_space
    if flatten or not isinstance(obs_space, gym.spaces.Box):
        size = int(np.prod(obs_space.shape)) if obs_space.shape else 1
        space = gym.spaces.Box(-np.inf, np.inf, (size,), np.float32)
    # The output's size is num_outputs; the action space is not read.
    return ModelCatalog.get_model_spec(space, gym.spaces.Discrete(2), config, num_outputs=int(num_outputs or 0))


class FullyConnectedNetwork(TFModel):
    """Dense layers (``fcnet_hiddens``, ``fcnet_activation``, ``vf_share_layers``,
    ``free_log_std``) over the flat observation, a ``num_outputs`` output layer and a
    value head.

    Args:
        obs_space: The observation space (read flat).
        action_space: The action space.
        num_outputs: Output width; None or 0 makes the last hidden layer the output
            (``self.num_outputs`` is then its size).
        model_config: The ``model`` config.
        name: The model's name.
    """

    flatten_observations = True

    def __init__(self, obs_space: gym.Space, action_space: gym.Space, num_outputs: int | None, model_config: dict,
                 name: str) -> None:
        spec = network_spec(obs_space, num_outputs, model_config, flatten=self.flatten_observations)
        # Fresh random weights, with the built-in layers' init (normalised columns).
        super().__init__(spec, obs_space, action_space, model_config, name, logits_layer=bool(num_outputs),
                         seed=None)
