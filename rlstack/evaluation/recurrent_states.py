"""Each sub-env's recurrent state, as rollout workers and evaluation episodes carry it.

A recurrent policy (``policy.is_recurrent``: ``use_lstm``, ``use_attention`` or a custom
recurrent model) acts from one state row per sub-env, and, when its model reads them
(``policy.prev_inputs``), from each sub-env's previous action(s) and reward(s). A
sub-env's rows go back to the initial state and zeros when its episode ends or the
sub-env is restarted. A policy without state gets None here and is called as before.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlstack.models.prev_inputs import PREV_ACTIONS, PREV_REWARDS
from rlstack.policies.policy import Policy
from rlstack.policies.rnn_sequencing import state_in_key, state_out_key


class SubEnvMemory:
    """What a recurrent policy carries from one step of each sub-env to the next.

    Attributes:
        states: ``[num_envs, ...]`` per state tensor.
        prev: ``{"prev_actions": ..., "prev_rewards": ...}``, ``[num_envs, ...]`` each,
            for the ones the model reads (empty when it reads none).
    """

    def __init__(self, policy: Policy, num_envs: int) -> None:
        self.states = policy.initial_state_batch(num_envs)
        self.prev_spec = policy.prev_inputs
        self.prev = self.prev_spec.zeros(num_envs) if self.prev_spec is not None else {}

    def columns(self) -> dict[str, np.ndarray]:
        """What the sub-envs' next step acts from, under the columns a row records it
        in: ``state_in_<i>``, ``prev_actions``, ``prev_rewards``."""
        return {**{state_in_key(k): value for k, value in enumerate(self.states)}, **self.prev}

    def inputs(self, rows: Any = None) -> dict[str, Any]:
        """``compute_actions`` / ``compute_values`` keyword arguments for the sub-envs
        ``rows`` (None: all)."""
        pick = (lambda value: value) if rows is None else (lambda value: value[rows])
        return {"state_batches": [pick(value) for value in self.states],
                "prev_action_batch": pick(self.prev[PREV_ACTIONS]) if PREV_ACTIONS in self.prev else None,
                "prev_reward_batch": pick(self.prev[PREV_REWARDS]) if PREV_REWARDS in self.prev else None}


def initial_states(policy: Policy, num_envs: int) -> SubEnvMemory | None:
    """Every sub-env at an episode's start; None for a policy without state."""
    return SubEnvMemory(policy, num_envs) if policy.is_recurrent else None


def act(policy: Policy, obs: np.ndarray, memory: SubEnvMemory | None,
        explore: bool | None = None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """``policy.compute_actions`` from the sub-envs' memory: ``(actions, extras)``; the
    memory's states move on to (copies of) the ``state_out_<i>`` extras."""
    if memory is None:
        return policy.compute_actions(obs, explore=explore)
    actions, extras = policy.compute_actions(obs, explore=explore, **memory.inputs())
    memory.states = [extras[state_out_key(k)].copy() for k in range(len(memory.states))]
    return actions, extras


def after_step(memory: SubEnvMemory | None, actions: np.ndarray, rewards: np.ndarray) -> None:
    """Makes the step's actions (the policy's, before unsquashing) and rewards (after
    clipping, as the batch records them) the sub-envs' previous ones."""
    if memory is not None and memory.prev:
        memory.prev_spec.push(memory.prev, actions, rewards)


def reset(policy: Policy, memory: SubEnvMemory | None, env_indices: Any) -> None:
    """Puts the rows of ``env_indices`` (sub-envs starting a new episode) back to the
    initial state and zero previous actions / rewards, in place."""
    rows = list(env_indices)
    if memory is None or not rows:
        return
    for value, initial in zip(memory.states, policy.get_initial_state()):
        value[rows] = initial
    for value in memory.prev.values():
        value[rows] = 0


def values(policy: Policy, obs: np.ndarray, memory: SubEnvMemory | None, rows: Any) -> np.ndarray:
    """V(obs) of the sub-envs ``rows``; a recurrent policy's from their memory."""
    if memory is None:
        return policy.compute_values(obs)
    return policy.compute_values(obs, **memory.inputs(rows))
