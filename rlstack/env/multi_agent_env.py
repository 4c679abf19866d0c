"""MultiAgentEnv: several agents in one env, each observed, acting and rewarded by id.

RLlib 1.13's ``ray.rllib.env.multi_agent_env`` on gymnasium's conventions::

    obs, infos = env.reset(seed=0)                    # {agent_id: obs}, {agent_id: info}
    obs, rewards, terminateds, truncateds, infos = env.step({agent_id: action, ...})

Every return is a dict by agent id; ``terminateds`` and ``truncateds`` also hold
``"__all__"``, which ends the episode for every agent. An agent acts at a step exactly
when the previous ``reset``/``step`` returned an observation for it, so agents may act in
turns, appear mid-episode (their first observation) and leave (their own
``terminateds[agent_id]`` or ``truncateds[agent_id]``); an agent that left does not come
back within the same episode.

``observation_space`` / ``action_space`` are either one space shared by every agent, or
a ``gymnasium.spaces.Dict`` keyed by agent id (1.13's later "preferred format", with the
ids in ``_agent_ids`` / :meth:`MultiAgentEnv.get_agent_ids`).
:func:`make_multi_agent` turns a single-agent env into one of N independent copies.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym

__all__ = ["DEFAULT_AGENT_ID", "MultiAgentEnv", "agent_space", "make_multi_agent", "spaces_by_agent"]

# The key of terminateds / truncateds that ends the episode for every agent.
ALL = "__all__"
# The id of the one agent of a single-agent env (1.13's), as callbacks and multi-agent
# runs see it.
DEFAULT_AGENT_ID = "agent0"
# 1.13's key of a multi-agent env's global state in an observation dict (an env that
# shares one with its agents, e.g. for a centralised critic, names it so).
ENV_STATE = "state"


class MultiAgentEnv(gym.Env):
    """An env of several agents; every reset/step value is a dict by agent id.

    Subclasses set ``observation_space`` and ``action_space`` (one space for all agents,
    or a ``gym.spaces.Dict`` by agent id), ``_agent_ids`` (the ids that can appear), and
    implement :meth:`reset` and :meth:`step`.
    """

    observation_space: gym.Space | None = None
    action_space: gym.Space | None = None

    def __init__(self) -> None:
        if not hasattr(self, "_agent_ids"):
            self._agent_ids: set[Any] = set()

    def reset(self, *, seed: int | None = None,
              options: dict | None = None) -> tuple[dict[Any, Any], dict[Any, dict]]:
        """Starts an episode. Subclasses implement it; ``super().reset(seed=seed)`` seeds
        ``self.np_random``, as gymnasium's ``Env.reset`` does.

        Args:
            seed: Seeds the env's random generator (gymnasium's convention).
            options: Env-specific reset options.

        Returns:
            ``(obs, infos)``: the first observation of each agent that acts first, and
            an info dict per agent (may be empty).
        """
        return super().reset(seed=seed, options=options)  # type: ignore[return-value]

    def step(self, action_dict: dict[Any, Any]) -> tuple[dict, dict, dict, dict, dict]:
        """Applies one action per agent that was observed last.

        Args:
            action_dict: ``{agent_id: action}`` for every agent in the last observations.

        Returns:
            ``(obs, rewards, terminateds, truncateds, infos)``, dicts by agent id;
            ``terminateds["__all__"]`` / ``truncateds["__all__"]`` end the episode.
        """
        raise NotImplementedError

    def get_agent_ids(self) -> set[Any]:
        """The ids of the agents that can appear in this env (may be empty when unknown)."""
        return set(getattr(self, "_agent_ids", set()))

    def observation_space_contains(self, x: dict[Any, Any]) -> bool:
        """Whether every agent's observation in ``x`` fits its space."""
        return all(agent_space(self, agent_id, "observation").contains(obs) for agent_id, obs in x.items())

    def action_space_contains(self, x: dict[Any, Any]) -> bool:
        """Whether every agent's action in ``x`` fits its space."""
        return all(agent_space(self, agent_id, "action").contains(action) for agent_id, action in x.items())

    def action_space_sample(self, agent_ids: list[Any] | None = None) -> dict[Any, Any]:
        """A random action for each agent of ``agent_ids`` (None: every known agent)."""
        ids = self.get_agent_ids() if agent_ids is None else agent_ids
        return {agent_id: agent_space(self, agent_id, "action").sample() for agent_id in ids}

    def observation_space_sample(self, agent_ids: list[Any] | None = None) -> dict[Any, Any]:
        """A random observation for each agent of ``agent_ids`` (None: every known agent)."""
        ids = self.get_agent_ids() if agent_ids is None else agent_ids
        return {agent_id: agent_space(self, agent_id, "observation").sample() for agent_id in ids}


