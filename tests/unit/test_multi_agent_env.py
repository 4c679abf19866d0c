"""MultiAgentEnv, make_multi_agent, the multi-agent vector env and MultiAgentBatch."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlstack.env import MultiAgentEnv, make_multi_agent
from rlstack.env.multi_agent_env import agent_space, spaces_by_agent
from rlstack.env.multi_agent_vector_env import MultiAgentVectorEnv, SingleAgentAsMultiAgent, make_vector_env
from rlstack.env.vector_env import VectorEnv
from rlstack.errors import EnvError
from rlstack.examples.env.multi_agent import (BasicMultiAgent, FlexAgentsMultiAgent, MultiAgentCartPole,
                                              RoundRobinMultiAgent)
from rlstack.sample_batch import DEFAULT_POLICY_ID, MultiAgentBatch, SampleBatch, concat_samples


class TwoSpaces(MultiAgentEnv):
    """Agents "a" (Box(3) obs, Discrete(2) actions) and "b" (Discrete(4) obs, Box(1) actions)."""

    def __init__(self, config=None):
        super().__init__()
        self._agent_ids = {"a", "b"}
        self.observation_space = gym.spaces.Dict({"a": gym.spaces.Box(-1, 1, (3,)), "b": gym.spaces.Discrete(4)})
        self.action_space = gym.spaces.Dict({"a": gym.spaces.Discrete(2), "b": gym.spaces.Box(-1, 1, (1,))})


# ----- MultiAgentEnv ------------------------------------------------------------------------------

def test_spaces_by_agent_id_or_one_for_all():
    env = TwoSpaces()
    assert spaces_by_agent(env, "observation") and spaces_by_agent(env, "action")
    assert agent_space(env, "b", "observation") == gym.spaces.Discrete(4)
    assert env.get_agent_ids() == {"a", "b"}
    assert env.observation_space_contains({"a": np.zeros(3, np.float32), "b": 2})
    assert not env.observation_space_contains({"b": 9})
    assert set(env.action_space_sample()) == {"a", "b"} and env.action_space_contains(env.action_space_sample(["a"]))
    with pytest.raises(KeyError, match="'c'"):
        agent_space(env, "c", "observation")
    shared = BasicMultiAgent(3)
    assert not spaces_by_agent(shared, "observation")
    assert agent_space(shared, 2, "observation") == gym.spaces.Discrete(2)
    # A Dict observation every agent shares is not taken for spaces by agent.
    shared.observation_space = gym.spaces.Dict({"x": gym.spaces.Discrete(2)})
    assert not spaces_by_agent(shared, "observation")


def test_make_multi_agent_copies_the_env_per_agent_until_all_are_done():
    env = make_multi_agent("CartPole-v1")({"num_agents": 3})
    assert env.get_agent_ids() == {0, 1, 2} and env.observation_space.shape == (4,)
    obs, infos = env.reset(seed=3)
    assert sorted(obs) == [0, 1, 2] and not np.allclose(obs[0], obs[1])  # a seed per copy
    live, steps = {0, 1, 2}, 0
    while live:
        obs, rewards, terminateds, truncateds, _ = env.step({i: 0 for i in live})
        steps += 1
        assert set(rewards) == live and terminateds["__all__"] == (not (live - {i for i in live if terminateds[i]}))
        live -= {i for i in live if terminateds[i] or truncateds[i]}
    assert terminateds["__all__"] and not truncateds["__all__"] and steps < 100  # always left: falls soon


def test_make_multi_agent_from_a_creator_passes_the_config_without_num_agents():
    seen = []

    def creator(config):
        seen.append(dict(config))
        return gym.make("CartPole-v1")

    env = make_multi_agent(creator)({"num_agents": 2, "x": 1})
    assert len(env.envs) == 2 and seen == [{"x": 1}, {"x": 1}]
    assert make_multi_agent(creator)().get_agent_ids() == {0}  # one agent by default, as 1.13
    # The example registered by name: 1.13's CartPole-v0, a 200-step time limit.
    cartpole = MultiAgentCartPole({"num_agents": 2})
    cartpole.reset(seed=0)
    assert cartpole.envs[0].spec.max_episode_steps == 200


def test_example_envs_turns_and_agents_that_come_and_go():
    env = RoundRobinMultiAgent(3)
    obs, _ = env.reset()
    order = []
    while obs:
        (agent,) = [a for a in obs if not env.agents[a].i >= 5] or [None]
        if agent is None:
            break
        order.append(agent)
        obs, rewards, terminateds, _, _ = env.step({agent: 0})
        assert set(rewards) == {agent}
        if terminateds["__all__"]:
            break
    assert order[:4] == [0, 1, 2, 0] and len(order) == 15
    flex = FlexAgentsMultiAgent({"max_episode_len": 5})
    obs, _ = flex.reset(seed=1)
    seen, left = set(obs), set()
    for _ in range(200):
        actions = {a: 0 for a in obs if a in flex.agents}
        obs, _, terminateds, truncateds, _ = flex.step(actions)
        seen |= set(obs)
        left |= {a for a, t in truncateds.items() if t and a != "__all__"}
        if terminateds["__all__"]:
            break
    assert len(seen) > 1 and left, "agents joined and left within the episode"


# ----- the vector env -------------------------------------------------------------------------------

def test_make_vector_env_picks_the_kind_from_the_first_sub_env():
    built = []

    def make_one(i):
        built.append(i)
        return BasicMultiAgent(2)

    env = make_vector_env(make_one, 2, multi_agent=False)
    assert isinstance(env, MultiAgentVectorEnv) and built == [0, 1]  # the first sub-env is not built twice
    single = make_vector_env(lambda i: gym.make("CartPole-v1"), 2, multi_agent=False)
    assert type(single) is VectorEnv
    wrapped = make_vector_env(lambda i: gym.make("CartPole-v1"), 1, multi_agent=True)
    assert isinstance(wrapped.envs[0], SingleAgentAsMultiAgent) and wrapped.reset()[0].keys() == {"agent0"}


def test_vector_env_resets_an_ended_episode_and_returns_its_last_observations():
    env = make_vector_env(lambda i: BasicMultiAgent(2), 1, multi_agent=True, seeds=[0])
    assert env.reset() == [{0: 0, 1: 0}]
    for t in range(25):
        obs, rewards, terminateds, truncateds, final_obs, _ = env.step([{0: 1, 1: 1}])
    assert terminateds[0]["__all__"] and final_obs == {0: {0: 0, 1: 0}} and obs == [{0: 0, 1: 0}]
    assert rewards == [{0: 1.0, 1: 1.0}]


def test_vector_env_horizon_truncates_the_whole_episode():
    env = make_vector_env(lambda i: BasicMultiAgent(2), 1, multi_agent=True, horizon=3)
    env.reset()
    for _ in range(3):
        _, _, terminateds, truncateds, final_obs, _ = env.step([{0: 0, 1: 0}])
    assert truncateds[0]["__all__"] and not terminateds[0]["__all__"] and 0 in final_obs


class OldApi(MultiAgentEnv):
    """1.13's API: reset() returns the observations, step() four dicts."""

    def __init__(self, config=None):
        super().__init__()
        self.observation_space, self.action_space = gym.spaces.Discrete(2), gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        return {"x": 0}

    def step(self, action_dict):
        return {"x": 1}, {"x": 1.0}, {"x": True, "__all__": True}, {}


