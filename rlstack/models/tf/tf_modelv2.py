"""TFModelV2: classic RLlib's TensorFlow model base (``ray.rllib.models.tf.tf_modelv2``).

Users subclass it as in RLlib 1.13, typically around a Keras model::

    class MyKerasModel(TFModelV2):
        def __init__(self, obs_space, action_space, num_outputs, model_config, name):
            super().__init__(obs_space, action_space, num_outputs, model_config, name)
            self.inputs = tf.keras.layers.Input(shape=obs_space.shape, name="observations")
            ...
            self.base_model = tf.keras.Model(self.inputs, [layer_out, value_out])

        def forward(self, input_dict, state, seq_lens):
            model_out, self._value_out = self.base_model(input_dict["obs"])
            return model_out, state

        def value_function(self):
            return tf.reshape(self._value_out, [-1])

The policy finds the model's variables by walking its attributes (Keras 3 layers and
models, ``tf.Module``\\ s, ``tf.Variable``\\ s, nested ModelV2s, and lists / dicts of
them), plus whatever was passed to :meth:`TFModelV2.register_variables`. Keras 3
variables are handed to the policy as the ``tf.Variable`` they wrap, which rlstack's
optimizers (raw resource ops, ``policies/tf_policy.py``) update in place, so the Keras
model sees every step.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import gymnasium as gym

from rlstack.models.modelv2 import ModelV2
from rlstack.models.tf.framework import tf

__all__ = ["ShortcutTFModel", "TFModelV2"]


def _as_tf_variable(var: Any) -> tf.Variable | None:
    # A Keras 3 variable (TF backend) is not a tf.Variable but holds one as `.value`.
    if isinstance(var, tf.Variable):
        return var
    inner = getattr(var, "value", None)
    return inner if isinstance(inner, tf.Variable) else None


def _is_keras_layer(obj: Any) -> bool:
    # Duck-typed so this module never imports Keras itself.
    return hasattr(type(obj), "trainable_weights") and hasattr(obj, "weights") and not isinstance(obj, tf.Module)


class TFModelV2(ModelV2):
    """Base of TensorFlow models (classic RLlib's ``TFModelV2``).

    Args:
        obs_space: The observation space (flattened for non-Box spaces, with the env's
            space as ``obs_space.original_space``).
        action_space: The action space.
        num_outputs: Size of the output the action distribution reads.
        model_config: The ``model`` sub-dict of the trainer's config.
        name: The model's name.
    """

    def __init__(self, obs_space: gym.Space, action_space: gym.Space, num_outputs: int | None, model_config: dict,
                 name: str) -> None:
        super().__init__(obs_space, action_space, num_outputs, model_config, name, framework="tf")
        self.var_list: list[Any] = []

    def register_variables(self, variables: Iterable[Any]) -> None:
        """Adds variables to the model's own list (1.x models call this; attributes are
        found without it)."""
        self.var_list.extend(variables)

    def variables(self, as_dict: bool = False) -> list[tf.Variable] | dict[str, tf.Variable]:
        """Every variable of the model (Keras 3 variables as the ``tf.Variable`` they wrap).

        Args:
            as_dict: Return ``{name: variable}`` (Keras paths such as ``"fc1/kernel"``
                where Keras named them) instead of a list.
        """
        return self._collect(trainable_only=False, as_dict=as_dict)

    def trainable_variables(self, as_dict: bool = False) -> list[tf.Variable] | dict[str, tf.Variable]:
        """The trainable variables, in a stable order (see :meth:`variables`)."""
        return self._collect(trainable_only=True, as_dict=as_dict)

    def _collect(self, trainable_only: bool, as_dict: bool) -> list[tf.Variable] | dict[str, tf.Variable]:
        named: dict[str, tf.Variable] = {}
        seen: set[int] = set()
        visited: set[int] = {id(self)}

        def add(var: Any, name: str | None = None) -> None:
            inner = _as_tf_variable(var)
            if inner is None or id(inner) in seen or (trainable_only and not inner.trainable):
                return
            seen.add(id(inner))
            name = name or getattr(var, "path", None) or inner.name
            base, i = name, 1
            while name in named:  # e.g. several unnamed tf.Variables ("Variable:0")
                name, i = f"{base}_{i}", i + 1
            named[name] = inner

        def walk(obj: Any, path: str) -> None:
            if _as_tf_variable(obj) is not None:
                add(obj)
                return
            if id(obj) in visited:
                return
            if isinstance(obj, TFModelV2):
                # A nested model's variables are named after the attribute holding it.
                visited.add(id(obj))
                for name, var in obj._collect(trainable_only, as_dict=True).items():
                    add(var, f"{path}/{name}")
            elif _is_keras_layer(obj):
                visited.add(id(obj))
                for var in (obj.trainable_weights if trainable_only else obj.weights):
                    add(var)
            elif isinstance(obj, tf.Module):
                visited.add(id(obj))
                for var in (obj.trainable_variables if trainable_only else obj.variables):
                    add(var)
            elif isinstance(obj, (list, tuple)):
                visited.add(id(obj))
                for i, item in enumerate(obj):
                    walk(item, f"{path}_{i}")
            elif isinstance(obj, dict):
                visited.add(id(obj))
                for key, item in obj.items():
                    walk(item, f"{path}_{key}")

        for var in self.var_list:
            add(var)
        for key, value in vars(self).items():
            if key not in ("obs_space", "action_space", "model_config", "var_list", "view_requirements"):
                walk(value, key)
        return named if as_dict else list(named.values())

    def update_ops(self) -> list:
        """Classic RLlib's batch-norm update ops: none under TF2 (an empty list)."""
        return []


class ShortcutTFModel(TFModelV2):
    """rlstack's shortcut custom model (a ``tf.Module`` or callable on flat observations
    returning ``(dist_inputs, values)``) as a TFModelV2.

    Args:
        module: The user's model.
        obs_space: The observation space the model was built with.
        action_space: The action space.
        num_outputs: Size of ``dist_inputs``.
        model_config: The ``model`` config.
    """

    def __init__(self, module: Any, obs_space: gym.Space, action_space: gym.Space, num_outputs: int,
                 model_config: dict) -> None:
        super().__init__(obs_space, action_space, num_outputs, model_config, getattr(module, "name", "model"))
        self.module = module
        self._values: tf.Tensor | None = None

    def policy_and_value(self, obs_flat: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        dist_inputs, values = self.module(obs_flat)
        return dist_inputs, tf.reshape(values, [-1])

    def forward(self, input_dict: dict[str, Any], state: list, seq_lens: Any) -> tuple[tf.Tensor, list]:
        dist_inputs, self._values = self.policy_and_value(input_dict["obs_flat"])
        return dist_inputs, state

    def value_function(self) -> tf.Tensor:
        return self._values
