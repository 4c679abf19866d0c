"""The TensorFlow implementation of the catalog's models and action distributions, and
classic RLlib's TF model API (``tf_modelv2``, ``fcnet``, ``visionnet``, ``misc``,
``tf_action_dist``)."""

from typing import Any

__all__ = ["FullyConnectedNetwork", "RecurrentNetwork", "TFModelV2", "VisionNetwork"]

# 1.13's `from ray.rllib.models.tf import VisionNetwork`: the classes load on first use, so
# importing this package does not import TensorFlow.
_HOMES = {"FullyConnectedNetwork": "fcnet", "RecurrentNetwork": "recurrent_net", "TFModelV2": "tf_modelv2",
          "VisionNetwork": "visionnet"}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
    globals()[name] = value
    return value
