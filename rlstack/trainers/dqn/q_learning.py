"""What the DQN family's numpy, torch and TF policies share: epsilon-greedy acting on
Q-values, n-step postprocessing with worker-side priorities, and the numpy acting policy
that rollout workers use (no framework import)."""

from __future__ import annotations

from collections.abc import Callable

import gymnasium as gym
import numpy as np

from rlstack.models.catalog import ModelCatalog, QModelSpec
from rlstack.models.numpy.model import NumpyQModel
from rlstack.policies.numpy_policy import NumpyPolicy, PostprocessFn
from rlstack.policies.policy import Policy
from rlstack.policies.postprocessing import postprocess_n_step
from rlstack.sample_batch import SampleBatch
from rlstack.utils.exploration import EpsilonGreedy

QValuesFn = Callable[[np.ndarray], np.ndarray]

# The column prepare_batch adds for plain (not double) Q: Q'(s', a*) of the fixed target
# network, computed once for all the gradient steps of one learn_on_batch.
Q_TP1_BEST = "q_tp1_best"


def q_model_spec(policy: Policy) -> QModelSpec:
    """The Q-network for a DQN-family policy (``hiddens`` and ``dueling`` from its config)."""
    return ModelCatalog.get_q_model_spec(policy.observation_space, policy.action_space,
                                         policy.config.get("model", {}), policy.config["hiddens"],
                                         policy.config["dueling"])


def make_exploration(policy: Policy) -> EpsilonGreedy:
    """Epsilon-greedy exploration for ``policy`` as placed (worker index, worker count)."""
    return EpsilonGreedy(policy.config["exploration_config"], policy.worker_index, policy.num_workers,
                         seed=policy.sampling_seed)


def act_on_q_values(policy: Policy, exploration: EpsilonGreedy, q_values: np.ndarray,
                    explore: bool | None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Epsilon-greedy actions and the ``q_values`` extra column."""
    explore = policy.config.get("explore", True) if explore is None else bool(explore)
    actions = exploration.choose(q_values, policy.global_timestep, explore)
    return actions, {"q_values": q_values.astype(np.float32, copy=False)}


def td_errors(batch: SampleBatch, q_fn: QValuesFn, double_q: bool, target_q_fn: QValuesFn | None = None) -> np.ndarray:
    """``|Q(s, a) - (R + discount * (1 - terminated) * Q'(s', a*))|`` in numpy.

    Without a target network (rollout workers) ``Q'`` is ``Q`` itself, so double Q and
    plain max coincide.
    """
    q_t = q_fn(batch[SampleBatch.OBS])
    q_tp1 = q_fn(batch[SampleBatch.NEXT_OBS])
    q_tp1_target = target_q_fn(batch[SampleBatch.NEXT_OBS]) if target_q_fn is not None else q_tp1
    best = np.argmax(q_tp1 if double_q else q_tp1_target, axis=1)
    q_tp1_best = q_tp1_target[np.arange(len(best)), best]
    not_done = 1.0 - batch[SampleBatch.TERMINATEDS].astype(np.float32)
    target = batch[SampleBatch.REWARDS] + batch[SampleBatch.DISCOUNTS] * not_done * q_tp1_best
    q_selected = q_t[np.arange(len(best)), batch[SampleBatch.ACTIONS].astype(np.int64)]
    return np.abs(q_selected - target)


def postprocess_q_learning(batch: SampleBatch, config: dict, q_fn: QValuesFn) -> SampleBatch:
    """n-step returns, and with ``worker_side_prioritization`` the initial replay
    priorities ``|TD error|`` under the worker's current weights (Horgan et al. 2018)."""
    batch = postprocess_n_step(batch, config)
    if config.get("worker_side_prioritization") and batch.count:
        batch[SampleBatch.PRIORITIES] = td_errors(batch, q_fn, config["double_q"]).astype(np.float32)
    return batch


class DQNNumpyPolicy(NumpyPolicy):
    """Acts epsilon-greedily with the built-in dense Q-network in numpy (rollout workers).

    Args:
        observation_space: The env's observation space.
        action_space: The env's (Discrete) action space.
        config: The trainer's merged config.
        num_gpus: Must be 0.
        sampling_seed: Seed of the exploration generator.
        postprocess_fn: Unused (n-step postprocessing is built in); kept for the
            rollout worker's uniform constructor call.
    """

    model_class = NumpyQModel
    needs_next_obs = True
    needs_bootstrap_value = False

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict, num_gpus: float = 0,
                 sampling_seed: int | None = None, postprocess_fn: PostprocessFn | None = None) -> None:
        super().__init__(observation_space, action_space, config, num_gpus, sampling_seed, postprocess_fn)
        self.exploration = make_exploration(self)

    def model_spec(self) -> QModelSpec:
        return q_model_spec(self)

    def bind_worker(self, worker_index: int, num_workers: int) -> None:
        super().bind_worker(worker_index, num_workers)
        self.exploration = make_exploration(self)

    def q_values(self, obs_batch: np.ndarray) -> np.ndarray:
        """``Q(s, .)`` as ``float32 [B, num_actions]``."""
        return self.model.q_values(np.asarray(obs_batch, dtype=np.float32)).astype(np.float32, copy=False)

    def compute_actions(self, obs_batch: np.ndarray, explore: bool | None = None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        return act_on_q_values(self, self.exploration, self.q_values(obs_batch), explore)

    def compute_values(self, obs_batch: np.ndarray) -> np.ndarray:
        return self.q_values(obs_batch).max(axis=1)

    def postprocess_trajectory(self, batch: SampleBatch) -> SampleBatch:
        return postprocess_q_learning(batch, self.config, self.q_values)
