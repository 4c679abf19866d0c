"""RLlib 1.13's module path of the policy server (``ray.rllib.env.policy_server_input``):
``PolicyServerInput`` lives in ``rlstack/evaluation/policy_server_input.py`` (an input
reader of the rollout workers, a layer above ``env``), imported on first use so that
``rlstack.env`` never imports ``rlstack.evaluation``; ``Commands`` is the protocol's, in
``rlstack/env/_wire.py``."""

from typing import Any

from rlstack.env._wire import Commands

__all__ = ["PolicyServerInput", "Commands"]


def __getattr__(name: str) -> Any:
    if name == "PolicyServerInput":
        from rlstack.evaluation.policy_server_input import PolicyServerInput

        return PolicyServerInput
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
