"""Each sub-env's recurrent state, as rollout workers and evaluation episodes carry it.

A recurrent policy (``policy.is_recurrent``: ``use_lstm`` or a custom recurrent model)
acts from one state row per sub-env; a sub-env's row goes back to the initial state when
its episode ends or the sub-env is restarted. A policy without state gets None here and
is called as before.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlstack.policies.policy import Policy
from rlstack.policies.rnn_sequencing import state_out_key


def initial_states(policy: Policy, num_envs: int) -> list[np.ndarray] | None:
    """``[num_envs, ...]`` per state tensor at the initial state; None without state."""
    return policy.initial_state_batch(num_envs) if policy.is_recurrent else None


def act(policy: Policy, obs: np.ndarray, states: list[np.ndarray] | None,
        explore: bool | None = None) -> tuple[np.ndarray, dict[str, np.ndarray], list[np.ndarray] | None]:
    """``policy.compute_actions`` from the sub-envs' states: ``(actions, extras,
    new_states)`` (the new states are copies of the ``state_out_<i>`` extras)."""
    if states is None:
        actions, extras = policy.compute_actions(obs, explore=explore)
        return actions, extras, None
    actions, extras = policy.compute_actions(obs, explore=explore, state_batches=states)
    return actions, extras, [extras[state_out_key(k)].copy() for k in range(len(states))]


def reset(policy: Policy, states: list[np.ndarray] | None, env_indices: Any) -> None:
    """Puts the rows of ``env_indices`` (sub-envs starting a new episode) back to the
    initial state, in place."""
    rows = list(env_indices)
    if states is None or not rows:
        return
    for value, initial in zip(states, policy.get_initial_state()):
        value[rows] = initial


def values(policy: Policy, obs: np.ndarray, states: list[np.ndarray] | None, rows: Any) -> np.ndarray:
    """V(obs) of the sub-envs ``rows``; a recurrent policy's from their current state."""
    if states is None:
        return policy.compute_values(obs)
    return policy.compute_values(obs, state_batches=[value[rows] for value in states])
