"""Example multi-agent envs, 1.13's ``ray.rllib.examples.env.multi_agent``.

``MultiAgentCartPole`` and ``MultiAgentPendulum`` (N independent copies,
``env_config["num_agents"]``) are registered by name (``env: MultiAgentCartPole`` in a
YAML file needs no import); the others test the multi-agent sampler: all agents at once
(:class:`BasicMultiAgent`), one agent per step (:class:`RoundRobinMultiAgent`), agents
that appear and leave mid-episode (:class:`FlexAgentsMultiAgent`), and an agent that is
done long before the episode (:class:`EarlyDoneMultiAgent`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from rlstack.env.multi_agent_env import MultiAgentEnv, make_multi_agent
from rlstack.examples.env.mock_env import MockEnv

__all__ = ["BasicMultiAgent", "EarlyDoneMultiAgent", "FlexAgentsMultiAgent", "MultiAgentCartPole",
           "MultiAgentPendulum", "RoundRobinMultiAgent"]


def _cartpole_200(config: Any) -> gym.Env:
    # 1.13's CartPole-v0: CartPole-v1's dynamics with a 200-step time limit (gymnasium
    # warns that the v0 id is out of date).
    return gym.make("CartPole-v1", max_episode_steps=200)


class MultiAgentCartPole(make_multi_agent(_cartpole_200)):
    """``num_agents`` independent CartPoles of 1.13's CartPole-v0 (200-step episodes),
    agents 0..N-1."""


class MultiAgentPendulum(make_multi_agent("Pendulum-v1")):
    """``num_agents`` independent Pendulum-v1 copies, agents 0..N-1."""


def _num_agents(num: int | Mapping, default: int) -> int:
    # 1.13's examples took the number itself; registered by name they get an env_config.
    return int(num.get("num_agents", default)) if isinstance(num, Mapping) else int(num)


class BasicMultiAgent(MultiAgentEnv):
    """``num`` independent agents acting at every step, each done after 25 steps.

    Args:
        num: The number of agents (or an env_config with ``num_agents``).
    """

    def __init__(self, num: int | Mapping = 2) -> None:
        super().__init__()
        self.agents = [MockEnv(25) for _ in range(_num_agents(num, 2))]
        self._agent_ids = set(range(len(self.agents)))
        self.done: set[int] = set()
        self.observation_space = gym.spaces.Discrete(2)
        self.action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        self.done = set()
        return {i: agent.reset()[0] for i, agent in enumerate(self.agents)}, {}

    def step(self, action_dict: dict) -> tuple[dict, dict, dict, dict, dict]:
        obs, rewards, terminateds, truncateds, infos = {}, {}, {}, {}, {}
        for i, action in action_dict.items():
            obs[i], rewards[i], terminateds[i], truncateds[i], infos[i] = self.agents[i].step(action)
            if terminateds[i] or truncateds[i]:
                self.done.add(i)
        terminateds["__all__"] = len(self.done) == len(self.agents)
        truncateds["__all__"] = False
        return obs, rewards, terminateds, truncateds, infos


class RoundRobinMultiAgent(MultiAgentEnv):
    """``num`` agents acting in turns (one per step), each done after 5 of its own steps
    (or after its entry of ``lengths``); one that is done is skipped.

    Args:
        num: The number of agents (or an env_config with ``num_agents``).
        lengths: Each agent's steps until it is done (default 5 each).
    """

    def __init__(self, num: int | Mapping = 2, lengths: list[int] | None = None) -> None:
        super().__init__()
        self.agents = [MockEnv(n) for n in (lengths or [5] * _num_agents(num, 2))]
        self._agent_ids = set(range(len(self.agents)))
        self.observation_space = gym.spaces.Discrete(10)
        self.action_space = gym.spaces.Discrete(2)
        self.turn = 0
        self.done: set[int] = set()

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        self.turn, self.done = 0, set()
        for agent in self.agents:
            agent.reset()
        return {0: 0}, {}

    def step(self, action_dict: dict) -> tuple[dict, dict, dict, dict, dict]:
        (i, action), = action_dict.items()
        obs, reward, terminated, _, _ = self.agents[i].step(action)
        if terminated:
            self.done.add(i)
        live = [j for j in range(len(self.agents)) if j not in self.done]
        next_obs: dict = {i: obs} if terminated else {}
        if live:
            self.turn = next(j for j in [*range(i + 1, len(self.agents)), *range(i + 1)] if j in live)
            next_obs[self.turn] = self.agents[self.turn].i
        return next_obs, {i: reward}, {i: terminated, "__all__": not live}, {"__all__": False}, {}


class EarlyDoneMultiAgent(RoundRobinMultiAgent):
    """Two agents taking turns; agent 0 is done after 3 of its steps, agent 1 after 10,
    so agent 1 acts alone for the rest of the episode."""

    def __init__(self, config: Any = None) -> None:
        super().__init__(lengths=[3, 10])


class FlexAgentsMultiAgent(MultiAgentEnv):
    """Agents that appear and leave: new ids join at random steps, a random agent is
    truncated away at others, each agent terminates after ``max_episode_len`` (25) of its
    own steps; the episode ends when no agent is left. Agent ids are 0, 1, 2, ... in order
    of appearance; the env's generator (seeded by ``reset``) makes it reproducible.

    Args:
        config: ``{"max_episode_len": int}`` (an EnvContext too).
    """

    def __init__(self, config: Any = None) -> None:
        super().__init__()
        self.max_episode_len = int((config or {}).get("max_episode_len", 25))
        self.observation_space = gym.spaces.Discrete(2)
        self.action_space = gym.spaces.Discrete(2)
        self.agents: dict[int, MockEnv] = {}
        self.next_id = 0

    def _spawn(self) -> int:
        agent_id = self.next_id
        self.agents[agent_id] = MockEnv(self.max_episode_len)
        self.agents[agent_id].reset()
        self.next_id += 1
        return agent_id

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        self.agents, self.next_id = {}, 0
        return {self._spawn(): 0}, {}

    def step(self, action_dict: dict) -> tuple[dict, dict, dict, dict, dict]:
        obs, rewards, terminateds, truncateds = {}, {}, {}, {}
        for i, action in action_dict.items():
            obs[i], rewards[i], terminateds[i], _, _ = self.agents[i].step(action)
            if terminateds[i]:
                del self.agents[i]
        rng: np.random.Generator = self.np_random
        if rng.random() > 0.75 and action_dict:
            obs[self._spawn()] = 0  # a new agent joins
        if len(self.agents) > 1 and rng.random() > 0.75:
            gone = int(rng.choice(sorted(self.agents)))
            truncateds[gone] = True  # an agent leaves
            del self.agents[gone]
        terminateds["__all__"] = not self.agents
        truncateds["__all__"] = False
        return obs, rewards, terminateds, truncateds, {}
