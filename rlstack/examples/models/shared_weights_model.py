"""Models whose middle layer is shared by every policy that uses them: 1.13's
``ray.rllib.examples.models.shared_weights_model``, which its multi-agent CartPole example
registers as ``"model1"`` / ``"model2"`` and gives to alternate policies.

Each model has its own first layer (observation -> 64, ReLU), its own logits and value
heads, and between them ONE 64 -> 64 ReLU layer per process, built on first use and
shared by every model instance: both policies' optimizers train it, and a worker that
loads either policy's weights loads it. The TF classes (``SharedWeightsModel1``,
``SharedWeightsModel2``, ``TF2SharedWeightsModel``: one shared Keras layer; rlstack's TF
is TF 2, so 1.13's TF1 variable scopes are not needed) and the torch class
(``TorchSharedWeightsModel``) are made on first access, so importing this module imports
neither framework, and a name imports only its own::

    from rlstack.examples.models.shared_weights_model import TorchSharedWeightsModel
    ModelCatalog.register_custom_model("model1", TorchSharedWeightsModel)
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

__all__ = ["SharedWeightsModel1", "SharedWeightsModel2", "TF2SharedWeightsModel", "TorchSharedWeightsModel"]

HIDDEN = 64


# The shared layers and the classes are made once per process; the classes carry plain
# names, so pickling them (Ray, checkpoints' configs) refers to this module by name and
# every process gets its own one shared layer.


@cache
def _torch_shared_layer() -> Any:
    from torch import nn

    from rlstack.models.torch.misc import SlimFC

    return SlimFC(HIDDEN, HIDDEN, activation_fn=nn.ReLU, initializer=nn.init.xavier_uniform_)


@cache
def _torch_model() -> type:
    import torch
    from torch import nn

    from rlstack.models.torch.misc import SlimFC
    from rlstack.models.torch.torch_modelv2 import TorchModelV2

    class TorchSharedWeightsModel(TorchModelV2, nn.Module):
        """Own first layer and heads around the process's one shared 64 -> 64 layer (torch)."""

        def __init__(self, observation_space: Any, action_space: Any, num_outputs: int, model_config: dict,
                     name: str) -> None:
            TorchModelV2.__init__(self, observation_space, action_space, num_outputs, model_config, name)
            nn.Module.__init__(self)
            inputs = int(np.prod(observation_space.shape))
            self.first_layer = SlimFC(inputs, HIDDEN, activation_fn=nn.ReLU, initializer=nn.init.xavier_uniform_)
            self.last_layer = SlimFC(HIDDEN, num_outputs, initializer=nn.init.xavier_uniform_)
            self.vf = SlimFC(HIDDEN, 1, initializer=nn.init.xavier_uniform_)
            self._global_shared_layer = _torch_shared_layer()
            self._output: torch.Tensor | None = None

        def forward(self, input_dict: dict, state: list, seq_lens: Any) -> tuple[torch.Tensor, list]:
            self._output = self._global_shared_layer(self.first_layer(input_dict["obs"].float()))
            return self.last_layer(self._output), []

        def value_function(self) -> torch.Tensor:
            return torch.reshape(self.vf(self._output), [-1])

    TorchSharedWeightsModel.__qualname__ = "TorchSharedWeightsModel"
    TorchSharedWeightsModel.__module__ = __name__
    return TorchSharedWeightsModel


@cache
def _tf_shared_layer() -> Any:
    from rlstack.models.tf.framework import tf

    return tf.keras.layers.Dense(HIDDEN, activation=tf.nn.relu, name="fc_shared")


@cache
def _tf_model(class_name: str) -> type:
    from rlstack.models.tf.framework import tf
    from rlstack.models.tf.tf_modelv2 import TFModelV2

    def __init__(self: Any, observation_space: Any, action_space: Any, num_outputs: int, model_config: dict,
                 name: str) -> None:
        TFModelV2.__init__(self, observation_space, action_space, num_outputs, model_config, name)
        inputs = tf.keras.layers.Input(observation_space.shape)
        hidden = _tf_shared_layer()(tf.keras.layers.Dense(HIDDEN, activation=tf.nn.relu)(inputs))
        logits = tf.keras.layers.Dense(num_outputs, activation=None)(hidden)
        value = tf.keras.layers.Dense(1, activation=None)(hidden)
        self.base_model = tf.keras.models.Model(inputs, [logits, value])

    def forward(self: Any, input_dict: dict, state: list, seq_lens: Any) -> tuple[Any, list]:
        model_out, self._value_out = self.base_model(input_dict["obs"])
        return model_out, []

    def value_function(self: Any) -> Any:
        return tf.reshape(self._value_out, [-1])

    doc = "Own first layer and heads around the process's one shared 64 -> 64 layer (TF)."
    return type(class_name, (TFModelV2,), {"__init__": __init__, "forward": forward, "value_function": value_function,
                                          "__doc__": doc, "__module__": __name__, "__qualname__": class_name})


def __getattr__(name: str) -> type:
    if name == "TorchSharedWeightsModel":
        return _torch_model()
    if name in ("SharedWeightsModel1", "SharedWeightsModel2", "TF2SharedWeightsModel"):
        return _tf_model(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
