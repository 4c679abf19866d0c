"""Classic RLlib's ``build_torch_policy``: :func:`~rlstack.policies.policy_template.build_policy_class`
for torch."""

from __future__ import annotations

from typing import Any

from rlstack.policies.policy_template import build_policy_class

__all__ = ["build_torch_policy"]


def build_torch_policy(name: str, *, loss_fn: Any, **template: Any) -> type:
    """A :class:`~rlstack.policies.torch_policy.TorchPolicy` subclass from classic RLlib's
    template functions (see :mod:`rlstack.policies.policy_template`)."""
    return build_policy_class(name, "torch", loss_fn=loss_fn, **template)
