"""PettingZoo games as rlstack multi-agent envs: 1.13's ``PettingZooEnv`` (turn-based AEC
games) and ``ParallelPettingZooEnv`` (games where every agent acts at once), on
gymnasium's five-value step.

    from pettingzoo.classic import rps_v2
    from rlstack.env import PettingZooEnv
    from rlstack.env.registry import register_env

    register_env("RockPaperScissors", lambda config: PettingZooEnv(rps_v2.env()))

The wrappers only call the game's own API (``reset``, ``step``, ``last``, ``observe``,
``agents``, ``possible_agents`` and the per-agent spaces), so this module does not import
``pettingzoo``; install it with the ``pettingzoo`` extra.

Spaces: when every agent has the same observation and action space (1.13 required it),
``observation_space`` / ``action_space`` are those spaces; otherwise they are
``gymnasium.spaces.Dict`` keyed by agent id (rlstack's per-agent form), so games whose
players differ work too.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from rlstack.env.multi_agent_env import ALL, MultiAgentEnv
from rlstack.errors import EnvError

__all__ = ["ParallelPettingZooEnv", "PettingZooEnv"]


def _agent_spaces(env: Any, kind: str) -> gym.Space:
    # The game's space for ``kind`` ("observation" / "action"): one shared space, or a Dict
    # by agent id. PettingZoo >= 1.15 has methods ``observation_space(agent)``; older
    # games a dict ``observation_spaces``.
    method = getattr(env, f"{kind}_space", None)
    spaces = {agent: method(agent) if callable(method) else getattr(env, f"{kind}_spaces")[agent]
              for agent in env.possible_agents}
    first = next(iter(spaces.values()))
    if all(space == first for space in spaces.values()):
        return first
    return gym.spaces.Dict(spaces)


class _PettingZooBase(MultiAgentEnv):
    """What both wrappers share: agent ids, spaces, rendering and closing."""

    def __init__(self, env: Any) -> None:
        super().__init__()
        if not hasattr(env, "possible_agents"):
            raise EnvError(f"{type(self).__name__} wraps a PettingZoo env (one with possible_agents, reset and step); "
                           f"got {type(env).__name__}. Pass e.g. rps_v2.env() (AEC) or rps_v2.parallel_env() "
                           "(ParallelPettingZooEnv).")
        self._wrapped = env
        self._agent_ids = set(env.possible_agents)
        self.observation_space = _agent_spaces(env, "observation")
        self.action_space = _agent_spaces(env, "action")
        self.render_mode = getattr(env, "render_mode", None)

    def get_sub_environments(self) -> Any:
        """The wrapped game, unwrapped (1.13's accessor)."""
        return self._wrapped.unwrapped

    def render(self) -> Any:
        """The game's ``render()``."""
        return self._wrapped.render()

    def close(self) -> None:
        """Closes the game."""
        self._wrapped.close()

    def _end_flags(self, terminateds: dict, truncateds: dict) -> tuple[dict, dict]:
        # "__all__": the episode ends when the game has no agents left; terminated if every
        # agent that left did so by termination, else truncated.
        terminateds, truncateds = dict(terminateds), dict(truncateds)
        ended = not self._wrapped.agents
        terminateds[ALL] = ended and all(terminateds.values())
        truncateds[ALL] = ended and not terminateds[ALL]
        return terminateds, truncateds


class PettingZooEnv(_PettingZooBase):
    """A turn-based (AEC) PettingZoo game: each step, only the agent whose turn it is
    observes and acts (1.13's ``ray.rllib.env.wrappers.pettingzoo_env.PettingZooEnv``).

    ``step({agent: action})`` plays that agent's move, then hands back the next agent to
    act with everything PettingZoo's ``last()`` says of it: its observation, the rewards
    it collected since its previous move, its flags and info. Agents that are done on the
    way are stepped with ``None`` (PettingZoo's rule) and returned with their final
    observation and rewards; the episode ends when no agent is left.

    Args:
        env: A PettingZoo AEC env, e.g. ``rps_v2.env()``.
    """

    def __init__(self, env: Any) -> None:
        self.env = env  # 1.13's attribute name
        super().__init__(env)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        """Starts a game; returns the first agent to act with its observation and info."""
        self.env.reset(seed=seed, options=options)
        obs, _, _, _, info = self.env.last()
        agent = self.env.agent_selection
        return {agent: obs}, {agent: info}

    def step(self, action_dict: dict[Any, Any]) -> tuple[dict, dict, dict, dict, dict]:
        """Plays the move of the agent whose turn it is (see the class docstring).

        Raises:
            EnvError: If ``action_dict`` has no action for that agent.
        """
        agent = self.env.agent_selection
        if agent not in action_dict:
            game = getattr(self.env, "metadata", {}).get("name") or type(self.env.unwrapped).__name__
            raise EnvError(f"It is the turn of agent {agent!r} in {game}, but the actions are for "
                           f"{sorted(map(str, action_dict))}; an AEC game takes one action, from the agent that "
                           "observed last.")
        self.env.step(action_dict[agent])
        obs, rewards, terminateds, truncateds, infos = {}, {}, {}, {}, {}
        while self.env.agents:
            agent = self.env.agent_selection
            obs[agent], rewards[agent], terminateds[agent], truncateds[agent], infos[agent] = self.env.last()
            if not (terminateds[agent] or truncateds[agent]):
                break
            self.env.step(None)  # a done agent leaves with a None move (PettingZoo's rule)
        return obs, rewards, *self._end_flags(terminateds, truncateds), infos


class ParallelPettingZooEnv(_PettingZooBase):
    """A PettingZoo parallel game, where every live agent acts at each step (1.13's
    ``ParallelPettingZooEnv``); the episode ends when the game has no agents left.

    Args:
        env: A PettingZoo parallel env, e.g. ``rps_v2.parallel_env()``.
    """

    def __init__(self, env: Any) -> None:
        self.par_env = env  # 1.13's attribute name
        super().__init__(env)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        """Starts a game: every agent's first observation and info."""
        out = self.par_env.reset(seed=seed, options=options)
        obs, infos = out if isinstance(out, tuple) else (out, {})
        return obs, {agent: (infos or {}).get(agent, {}) for agent in obs}

    def step(self, action_dict: dict[Any, Any]) -> tuple[dict, dict, dict, dict, dict]:
        """Every live agent's move at once; returns the game's dicts with ``"__all__"``."""
        obs, rewards, terminateds, truncateds, infos = self.par_env.step(action_dict)
        return obs, rewards, *self._end_flags(terminateds, truncateds), infos
