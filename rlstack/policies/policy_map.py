"""What a multi-agent run knows of its policies: :class:`PolicySpec` (how to build one;
1.13's ``ray.rllib.policy.policy.PolicySpec``, also importable from there) and
:class:`PolicyMap` (the built ones of a rollout worker, by policy id)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import gymnasium as gym

    from rlstack.policies.policy import Policy

__all__ = ["PolicyMap", "PolicySpec"]


class PolicySpec(NamedTuple):
    """How to build one policy of a multi-agent run (1.13's fields and order, so 1.13's
    4-tuples ``(policy_class, observation_space, action_space, config)`` read the same).

    Attributes:
        policy_class: A Policy subclass (or its ``"module:Class"`` path); None: the
            trainer's own policy class for its framework.
        observation_space: None: taken from the env (the space of an agent mapped to this
            policy, or the env's one space).
        action_space: As ``observation_space``.
        config: Config keys of the trainer that this policy overrides (e.g. ``{"lr":
            1e-3, "gamma": 0.95, "model": {...}}``), merged over the trainer's config.
    """

    policy_class: type[Policy] | str | None = None
    observation_space: gym.Space | None = None
    action_space: gym.Space | None = None
    config: dict[str, Any] | None = None


class PolicyMap(dict):
    """``{policy_id: Policy}`` of a rollout worker (1.13's ``PolicyMap``; rlstack keeps
    every policy in memory, so it is a plain dict whose missing key names the known ones)."""

    def __missing__(self, policy_id: str) -> Policy:
        raise KeyError(f"Unknown policy id {policy_id!r}; the policies are {sorted(map(str, self))}.")
