"""PettingZoo games as multi-agent envs: the AEC wrapper hands over turn by
turn with the rewards PettingZoo's ``last()`` gives, the parallel one passes every agent's
dicts through, both end the episode when the game has no agents left; the
rock-paper-scissors heuristics play what they say; a multi-agent policy's rows are cut
into sequences per agent."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlstack.env import ParallelPettingZooEnv, PettingZooEnv
from rlstack.env.registry import make_env
from rlstack.errors import EnvError
from rlstack.examples.policy.rock_paper_scissors_dummies import (
    NONE, PAPER, ROCK, SCISSORS, AlwaysRockHeuristic, AlwaysSameHeuristic, BeatLastHeuristic, beats)
from rlstack.policies.rnn_sequencing import pad_batch_to_sequences
from rlstack.sample_batch import SampleBatch

rps_v2 = pytest.importorskip("pettingzoo.classic.rps_v2")


def play(env, moves, first):
    """Steps an AEC-wrapped game with ``moves[agent]`` until it ends; returns every step's dicts."""
    obs, _ = first
    steps = []
    while True:
        (agent,) = obs
        out = env.step({agent: moves[agent]})
        steps.append(out)
        obs = {a: o for a, o in out[0].items() if not (out[2][a] or out[3][a])}
        if out[2]["__all__"] or out[3]["__all__"]:
            return steps


def test_aec_wrapper_gives_turns_and_the_rewards_collected_since_each_agents_move():
    env = PettingZooEnv(rps_v2.env(max_cycles=3))
    assert env.observation_space == gym.spaces.Discrete(4) and env.action_space == gym.spaces.Discrete(3)
    assert env.get_agent_ids() == {"player_0", "player_1"}
    obs, infos = env.reset(seed=0)
    assert obs == {"player_0": NONE} and set(infos) == {"player_0"}
    steps = play(env, {"player_0": PAPER, "player_1": ROCK}, (obs, infos))
    # Turns alternate: player_1 observes after player_0's move, and so on.
    assert [list(step[0]) for step in steps[:3]] == [["player_1"], ["player_0"], ["player_1"]]
    # Each agent's reward arrives when it is handed the turn again: +1 per round for paper.
    rewards = {"player_0": 0.0, "player_1": 0.0}
    for _, step_rewards, *_ in steps:
        for agent, reward in step_rewards.items():
            rewards[agent] += reward
    assert rewards == {"player_0": 3.0, "player_1": -3.0}
    last_obs, _, terminateds, truncateds, _ = steps[-1]
    # The game cuts after max_cycles rounds: both agents leave truncated, with their last observation.
    assert set(last_obs) == {"player_0", "player_1"} and last_obs["player_0"] == ROCK
    assert truncateds == {"player_0": True, "player_1": True, "__all__": True}
    assert terminateds["__all__"] is False


def test_aec_wrapper_refuses_an_action_from_an_agent_whose_turn_it_is_not():
    env = PettingZooEnv(rps_v2.env())
    env.reset(seed=0)
    with pytest.raises(EnvError, match="turn of agent 'player_0' in rps_v2, but the actions are for \\['player_1'\\]"):
        env.step({"player_1": ROCK})


def test_parallel_wrapper_passes_every_agents_dicts_and_ends_with_the_game():
    env = ParallelPettingZooEnv(rps_v2.parallel_env(max_cycles=2))
    obs, infos = env.reset(seed=0)
    assert obs == {"player_0": NONE, "player_1": NONE} and set(infos) == set(obs)
    obs, rewards, terminateds, truncateds, _ = env.step({"player_0": SCISSORS, "player_1": PAPER})
    assert obs == {"player_0": PAPER, "player_1": SCISSORS} and rewards == {"player_0": 1, "player_1": -1}
    assert truncateds["__all__"] is False
    *_, truncateds, _ = env.step({"player_0": ROCK, "player_1": ROCK})
    assert truncateds["__all__"] is True


def test_wrappers_refuse_what_is_not_a_pettingzoo_env():
    with pytest.raises(EnvError, match="wraps a PettingZoo env.*got CartPoleEnv"):
        PettingZooEnv(gym.make("CartPole-v1").unwrapped)


def test_agents_with_different_spaces_get_a_dict_of_spaces():
    class Game:
        possible_agents = ["a", "b"]

        def observation_space(self, agent):
            return gym.spaces.Discrete(2 if agent == "a" else 3)

        def action_space(self, agent):
            return gym.spaces.Discrete(2)

    env = ParallelPettingZooEnv(Game())
    assert env.observation_space == gym.spaces.Dict({"a": gym.spaces.Discrete(2), "b": gym.spaces.Discrete(3)})
    assert env.action_space == gym.spaces.Discrete(2)


def test_rock_paper_scissors_is_registered_by_name_in_both_forms():
    assert isinstance(make_env("RockPaperScissors", {}), PettingZooEnv)
    parallel = make_env("RockPaperScissors", {"parallel": True, "max_cycles": 4})
    assert isinstance(parallel, ParallelPettingZooEnv) and parallel.par_env.unwrapped.max_cycles == 4


def test_heuristics_play_what_they_say():
    space, actions, config = gym.spaces.Discrete(4), gym.spaces.Discrete(3), {"seed": 0}
    one_hot = np.eye(4, dtype=np.float32)[[ROCK, PAPER, SCISSORS, NONE]]
    beat_last = BeatLastHeuristic(space, actions, config)
    played, _, _ = beat_last.compute_actions(one_hot)
    assert list(played[:3]) == [PAPER, SCISSORS, ROCK] and played[3] in (ROCK, PAPER, SCISSORS)
    assert list(beat_last.compute_actions(np.array([ROCK, SCISSORS]))[0]) == [PAPER, ROCK]  # plain integers too
    rock = AlwaysRockHeuristic(space, actions, config)
    state = rock.get_initial_state()
    moves, state_out, _ = rock.compute_actions(one_hot[:2], state_batches=[np.stack([state[0]] * 2)])
    assert list(moves) == [ROCK, ROCK] and list(state_out[0]) == [ROCK, ROCK]
    same = AlwaysSameHeuristic(space, actions, config)
    assert {int(same.get_initial_state()[0]) for _ in range(30)} == {ROCK, PAPER, SCISSORS}  # a move per episode
    assert [beats(m) for m in (ROCK, PAPER, SCISSORS)] == [PAPER, SCISSORS, ROCK]


def test_sequences_of_a_multi_agent_policy_are_cut_where_the_agent_changes():
    # Two agents of one episode side by side in one policy's rows: each its own sequences.
    batch = SampleBatch({SampleBatch.EPS_ID: np.array([7, 7, 7, 7, 7]), SampleBatch.AGENT_INDEX: np.array([0, 0, 0, 1, 1]),
                         SampleBatch.OBS: np.arange(5, dtype=np.float32), "state_in_0": np.arange(5.0)[:, None]})
    padded = pad_batch_to_sequences(batch, max_seq_len=4)
    assert list(padded[SampleBatch.SEQ_LENS]) == [3, 2]
    assert list(padded["state_in_0"][:, 0]) == [0.0, 3.0]  # each sequence starts from its agent's state
