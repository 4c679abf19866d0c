"""Retired gym ids and their gymnasium successors.

gym 0.21's envs that gymnasium keeps under a newer version (``Pendulum-v0`` is
``Pendulum-v1``, ``FrozenLake-v0`` is ``FrozenLake-v1``, ``LunarLander-v2`` is
``LunarLander-v3``). The table is gymnasium's own registry, read when asked: an id it does
not register whose name it registers under a higher version has that one as successor (the
highest, the version that runs on today's stack). ``rlstack migrate`` rewrites such strings;
the env registry makes the successor, with a warning, when a config names an old id.
"""

from __future__ import annotations

import re

_ID = re.compile(r"^(?P<name>(?:[\w.-]+/)?[A-Za-z][\w.]*)-v(?P<version>\d+)$")


def gymnasium_successor(env_id: str) -> str | None:
    """The id gymnasium registers for a retired gym id, or None (a registered id, a name
    gymnasium does not have, or not an env id at all).

    Examples:
        >>> gymnasium_successor("Pendulum-v0")
        'Pendulum-v1'
        >>> gymnasium_successor("CartPole-v1") is None
        True
    """
    found = _ID.match(env_id)
    if found is None:
        return None
    import gymnasium

    registry = gymnasium.registry
    if env_id in registry:
        return None
    name, version = found["name"], int(found["version"])
    newer = []
    for registered in registry:
        match = _ID.match(registered)
        if match is not None and match["name"] == name and int(match["version"]) > version:
            newer.append(int(match["version"]))
    return f"{name}-v{max(newer)}" if newer else None
