"""``_separate_vf_optimizer``: which layers of the built-in model its value optimizer trains.

1.13's APPO (TF) returned two losses, the policy's and the value function's, each
minimised by its own optimizer; with ``vf_share_layers: False`` the two touch disjoint
layers. rlstack's learners give each variable to one optimizer, so the split is made here
from the model's spec: the value encoder (``vf_`` layers) and ``value_out`` go to the
value optimizer, everything else (the policy encoder, ``logits``, a free ``log_std``) to
the policy optimizer.
"""

from __future__ import annotations

from typing import Any

from rlstack.errors import ConfigError

__all__ = ["value_layer_names"]


def value_layer_names(policy: Any) -> frozenset[str]:
    """The names of the value branch's layers in ``policy``'s built-in model.

    Args:
        policy: An IMPALA or APPO policy (torch or TF).

    Returns:
        The layer names (the keys of the model's ``layer_specs``).

    Raises:
        ConfigError: If the model is a custom or recurrent one, or shares its encoder
            between policy and value function: no layer set belongs to the value loss alone.
    """
    spec = getattr(policy.model, "spec", None) if policy.builtin_model else None
    if spec is None or getattr(spec, "lstm", None) is not None or getattr(spec, "vf_encoder", None) is None:
        raise ConfigError(
            "_separate_vf_optimizer=True needs the built-in feed-forward model with vf_share_layers=False (its "
            "value layers are then the value loss's alone); set model: {vf_share_layers: False}, or for a custom "
            "or recurrent model subclass the policy and return both optimizers from make_optimizers().")
    return frozenset([*(layer.name for layer in spec.vf_encoder.layers), spec.value_out.name])
