"""Classic RLlib's ``build_tf_policy``: :func:`~rlstack.policies.policy_template.build_policy_class`
for TensorFlow."""

from __future__ import annotations

from typing import Any

from rlstack.policies.policy_template import build_policy_class

__all__ = ["build_tf_policy"]


def build_tf_policy(name: str, *, loss_fn: Any, **template: Any) -> type:
    """A :class:`~rlstack.policies.tf_policy.TFPolicy` subclass from classic RLlib's
    template functions (see :mod:`rlstack.policies.policy_template`); 1.13's
    ``obs_include_prev_action_reward`` is accepted and has no effect (the model's
    ``view_requirements`` say what it reads)."""
    template.pop("obs_include_prev_action_reward", None)
    return build_policy_class(name, "tf", loss_fn=loss_fn, **template)
