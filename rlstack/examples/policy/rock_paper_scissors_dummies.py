"""Hand-written rock-paper-scissors players, 1.13's
``ray.rllib.examples.policy.rock_paper_scissors_dummies``: opponents for a learned policy
(``multiagent.policies: {"beat_last": PolicySpec(policy_class=BeatLastHeuristic)}``, left
out of ``policies_to_train``).

Moves are PettingZoo's ``rps_v2`` ones: :data:`ROCK` 0, :data:`PAPER` 1, :data:`SCISSORS` 2;
an observation is the opponent's last move, :data:`NONE` (3) before the first (one-hot
once preprocessed; both forms are read).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlstack.policies.policy import Policy

__all__ = ["AlwaysRockHeuristic", "AlwaysSameHeuristic", "BeatLastHeuristic", "NONE", "PAPER", "ROCK", "SCISSORS",
           "beats"]

ROCK, PAPER, SCISSORS, NONE = 0, 1, 2, 3


def beats(move: int) -> int:
    """The move that beats ``move`` (paper beats rock, scissors paper, rock scissors)."""
    return (move + 1) % 3


def _moves(obs_batch: Any) -> np.ndarray:
    # The opponent's last moves, from one-hot rows or plain integers.
    obs = np.asarray(obs_batch)
    return obs.argmax(axis=1) if obs.ndim == 2 else obs.astype(np.int64)


class _Heuristic(Policy):
    """A player that learns nothing and has no weights."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.rng = np.random.default_rng(self.config.get("seed"))

    def learn_on_batch(self, samples: Any) -> dict:
        return {}


class AlwaysSameHeuristic(_Heuristic):
    """Picks a move at the start of each episode and plays it all episode; the move is
    the policy's state (1.13's shape: ``get_initial_state()`` draws it, the actions are
    the state)."""

    # The move to play every episode (None: a random one per episode).
    move: int | None = None

    def get_initial_state(self) -> list[np.ndarray]:
        move = self.move if self.move is not None else int(self.rng.integers(3))
        return [np.array(move, dtype=np.int64)]

    def compute_actions(self, obs_batch: Any, state_batches: Any = None, prev_action_batch: Any = None,
                        prev_reward_batch: Any = None, **kwargs: Any) -> tuple[np.ndarray, list, dict]:
        return np.asarray(state_batches[0]), state_batches, {}


class AlwaysRockHeuristic(AlwaysSameHeuristic):
    """Plays rock, every move of every episode."""

    move = ROCK


class BeatLastHeuristic(_Heuristic):
    """Plays the move that beats the opponent's last one (a random move before it has one)."""

    def compute_actions(self, obs_batch: Any, state_batches: Any = None, prev_action_batch: Any = None,
                        prev_reward_batch: Any = None, **kwargs: Any) -> tuple[np.ndarray, list, dict]:
        last = _moves(obs_batch)
        actions = np.where(last == NONE, self.rng.integers(3, size=len(last)), beats(last % 3))
        return actions, [], {}
