"""Action-masking models, the shape of classic RLlib 1.13's example.

The observation is a Dict of ``"action_mask"`` (1.0 allowed, 0.0 masked) and
``"observations"``; the model runs a built-in fully connected network on
``"observations"`` and adds ``clamp(log(mask), min=FLOAT_MIN)`` to its logits, so a
masked action's probability is 0 (its logit near the float32 minimum, not -inf, which
would make the loss NaN). ``custom_model_config={"no_masking": True}`` leaves the
logits unmasked (to see the env refuse a masked action).

``TorchActionMaskModel`` is defined here; ``ActionMaskModel`` (TensorFlow) lives in
``tf_action_mask_model`` and is reached through this module lazily, so that::

    from rlstack.examples.models.action_mask_model import ActionMaskModel, TorchActionMaskModel

works as 1.13's import did, and importing the module imports neither framework: each
class is built on first access.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ActionMaskModel", "TorchActionMaskModel"]


def _check_space(obs_space: Any, name: str) -> Any:
    import gymnasium as gym

    orig_space = getattr(obs_space, "original_space", obs_space)
    if not (isinstance(orig_space, gym.spaces.Dict) and "action_mask" in orig_space.spaces
            and "observations" in orig_space.spaces):
        raise ValueError(
            f"{name} reads Dict observations with keys 'action_mask' and 'observations' (e.g. "
            f"rlstack.examples.env.action_mask_env.ActionMaskEnv); got {orig_space}.")
    return orig_space


def _build_torch_class() -> type:
    import torch
    from torch import nn

    from rlstack.models.torch.fcnet import FullyConnectedNetwork as TorchFC
    from rlstack.models.torch.torch_modelv2 import TorchModelV2
    from rlstack.utils.torch_utils import FLOAT_MIN

    class TorchActionMaskModel(TorchModelV2, nn.Module):
        """Masks the logits of a fully connected network with ``obs["action_mask"]``.

        Args:
            obs_space: The (flattened) observation space; its ``original_space`` is the
                Dict of ``action_mask`` and ``observations``.
            action_space: A Discrete action space.
            num_outputs: The number of actions.
            model_config: The ``model`` sub-dict (the inner network's layers).
            name: The model's name.
            no_masking: Leave the logits unmasked (``custom_model_config``).
        """

        def __init__(self, obs_space: Any, action_space: Any, num_outputs: int, model_config: dict, name: str,
                     **kwargs: Any) -> None:
            orig_space = _check_space(obs_space, type(self).__name__)
            TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name, **kwargs)
            nn.Module.__init__(self)
            self.internal_model = TorchFC(orig_space["observations"], action_space, num_outputs, model_config,
                                          name + "_internal")
            custom_config = model_config.get("custom_model_config") or {}
            self.no_masking = bool(kwargs.get("no_masking", custom_config.get("no_masking", False)))

        def forward(self, input_dict: dict, state: list, seq_lens: Any) -> tuple[torch.Tensor, list]:
            """The inner network's logits on ``obs["observations"]``, masked."""
            action_mask = input_dict["obs"]["action_mask"]
            logits, _ = self.internal_model({"obs": input_dict["obs"]["observations"]})
            if self.no_masking:
                return logits, state
            # log(1) = 0 keeps an allowed logit; log(0) = -inf becomes FLOAT_MIN.
            inf_mask = torch.clamp(torch.log(action_mask), min=FLOAT_MIN)
            return logits + inf_mask, state

        def value_function(self) -> torch.Tensor:
            """The inner network's values."""
            return self.internal_model.value_function()

    # Pickled by reference (Ray ships it to workers): this module's __getattr__ finds it.
    TorchActionMaskModel.__module__ = __name__
    TorchActionMaskModel.__qualname__ = "TorchActionMaskModel"
    return TorchActionMaskModel


_built: dict[str, type] = {}


def __getattr__(name: str) -> type:
    if name == "TorchActionMaskModel":
        if name not in _built:
            _built[name] = _build_torch_class()
        return _built[name]
    if name == "ActionMaskModel":
        from rlstack.examples.models.tf_action_mask_model import ActionMaskModel

        return ActionMaskModel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
