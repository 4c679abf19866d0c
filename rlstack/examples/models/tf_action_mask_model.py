"""ActionMaskModel (TF): classic RLlib's action-masking example model.

For envs whose observation is a Dict of ``"action_mask"`` (1.0 allowed, 0.0 masked) and
``"observations"`` (e.g. :class:`rlstack.examples.env.action_mask_env.ActionMaskEnv`).
A :class:`~rlstack.models.tf.fcnet.FullyConnectedNetwork` reads the observations; the
mask's log, floored at :data:`~rlstack.utils.tf_utils.FLOAT_MIN`, is added to its
logits, so a masked action's probability is exactly zero and the policy never samples
or picks it. ``custom_model_config={"no_masking": True}`` turns masking off (the policy
then picks masked actions, which ActionMaskEnv refuses)::

    config["model"] = {"custom_model": ActionMaskModel}
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from rlstack.examples.models.action_mask_model import _check_space
from rlstack.models.tf.fcnet import FullyConnectedNetwork
from rlstack.models.tf.framework import tf
from rlstack.models.tf.tf_modelv2 import TFModelV2
from rlstack.utils.tf_utils import FLOAT_MIN

__all__ = ["ActionMaskModel"]


class ActionMaskModel(TFModelV2):
    """Masks the logits of a dense network with ``obs["action_mask"]``.

    Args:
        obs_space: The flattened observation space; its ``original_space`` must be a
            Dict with ``"action_mask"`` and ``"observations"``.
        action_space: The (Discrete) action space.
        num_outputs: The number of actions.
        model_config: The ``model`` config (``custom_model_config["no_masking"]``).
        name: The model's name.
        **kwargs: ``custom_model_config`` entries (``no_masking``).

    Raises:
        ValueError: If the observation space is not such a Dict.
    """

    def __init__(self, obs_space: gym.Space, action_space: gym.Space, num_outputs: int, model_config: dict,
                 name: str, **kwargs: Any) -> None:
        orig_space = _check_space(obs_space, "ActionMaskModel")
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        self.internal_model = FullyConnectedNetwork(orig_space["observations"], action_space, num_outputs,
                                                    model_config, name + "_internal")
        custom_config = dict(model_config.get("custom_model_config") or {}, **kwargs)
        self.no_masking = bool(custom_config.get("no_masking", False))

    def forward(self, input_dict: dict[str, Any], state: list, seq_lens: Any) -> tuple[tf.Tensor, list]:
        action_mask = input_dict["obs"]["action_mask"]
        logits, _ = self.internal_model({"obs": input_dict["obs"]["observations"]})
        if self.no_masking:
            return logits, state
        # log(1) = 0 keeps an allowed action's logit; log(0) = -inf, floored to the
        # smallest float32, removes a masked one without producing NaN or inf.
        inf_mask = tf.maximum(tf.math.log(action_mask), FLOAT_MIN)
        return logits + inf_mask, state

    def value_function(self) -> tf.Tensor:
        return self.internal_model.value_function()
