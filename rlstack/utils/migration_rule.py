"""The migration rule from RLlib 1.x module names to rlstack's, on dotted names.

``rlstack migrate`` applies it to a user's code; the env registry applies it to an env
given as a ``"ray.rllib.examples.env.random_env.RandomEnv"`` path, a string the codemod
leaves as it is.
"""

from __future__ import annotations

# Longest prefix first: the first rule that matches a dotted name applies.
RENAMES: tuple[tuple[str, str], ...] = (
    ("ray.rllib.agents", "rlstack.trainers"),
    ("ray.rllib.policy", "rlstack.policies"),
    ("ray.rllib", "rlstack"),
)


def renamed_module(name: str) -> str:
    """``name`` (a dotted module name) by the migration rule; other names unchanged."""
    if name == "gym" or name.startswith("gym."):
        return "gymnasium" + name[len("gym"):]
    for old, new in RENAMES:
        if name == old or name.startswith(old + "."):
            return new + name[len(old):]
    return name

# Modules RLlib 1.x's `ray[rllib]` installed that user code imports by itself: import name ->
# (the distribution, rlstack's extra that installs it). pyproject.toml's `compat` extra
# lists the same distributions (tests/unit/test_packaging.py holds the two together).
COMPAT_IMPORTS: dict[str, tuple[str, str]] = {
    "scipy": ("scipy", "compat"),
    "tree": ("dm-tree", "compat"),
}

# 1.x config keys that chose the framework before `framework` did, by value: the
# `framework` they stand for ("eager": True ran TF 2's eager mode, rlstack's "tf2").
FRAMEWORK_KEYS: dict[str, dict[bool, str]] = {
    "eager": {True: "tf2", False: "tf"},
    "use_pytorch": {True: "torch", False: "tf"},
}
