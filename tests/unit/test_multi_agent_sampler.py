"""The multi-agent sampler (rlstack/evaluation/multi_agent_sampler.py) in a worker built
in-process: each agent's rows in its policy's batch, agents that act in turns, appear and
leave, both batch modes, count_steps_by, bootstrap values, metrics, callbacks and the
errors that name the agent and the policy.

The policy is test_rollout_worker's ScriptedPolicy (action 0, V(obs) = 10 * obs + 1); the
envs are small counters whose observation is the agent's own step count.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlstack.env.multi_agent_env import MultiAgentEnv
from rlstack.errors import ConfigError, EnvError
from rlstack.evaluation.metrics import policy_rewards
from rlstack.evaluation.rollout_worker import RolloutWorker
from rlstack.examples.env.multi_agent import FlexAgentsMultiAgent
from rlstack.examples.policy.random_policy import RandomPolicy
from rlstack.policies.policy import PolicySpec
from rlstack.sample_batch import MultiAgentBatch, SampleBatch
from rlstack.trainers.callbacks import DefaultCallbacks
from rlstack.trainers.common.config import merge_config
from rlstack.trainers.common.multi_agent import policy_specs
from rlstack.trainers.ppo import DEFAULT_CONFIG
from tests.unit.test_rollout_worker import V, ScriptedPolicy

B = SampleBatch
BOX = gym.spaces.Box(0.0, 1000.0, (1,), np.float32)


class Counters(MultiAgentEnv):
    """Agents that all act every step, each observing its own step count; agent ``a``
    gets reward 1 per step, ``b`` 10. Each agent ends after ``lengths[agent]`` steps,
    terminated (or truncated with ``truncate``); the episode ends when all have."""

    def __init__(self, config=None):
        super().__init__()
        config = dict(config or {})
        self.lengths = config.get("lengths", {"a": 3, "b": 5})
        self.truncate = config.get("truncate", False)
        self._agent_ids = set(self.lengths)
        self.observation_space, self.action_space = BOX, gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        self.t = dict.fromkeys(self.lengths, 0)
        return {agent: np.zeros(1, np.float32) for agent in self.lengths}, {}

    def step(self, action_dict):
        obs, rewards, ends = {}, {}, {}
        for agent in action_dict:
            self.t[agent] += 1
            obs[agent] = np.array([self.t[agent]], np.float32)
            rewards[agent] = 1.0 if agent == "a" else 10.0
            ends[agent] = self.t[agent] >= self.lengths[agent]
        done = all(self.t[agent] >= n for agent, n in self.lengths.items())
        none = dict.fromkeys(ends, False)
        terminateds, truncateds = (none, ends) if self.truncate else (ends, none)
        return obs, rewards, {**terminateds, "__all__": done}, {**truncateds, "__all__": False}, {}


class Alternate(MultiAgentEnv):
    """Agents ``a`` and ``b`` act in turns (a, b, a, b); both get reward 1 at every step,
    also while waiting; the episode ends after the four steps."""

    def __init__(self, config=None):
        super().__init__()
        self._agent_ids = {"a", "b"}
        self.observation_space, self.action_space = BOX, gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return {"a": np.zeros(1, np.float32)}, {}

    def step(self, action_dict):
        (agent,) = action_dict
        assert agent == "ab"[self.t % 2]
        self.t += 1
        done = self.t == 4
        obs = {} if done else {"ab"[self.t % 2]: np.array([self.t], np.float32)}
        return obs, {"a": 1.0, "b": 1.0}, {"__all__": done}, {"__all__": False}, {}


BY_NAME = {"policies": ["pa", "pb"], "policy_mapping_fn": lambda agent_id, *args, **kwargs: f"p{agent_id}"}


def make_worker(env=Counters, multiagent=None, policy_class=ScriptedPolicy, **overrides):
    config = merge_config(DEFAULT_CONFIG, {"rollout_fragment_length": 10, "num_envs_per_worker": 1, "seed": 0,
                                           **overrides, "multiagent": multiagent or BY_NAME}, "PPO")
    return RolloutWorker(env, policy_class, config, policy_specs=policy_specs(config, "PPO"))


def rows_by_agent(batch: MultiAgentBatch, policy_id: str) -> dict[tuple[int, int], SampleBatch]:
    rows = batch.policy_batches[policy_id]
    keys = list(dict.fromkeys(zip(rows[B.EPS_ID].tolist(), rows[B.AGENT_INDEX].tolist())))
    return {key: rows.take(np.flatnonzero((rows[B.EPS_ID] == key[0]) & (rows[B.AGENT_INDEX] == key[1])))
            for key in keys}


# ----- rows ----------------------------------------------------------------------------------------

def test_each_agent_gets_its_own_rows_in_its_policys_batch():
    worker = make_worker()
    assert worker.multi_agent and set(worker.policy_map) == {"pa", "pb"}
    batch = worker.sample()
    assert isinstance(batch, MultiAgentBatch) and batch.env_steps() == 10  # two 5-step episodes
    a, b = batch.policy_batches["pa"], batch.policy_batches["pb"]
    assert a[B.OBS][:, 0].tolist() == [0, 1, 2, 0, 1, 2] and a[B.REWARDS].tolist() == [1.0] * 6
    assert a[B.TERMINATEDS].tolist() == [False, False, True] * 2
    assert b[B.OBS][:, 0].tolist() == [0, 1, 2, 3, 4] * 2 and b[B.REWARDS].tolist() == [10.0] * 10
    assert batch.agent_steps() == 16
    assert len(set(a[B.EPS_ID].tolist())) == 2 and a[B.EPS_ID].tolist() == b[B.EPS_ID][[0, 1, 2, 5, 6, 7]].tolist()
    assert set(a[B.AGENT_INDEX].tolist()) != set(b[B.AGENT_INDEX].tolist())
    # The policy's own postprocessing saw one agent's trajectory per piece.
    assert [piece.count for piece in worker.get_policy("pa").pieces] == [3, 3]


def test_a_fragment_cut_bootstraps_from_each_agents_latest_observation():
    worker = make_worker(env_config={"lengths": {"a": 100, "b": 100}})
    batch = worker.sample()
    for pid in ("pa", "pb"):
        rows = batch.policy_batches[pid]
        assert rows[B.OBS][:, 0].tolist() == list(range(10))
        assert rows[B.BOOTSTRAP_VALUE].tolist() == [0.0] * 9 + [pytest.approx(V(10))]
    batch = worker.sample()  # the next fragment goes on where this one stopped
    assert batch.policy_batches["pa"][B.OBS][0, 0] == 10


def test_a_truncated_agent_bootstraps_from_its_final_observation():
    batch = make_worker(env_config={"truncate": True}).sample()
    a = batch.policy_batches["pa"]
    assert a[B.TRUNCATEDS].tolist() == [False, False, True] * 2 and not a[B.TERMINATEDS].any()
    assert a[B.BOOTSTRAP_VALUE][2] == pytest.approx(V(3))  # its final observation was 3


def test_complete_episodes_returns_whole_episodes_only():
    worker = make_worker(rollout_fragment_length=7, batch_mode="complete_episodes")
    batch = worker.sample()
    assert batch.env_steps() == 10  # two whole 5-step episodes cover the 7 steps asked for
    for pid in ("pa", "pb"):
        for trajectory in rows_by_agent(batch, pid).values():
            assert trajectory[B.TERMINATEDS][-1] and not trajectory[B.TERMINATEDS][:-1].any()
            assert trajectory[B.OBS][0, 0] == 0


def test_count_steps_by_agent_steps_counts_every_agents_actions():
    batch = make_worker(multiagent={**BY_NAME, "count_steps_by": "agent_steps"},
                        env_config={"lengths": {"a": 100, "b": 100}}).sample()
    assert batch.agent_steps() == 10 and batch.env_steps() == 5  # two agents act per env step


def test_rewards_received_between_turns_go_to_the_waiting_agents_row():
    worker = make_worker(Alternate)
    batch = worker.sample()
    a, b = batch.policy_batches["pa"], batch.policy_batches["pb"]
    # a acts at steps 0 and 2, b at 1 and 3; every step rewards both.
    assert a[B.OBS][:, 0].tolist()[:2] == [0, 2] and a[B.REWARDS].tolist()[:2] == [2.0, 2.0]
    assert b[B.OBS][:, 0].tolist()[:2] == [1, 3] and b[B.REWARDS].tolist()[:2] == [3.0, 1.0]
    assert a[B.TERMINATEDS].tolist()[:2] == [False, True]
    episode = worker.get_metrics()[0]
    assert episode.episode_return == 8.0 and episode.length == 4
    assert episode.agent_rewards == {("a", "pa"): 4.0, ("b", "pb"): 4.0}


def test_agents_that_appear_and_leave_mid_episode_get_whole_trajectories():
    worker = make_worker(FlexAgentsMultiAgent, {"policies": ["p"]}, env_config={"max_episode_len": 6},
                         rollout_fragment_length=300, batch_mode="complete_episodes")
    batch = worker.sample()
    trajectories = rows_by_agent(batch, "p")
    per_episode = {}
    for (episode_id, _), rows in trajectories.items():
        per_episode[episode_id] = per_episode.get(episode_id, 0) + 1
        ended = rows[B.TERMINATEDS] | rows[B.TRUNCATEDS]
        assert ended[-1] and not ended[:-1].any(), "one trajectory per agent, ending once, at its end"
        assert rows.count <= 6
    assert max(per_episode.values()) > 1, "several agents in one episode"
    assert any(rows[B.TRUNCATEDS][-1] for rows in trajectories.values()), "some agent left before its end"


# ----- metrics, filters, weights ------------------------------------------------------------------------

def test_episode_metrics_sum_every_agent_and_report_each_policy():
    worker = make_worker()
    worker.sample()
    episodes = worker.get_metrics()
    assert [(e.episode_return, e.length) for e in episodes] == [(53.0, 5), (53.0, 5)]
    assert episodes[0].agent_rewards == {("a", "pa"): 3.0, ("b", "pb"): 50.0}
    assert policy_rewards(episodes)["policy_reward_mean"] == {"pa": 3.0, "pb": 50.0}


def test_each_policy_has_its_filter_and_weights_move_by_policy_id():
    worker = make_worker(observation_filter="MeanStdFilter")
    worker.sample()
    counts = {pid: int(state["count"]) for pid, state in worker.get_filter_state().items()}
    # The observations each policy acted on: two episodes, and the third's first.
    assert counts == {"pa": 7, "pb": 11}
    assert worker.filter_for(worker.get_policy("pb")) is worker.policies.filters["pb"]
    assert set(worker.get_weights()) == {"pa", "pb"} and set(worker.get_weights(["pb"])) == {"pb"}
    runs = worker.run_episodes(num_episodes=2)
    assert len(runs) == 2 and runs[0].agent_rewards
    assert int(worker.get_filter_state()["pa"]["count"]) == 7, "evaluation does not update the filters"


def test_a_hand_written_policy_acts_beside_the_algorithms():
    worker = make_worker(multiagent={"policies": {"pa": PolicySpec(), "pb": PolicySpec(policy_class=RandomPolicy)},
                                     "policy_mapping_fn": BY_NAME["policy_mapping_fn"]})
    assert isinstance(worker.get_policy("pb"), RandomPolicy)
    batch = worker.sample()
    b = batch.policy_batches["pb"]
    assert B.VF_PREDS not in b and set(b[B.ACTIONS].tolist()) <= {0, 1}
    assert not b[B.BOOTSTRAP_VALUE].any()  # no value function: nothing to bootstrap from


def test_a_single_agent_env_with_policies_is_one_agent_named_agent0():
    worker = make_worker(lambda ctx: gym.make("CartPole-v1"), {"policies": ["only"]})
    batch = worker.sample()
    assert set(batch.policy_batches) == {"only"} and batch.policy_batches["only"].count == 10
    assert worker.get_metrics() == [] or worker.get_metrics()[0].agent_rewards.keys() == {("agent0", "only")}


def test_observation_fn_rewrites_what_the_policies_see():
    def double(agent_obs, worker, base_env, policies, episode, **kwargs):
        return {agent: 2 * obs for agent, obs in agent_obs.items()}

    batch = make_worker(multiagent={**BY_NAME, "observation_fn": double}).sample()
    assert batch.policy_batches["pa"][B.OBS][:3, 0].tolist() == [0, 2, 4]


def test_observation_fn_may_give_a_policy_observations_of_another_space():
    # 1.13's centralized-critic pattern: the policy sees more than the env's space for the
    # agent (here its observation twice).
    def with_other(agent_obs, worker, base_env, policies, episode, **kwargs):
        return {agent: np.concatenate([obs, obs]) for agent, obs in agent_obs.items()}

    wide = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
    policies = {pid: PolicySpec(None, wide, None, {}) for pid in ("pa", "pb")}
    batch = make_worker(multiagent={**BY_NAME, "policies": policies, "observation_fn": with_other}).sample()
    assert batch.policy_batches["pa"][B.OBS].shape[1] == 2


# ----- callbacks -------------------------------------------------------------------------------------------

class Recorder(DefaultCallbacks):
    calls: list = []

    def on_episode_start(self, *, episode, env_index, **kwargs):
        Recorder.calls.append(("start", episode.episode_id, episode.get_agents()))

    def on_episode_step(self, *, episode, **kwargs):
        Recorder.calls.append(("step", episode.last_observation_for("b")[0], episode.last_reward_for("a"),
                               episode.last_action_for("a")))

    def on_episode_end(self, *, episode, policies, **kwargs):
        Recorder.calls.append(("end", dict(episode.agent_rewards), sorted(policies), episode.policy_for("b")))

    def on_postprocess_trajectory(self, *, agent_id, policy_id, postprocessed_batch, original_batches, **kwargs):
        Recorder.calls.append(("trajectory", agent_id, policy_id, postprocessed_batch.count,
                               original_batches[agent_id][1].count))


def test_callbacks_see_every_agent():
    Recorder.calls = []
    make_worker(callbacks=Recorder, rollout_fragment_length=5).sample()
    kinds = [call[0] for call in Recorder.calls]
    assert kinds[0] == "start" and set(Recorder.calls[0][2]) == {"a", "b"} and kinds.count("step") == 5
    steps = [call for call in Recorder.calls if call[0] == "step"]
    assert [call[1] for call in steps] == [1, 2, 3, 4, 5] and steps[0][2:] == (1.0, 0)
    end = next(call for call in Recorder.calls if call[0] == "end")
    assert end[1:] == ({("a", "pa"): 3.0, ("b", "pb"): 50.0}, ["pa", "pb"], "pb")
    trajectories = sorted(call[1:] for call in Recorder.calls if call[0] == "trajectory")
    assert trajectories == [("a", "pa", 3, 3), ("b", "pb", 5, 5)]


class CentralCritic(ScriptedPolicy):
    """1.13's centralized-critic pattern: postprocess_trajectory reads the other agents'
    pieces of the same episode."""

    seen: list = []

    def postprocess_trajectory(self, batch, other_agent_batches=None, episode=None):
        CentralCritic.seen.append((int(batch[B.AGENT_INDEX][0]), batch.count,
                                   {aid: piece.count for aid, (_, piece) in (other_agent_batches or {}).items()},
                                   episode is not None))
        return batch


def test_a_policy_that_takes_other_agent_batches_sees_the_other_agents_of_its_episode():
    CentralCritic.seen, Recorder.calls = [], []
    # a ends after 3 steps, b after 5: a's piece waits for the episode's end, as in 1.13,
    # so each sees the other's whole trajectory.
    make_worker(policy_class=CentralCritic, callbacks=Recorder, rollout_fragment_length=5).sample()
    assert sorted(CentralCritic.seen) == [(0, 3, {"b": 5}, True), (1, 5, {"a": 3}, True)]
    originals = [call for call in Recorder.calls if call[0] == "trajectory"]
    assert len(originals) == 2


def test_on_postprocess_trajectory_gets_every_agents_original_batch():
    seen = []

    class Both(DefaultCallbacks):
        def on_postprocess_trajectory(self, *, agent_id, original_batches, **kwargs):
            seen.append((agent_id, {aid: piece.count for aid, (_, piece) in original_batches.items()}))

    make_worker(callbacks=Both, rollout_fragment_length=5).sample()
    assert sorted(seen) == [("a", {"a": 3, "b": 5}), ("b", {"a": 3, "b": 5})]


# ----- errors that name the agent and the policy -------------------------------------------------------------

def test_an_agent_mapped_to_a_policy_that_does_not_exist():
    worker = make_worker(multiagent={"policies": ["pa", "pb"], "policy_mapping_fn": lambda agent_id, *a, **k: "pc"})
    with pytest.raises(ConfigError, match=r"maps agent 'a' to policy 'pc', which does not exist; the policies are "
                                          r"\['pa', 'pb'\]"):
        worker.sample()


def test_an_agent_the_mapping_cannot_place():
    def only_a(agent_id, episode, worker, **kwargs):
        return {"a": "pa"}[agent_id]

    worker = make_worker(multiagent={"policies": ["pa", "pb"], "policy_mapping_fn": only_a})
    with pytest.raises(ConfigError, match="policy_mapping_fn raised KeyError for agent 'b'"):
        worker.sample()


def test_spaces_that_do_not_match_the_envs():
    wrong = gym.spaces.Box(0.0, 1.0, (3,), np.float32)
    worker = make_worker(multiagent={**BY_NAME, "policies": {"pa": PolicySpec(),
                                                             "pb": PolicySpec(None, wrong, gym.spaces.Discrete(2))}})
    with pytest.raises(ConfigError, match=r"Agent 'b' is mapped to policy 'pb', whose observation space is Box"):
        worker.sample()


class ComesBack(Counters):
    def step(self, action_dict):
        obs, rewards, terminateds, truncateds, infos = super().step(action_dict)
        if self.t["b"] == self.lengths["a"] + 1:
            obs["a"] = np.zeros(1, np.float32)  # agent a, done a step ago, observes again
        return obs, rewards, terminateds, truncateds, infos


def test_an_agent_that_observes_after_it_was_done():
    with pytest.raises(EnvError, match="observation for agent 'a' \\(policy 'pa'\\) after it was done"):
        make_worker(ComesBack).sample()
