"""VisionNetwork: classic RLlib's conv TF model (``ray.rllib.models.tf.visionnet``).

The built-in network under 1.13's constructor for image observations: the catalog's
conv layers (``conv_filters``, ``conv_activation``; defaults by image size) then
``post_fcnet_hiddens``, a ``num_outputs`` output layer and a value head.
"""

from __future__ import annotations

from rlstack.models.tf.fcnet import FullyConnectedNetwork

__all__ = ["VisionNetwork"]


class VisionNetwork(FullyConnectedNetwork):
    """Conv layers over ``[H, W, C]`` observations (see :class:`FullyConnectedNetwork`
    for the arguments); ``input_dict["obs"]`` may be images or flat rows."""

    flatten_observations = False
