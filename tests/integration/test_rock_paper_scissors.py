"""Rock-paper-scissors against fixed heuristics: PettingZoo's ``rps_v2``
through ``PettingZooEnv``, one learned PPO policy (an LSTM reading its previous move, as
1.13's example could turn on) against "always rock" and "beat last" (1.13's hand-written
opponents, untrained), chosen per episode. After training, the learned policy plays
greedy games against each opponent through ``compute_single_action`` with its state
(1.13's inference loop) and must win at least 80% of the rounds against each.

No memoryless policy can beat "beat last" on average (it answers the learner's own
previous move, which a memoryless learner does not see), so the bar needs the memory.
"""

from __future__ import annotations

import numpy as np
import pytest

from rlstack.examples.policy.rock_paper_scissors_dummies import AlwaysRockHeuristic, BeatLastHeuristic, ROCK, beats
from rlstack.policies.policy import PolicySpec
from rlstack.trainers.ppo import PPOTrainer

rps_v2 = pytest.importorskip("pettingzoo.classic.rps_v2")

ROUNDS = 15  # the game's max_cycles: rounds per episode
BAR = 0.8  # the share of rounds the learned policy must win against each opponent
STOP_STEPS = 40_000  # env steps (one per move: two per round)


def learned_vs_heuristics(agent_id, episode, worker, **kwargs):
    """player_0 learns; player_1 is "always rock" in even episodes, "beat last" in odd ones."""
    if agent_id == "player_0":
        return "learned"
    return "always_rock" if episode.episode_id % 2 == 0 else "beat_last"


def win_rate(trainer, opponent, games=20):
    """The share of rounds the learned policy wins in greedy games against ``opponent``."""
    rng = np.random.default_rng(123)
    wins = 0
    for game in range(games):
        env = rps_v2.parallel_env(max_cycles=ROUNDS)
        obs, _ = env.reset(seed=game)
        state, prev_action = trainer.get_policy("learned").get_initial_state(), 0
        mine = None
        for _ in range(ROUNDS):
            action, state, _ = trainer.compute_single_action(obs["player_0"], state=state, prev_action=prev_action,
                                                             policy_id="learned", explore=False)
            if opponent == "always_rock":
                theirs = ROCK
            else:  # beat last: what beats the learner's previous move
                theirs = int(rng.integers(3)) if mine is None else beats(mine)
            obs, rewards, *_ = env.step({"player_0": int(action), "player_1": theirs})
            wins += rewards["player_0"] == 1
            mine = prev_action = int(action)
    return wins / (games * ROUNDS)


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_learned_policy_beats_both_heuristics(framework):
    trainer = PPOTrainer({
        "framework": framework, "num_workers": 0, "num_envs_per_worker": 4, "rollout_fragment_length": 10,
        "train_batch_size": 200, "sgd_minibatch_size": 200, "gamma": 0.9, "lr": 3e-3, "seed": 0,
        "model": {"use_lstm": True, "lstm_use_prev_action": True, "lstm_cell_size": 32, "fcnet_hiddens": [32],
                  "max_seq_len": ROUNDS},
        "multiagent": {"policies": {"learned": PolicySpec(), "always_rock": PolicySpec(AlwaysRockHeuristic),
                                    "beat_last": PolicySpec(BeatLastHeuristic)},
                       "policy_mapping_fn": learned_vs_heuristics, "policies_to_train": ["learned"]},
    }, "RockPaperScissors")
    # Stop once both opponents lose >= 12.5 of their 15 rounds on average (the learner's
    # own mean mixes the two), or at the step budget.
    result = trainer.train()
    while result["timesteps_total"] < STOP_STEPS and not (
            max(result["policy_reward_mean"].get(opponent, 0.0) for opponent in ("always_rock", "beat_last"))
            <= -12.5):
        result = trainer.train()
    assert set(result["info"]["learner"]) == {"learned"}
    rates = {opponent: win_rate(trainer, opponent) for opponent in ("always_rock", "beat_last")}
    trainer.stop()
    print(f"win rates {rates} after {result['timesteps_total']} steps ({framework})")
    assert min(rates.values()) >= BAR, f"win rates {rates} after {result['timesteps_total']} steps ({framework})"