def spaces_by_agent(env: Any, kind: str) -> bool:
    """Whether ``env``'s ``<kind>_space`` is a ``Dict`` keyed by agent id (1.13's preferred
    format) rather than one space every agent shares.

    An explicit ``_spaces_in_preferred_format`` attribute decides; otherwise a Dict whose
    keys are exactly the env's agent ids is taken as one space per agent.
    """
    space = getattr(env, f"{kind}_space", None)
    if not isinstance(space, gym.spaces.Dict):
        return False
    explicit = getattr(env, "_spaces_in_preferred_format", None)
    if explicit is not None:
        return bool(explicit)
    ids = env.get_agent_ids() if hasattr(env, "get_agent_ids") else set()
    return bool(ids) and set(space.spaces) == set(ids)


def agent_space(env: Any, agent_id: Any, kind: str) -> gym.Space:
    """The observation (``kind="observation"``) or action space of one agent of ``env``.

    Raises:
        KeyError: If the env keys its spaces by agent id and has none for ``agent_id``.
    """
    space = getattr(env, f"{kind}_space")
    if not spaces_by_agent(env, kind):
        return space
    if agent_id not in space.spaces:
        raise KeyError(f"{type(env).__name__}.{kind}_space has no space for agent {agent_id!r}; it has "
                       f"{sorted(map(str, space.spaces))}.")
    return space.spaces[agent_id]


def make_multi_agent(env_name_or_creator: str | Callable[[Any], gym.Env]) -> type[MultiAgentEnv]:
    """A MultiAgentEnv class of N independent copies of a single-agent env (1.13's helper).

    The class takes an ``env_config`` (an EnvContext) whose ``num_agents`` (default 1) is
    the number of copies; agents are ``0 .. N-1``, each with the single env's spaces. An
    agent that terminates or truncates gets no further actions; the episode ends for all
    once every agent has ended (``"__all__"``).

    Examples:
        >>> env = make_multi_agent("CartPole-v1")({"num_agents": 2})
        >>> obs, infos = env.reset(seed=0)
        >>> sorted(obs), env.observation_space.shape
        ([0, 1], (4,))

    Args:
        env_name_or_creator: A gymnasium id, or a creator ``fn(env_config) -> gym.Env``
            (called with the config, ``num_agents`` removed).
    """

    class MultiEnv(MultiAgentEnv):
        def __init__(self, config: Any = None) -> None:
            super().__init__()
            config = dict(config or {})
            num = int(config.pop("num_agents", 1))
            if isinstance(env_name_or_creator, str):
                self.envs = [gym.make(env_name_or_creator) for _ in range(num)]
            else:
                self.envs = [env_name_or_creator(config) for _ in range(num)]
            self.observation_space = self.envs[0].observation_space
            self.action_space = self.envs[0].action_space
            self._agent_ids = set(range(num))
            self.terminateds: set[int] = set()
            self.truncateds: set[int] = set()

        def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
            self.terminateds, self.truncateds = set(), set()
            obs, infos = {}, {}
            for i, env in enumerate(self.envs):
                # Each copy gets its own seed, so the agents do not see the same episode.
                obs[i], infos[i] = env.reset(seed=None if seed is None else seed + i, options=options)
            return obs, infos

        def step(self, action_dict: dict) -> tuple[dict, dict, dict, dict, dict]:
            obs, rewards, terminateds, truncateds, infos = {}, {}, {}, {}, {}
            for i, action in action_dict.items():
                obs[i], rewards[i], terminateds[i], truncateds[i], infos[i] = self.envs[i].step(action)
                if terminateds[i]:
                    self.terminateds.add(i)
                elif truncateds[i]:
                    self.truncateds.add(i)
            ended = len(self.terminateds) + len(self.truncateds)
            terminateds[ALL] = ended == len(self.envs) and not self.truncateds
            truncateds[ALL] = ended == len(self.envs) and bool(self.truncateds)
            return obs, rewards, terminateds, truncateds, infos

        def render(self) -> Any:
            return self.envs[0].render()

        def close(self) -> None:
            for env in self.envs:
                env.close()

    name = env_name_or_creator if isinstance(env_name_or_creator, str) else getattr(
        env_name_or_creator, "__name__", "env")
    MultiEnv.__name__ = MultiEnv.__qualname__ = f"MultiAgent({name})"
    return MultiEnv
