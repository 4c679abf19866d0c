"""Rock-paper-scissors: PettingZoo's ``rps_v2`` game (its own package) through
:class:`~rlstack.env.wrappers.pettingzoo_env.PettingZooEnv`, registered by name
(``env: RockPaperScissors``), as 1.13's rock-paper-scissors example registered it.

Two players, ``player_0`` and ``player_1``, move in turns within each round; a round
won is +1, lost -1, tied 0; ``env_config["max_cycles"]`` rounds (15) make an episode.
``env_config["parallel"]: True`` wraps ``rps_v2.parallel_env()`` in
:class:`~rlstack.env.wrappers.pettingzoo_env.ParallelPettingZooEnv` instead (both players
move at once).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlstack.env.wrappers.pettingzoo_env import ParallelPettingZooEnv, PettingZooEnv
from rlstack.errors import pip_install

__all__ = ["RockPaperScissors"]


def RockPaperScissors(config: Mapping[str, Any] | None = None) -> PettingZooEnv | ParallelPettingZooEnv:  # noqa: N802
    """PettingZoo's rock-paper-scissors (see the module docstring).

    Raises:
        ImportError: Without PettingZoo, naming the extra that installs it.
    """
    config = dict(config or {})
    try:
        from pettingzoo.classic import rps_v2 as rps
    except ImportError as exc:
        raise ImportError(f"RockPaperScissors is PettingZoo's rps_v2 game: {pip_install('pettingzoo')} "
                          f"({exc}).") from exc
    max_cycles = int(config.get("max_cycles", 15))
    if config.get("parallel"):
        return ParallelPettingZooEnv(rps.parallel_env(max_cycles=max_cycles))
    return PettingZooEnv(rps.env(max_cycles=max_cycles))