def test_vector_env_reads_the_1x_api_and_refuses_other_returns():
    env = make_vector_env(lambda i: OldApi(), 1, multi_agent=True)
    assert env.reset() == [{"x": 0}]
    _, _, terminateds, truncateds, final_obs, _ = env.step([{"x": 0}])
    assert terminateds[0] == {"x": True, "__all__": True} and truncateds[0]["__all__"] is False
    broken = OldApi()
    broken.step = lambda action_dict: ({}, {})
    bad = make_vector_env(lambda i: broken, 1, multi_agent=True)
    bad.reset()
    with pytest.raises(EnvError, match="five dicts"):
        bad.step([{"x": 0}])


# ----- MultiAgentBatch ------------------------------------------------------------------------------

def _rows(n, start=0):
    return SampleBatch({SampleBatch.OBS: np.arange(start, start + n, dtype=np.float32)[:, None],
                        SampleBatch.REWARDS: np.ones(n, dtype=np.float32)})


def test_multi_agent_batch_counts_env_and_agent_steps():
    batch = MultiAgentBatch({"p": _rows(6), "q": _rows(2)}, env_steps=4)
    assert batch.count == batch.env_steps() == 4 and batch.agent_steps() == 8
    assert batch.size_bytes() == sum(b.size_bytes() for b in batch.policy_batches.values())
    copy = batch.copy()
    copy.policy_batches["p"][SampleBatch.REWARDS][0] = 5.0
    assert batch.policy_batches["p"][SampleBatch.REWARDS][0] == 1.0
    single = _rows(3)
    assert single.env_steps() == single.agent_steps() == 3
    assert single.as_multi_agent().policy_batches == {DEFAULT_POLICY_ID: single}


def test_concat_joins_policy_by_policy_and_adds_env_steps():
    a = MultiAgentBatch({"p": _rows(2), "q": _rows(1)}, env_steps=2)
    b = MultiAgentBatch({"p": _rows(3, start=2)}, env_steps=3)
    joined = concat_samples([a, b])
    assert isinstance(joined, MultiAgentBatch) and joined.env_steps() == 5
    assert joined.policy_batches["p"][SampleBatch.OBS][:, 0].tolist() == [0, 1, 2, 3, 4]
    assert joined.policy_batches["q"].count == 1
    mixed = MultiAgentBatch.concat_samples([_rows(2), a])
    assert mixed.policy_batches[DEFAULT_POLICY_ID].count == 2 and mixed.env_steps() == 4
    assert MultiAgentBatch.wrap_as_needed({DEFAULT_POLICY_ID: _rows(2)}, 2).__class__ is SampleBatch
    assert isinstance(MultiAgentBatch.wrap_as_needed({"p": _rows(2)}, 2), MultiAgentBatch)
    with pytest.raises(ValueError, match="different columns"):
        concat_samples([a, MultiAgentBatch({"p": SampleBatch({"x": np.zeros(1)})}, 1)])
