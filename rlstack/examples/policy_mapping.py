"""Policy mapping functions for YAML files, which cannot hold a function: name one as
``policy_mapping_fn: rlstack.examples.policy_mapping:agent_id_mod_2``.
"""

from __future__ import annotations

from typing import Any


def agent_id_mod_2(agent_id: Any, episode: Any = None, worker: Any = None, **kwargs: Any) -> str:
    """Agent ``i`` -> policy ``"pol<i % 2>"`` (agents 0, 2, ... share ``pol0``; 1, 3, ...
    ``pol1``), as in 1.13's multi-agent CartPole example with two policies.

    Examples:
        >>> [agent_id_mod_2(i) for i in range(4)]
        ['pol0', 'pol1', 'pol0', 'pol1']
    """
    return f"pol{int(agent_id) % 2}"
