"""What DDPG's (and TD3's) numpy, torch and TF policies share: the networks for a pair of
spaces (and the errors for spaces a deterministic actor cannot act in), acting with
exploration noise, trajectory postprocessing, and the numpy acting policy of rollout
workers (no framework import).

The actor's tanh output is an action in [-1, 1] per dimension; exploration noise is added
there, the replay buffer keeps those normalized actions for the critics, and
``Policy.unsquash_actions`` maps them onto the Box bounds for the env
(``acts_in_unit_box``). 1.13's actor, ``low + (high - low) * sigmoid(2x)``, is the same
map: ``sigmoid(2x) = (tanh(x) + 1) / 2``.
"""

from __future__ import annotations

from collections.abc import Callable

import gymnasium as gym
import numpy as np

from rlstack.errors import ConfigError
from rlstack.models.blocks import ActorCriticSpec, actor_critic_spec
from rlstack.models.numpy.blocks import NumpyActorCritic
from rlstack.policies.numpy_policy import NumpyPolicy, PostprocessFn
from rlstack.policies.policy import Policy
from rlstack.policies.postprocessing import postprocess_n_step
from rlstack.sample_batch import SampleBatch
from rlstack.utils.exploration import GaussianNoise, make_action_noise

__all__ = ["LOSS_COLUMNS", "DDPGLearningPolicyMixin", "DDPGNumpyPolicy", "DDPGPolicyMixin", "act_with_noise",
           "check_action_space", "ddpg_model_spec", "make_exploration", "postprocess_ddpg", "td_errors"]

# The columns DDPG's loss reads from a replayed batch.
LOSS_COLUMNS = (SampleBatch.OBS, SampleBatch.ACTIONS, SampleBatch.REWARDS, SampleBatch.NEXT_OBS,
                SampleBatch.TERMINATEDS, SampleBatch.DISCOUNTS, SampleBatch.WEIGHTS)

# ``actor_fn(obs) -> actions [B, A]`` and ``q_fn(obs, actions) -> Q [C, B]``, in numpy.
ActorFn = Callable[[np.ndarray], np.ndarray]
QFn = Callable[[np.ndarray, np.ndarray], np.ndarray]


def check_action_space(action_space: gym.Space) -> None:
    """Raises unless a deterministic actor can act in ``action_space``: a Box with finite
    bounds (its tanh output in [-1, 1] is mapped onto them).

    Raises:
        ConfigError: Saying what to use instead.
    """
    if isinstance(action_space, gym.spaces.Discrete):
        raise ConfigError(
            f"DDPG and TD3 need a continuous Box action space, got {action_space}: their actor outputs one real "
            "number per action dimension. For Discrete actions use SAC (discrete) or DQN.")
    if isinstance(action_space, gym.spaces.MultiDiscrete):
        raise ConfigError(
            f"DDPG and TD3 need a continuous Box action space, got {action_space}: use PPO for MultiDiscrete "
            "actions (or discretise them into one Discrete space for SAC (discrete) or DQN).")
    if not isinstance(action_space, gym.spaces.Box):
        raise ConfigError(f"DDPG and TD3 need a continuous Box action space, got {action_space}; use PPO for "
                          "other action spaces.")
    if not (np.isfinite(action_space.low).all() and np.isfinite(action_space.high).all()):
        raise ConfigError(
            f"DDPG and TD3 need finite action bounds, got {action_space} (low {action_space.low}, high "
            f"{action_space.high}): the actor's tanh output in [-1, 1] is mapped onto [low, high]. Wrap the env "
            "with gymnasium.wrappers.RescaleAction (or ClipAction on a bounded space), or use PPO.")


def ddpg_model_spec(policy: Policy) -> ActorCriticSpec:
    """The actor (``actor_hiddens``, ``actor_hidden_activation``) and the critics
    (``critic_hiddens``, ``critic_hidden_activation``; two with ``twin_q``) of a DDPG /
    TD3 policy, as 1.13 built them: ``obs -> hiddens -> action_dim`` (tanh in the policy)
    and ``concat(obs, action) -> hiddens -> 1``. Image components of the observation go
    through a CNN of ``model.conv_filters`` first (1.13 needed use_state_preprocessor
    for that).

    Raises:
        ConfigError: For an action space a deterministic actor cannot act in.
    """
    check_action_space(policy.action_space)
    config = policy.config
    model = config.get("model", {})
    images = {"conv_filters": model.get("conv_filters"), "conv_activation": model.get("conv_activation", "relu")}
    actor = {**images, "fcnet_hiddens": list(config["actor_hiddens"]),
             "fcnet_activation": config["actor_hidden_activation"]}
    critic = {**images, "fcnet_hiddens": list(config["critic_hiddens"]),
              "fcnet_activation": config["critic_hidden_activation"]}
    return actor_critic_spec(policy.observation_space, policy.action_space, actor, critic, "deterministic",
                             bool(config["twin_q"]), actor_key="actor", critic_key="critic")


def make_exploration(policy: Policy) -> GaussianNoise:
    """The ``exploration_config`` noise of ``policy`` as placed (worker index, worker
    count), seeded with its per-worker sampling seed."""
    action_dim = int(np.prod(policy.action_space.shape))
    return make_action_noise(policy.config["exploration_config"], action_dim, seed=policy.sampling_seed,
                             worker_index=policy.worker_index, num_workers=policy.num_workers)


def act_with_noise(policy: Policy, mu: np.ndarray,
                   explore: bool | None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The actions to take for the actor's actions ``mu [B, A]`` (in [-1, 1]): noise or,
    during ``random_timesteps``, uniform actions when exploring; ``mu`` itself otherwise.
    The ``action_dist_inputs`` column holds ``mu`` (1.13's deterministic distribution's
    inputs)."""
    explore = policy.config.get("explore", True) if explore is None else bool(explore)
    mu = np.asarray(mu, dtype=np.float32)
    actions = policy.exploration.apply(mu, policy.global_timestep, explore)
    return actions, {SampleBatch.ACTION_DIST_INPUTS: mu}


def td_errors(batch: SampleBatch, actor_fn: ActorFn, q_fn: QFn, twin_q: bool) -> np.ndarray:
    """The rows' TD errors summed over the critics, as the loss reports them, with the
    acting networks as their own targets (what a rollout worker has): initial replay
    priorities with ``worker_side_prioritization`` (Horgan et al. 2018)."""
    q_t = q_fn(batch[SampleBatch.OBS], batch[SampleBatch.ACTIONS])
    q_tp1 = q_fn(batch[SampleBatch.NEXT_OBS], actor_fn(batch[SampleBatch.NEXT_OBS]))
    q_tp1_best = q_tp1.min(axis=0) if twin_q else q_tp1[0]
    not_done = 1.0 - batch[SampleBatch.TERMINATEDS].astype(np.float32)
    target = batch[SampleBatch.REWARDS] + batch[SampleBatch.DISCOUNTS] * not_done * q_tp1_best
    return (q_t - target).sum(axis=0)


def postprocess_ddpg(batch: SampleBatch, config: dict, actor_fn: ActorFn | None = None,
                     q_fn: QFn | None = None) -> SampleBatch:
    """n-step returns, and with ``worker_side_prioritization`` (and the networks given)
    the initial replay priorities ``|TD error|``."""
    batch = postprocess_n_step(batch, config)
    if config.get("worker_side_prioritization") and batch.count and q_fn is not None and actor_fn is not None:
        errors = td_errors(batch, actor_fn, q_fn, bool(config["twin_q"]))
        batch[SampleBatch.PRIORITIES] = np.abs(errors).astype(np.float32)
    return batch


class DDPGPolicyMixin:
    """What DDPG's numpy, torch and TF policies share, put before their base
    (``class DDPGTorchPolicy(DDPGLearningPolicyMixin, TorchPolicy)``): the networks for the
    spaces, the exploration noise placed by worker, and acting with it. A policy sets
    ``self.exploration = make_exploration(self)`` in ``__init__`` and supplies
    ``actor_actions(obs) -> float32 [B, A]`` in [-1, 1]."""

    needs_next_obs = True
    needs_bootstrap_value = False
    acts_in_unit_box = True

    # Supplied by the policy and its Policy base.
    config: dict
    exploration: GaussianNoise
    actor_actions: ActorFn

    def bind_worker(self, worker_index: int, num_workers: int) -> None:
        super().bind_worker(worker_index, num_workers)  # type: ignore[misc]
        # The PerWorker noise types (ApeX-DDPG) scale their noise by the worker's index.
        self.exploration = make_exploration(self)  # type: ignore[arg-type]

    def model_spec(self) -> ActorCriticSpec:
        return ddpg_model_spec(self)  # type: ignore[arg-type]

    def compute_actions(self, obs_batch: np.ndarray, explore: bool | None = None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        return act_with_noise(self, self.actor_actions(obs_batch), explore)  # type: ignore[arg-type]


class DDPGLearningPolicyMixin(DDPGPolicyMixin):
    """:class:`DDPGPolicyMixin` and what the torch and TF policies add alike: the loss's
    columns and per-row TD errors, one gradient step per ``train_batch_size`` replayed rows
    in order, the value and postprocessing through ``critic_values(obs, actions) ->
    float32 [C, B]``, which they supply."""

    loss_columns = LOSS_COLUMNS
    # Replay priorities: one TD error per row, in the batch's order.
    per_row_stats = ("td_error",)
    shuffle_minibatches = False

    critic_values: QFn

    def minibatch_plan(self, n: int) -> tuple[int, int]:
        if self._plan_override is not None:  # an execution plan's TrainOneStep arguments
            return super().minibatch_plan(n)
        # One gradient step per train_batch_size replayed rows, in order.
        return int(self.config["train_batch_size"]), 1

    def compute_values(self, obs_batch: np.ndarray) -> np.ndarray:
        """``min_j Q_j(s, mu(s))``: the critics' value of the actor's behaviour."""
        return self.critic_values(obs_batch, self.actor_actions(obs_batch)).min(axis=0)

    def postprocess_trajectory(self, batch: SampleBatch) -> SampleBatch:
        return postprocess_ddpg(batch, self.config, self.actor_actions, self.critic_values)


class DDPGNumpyPolicy(DDPGPolicyMixin, NumpyPolicy):
    """Acts with DDPG's / TD3's built-in dense actor and exploration noise in numpy
    (rollout workers).

    Args:
        observation_space: The env's observation space.
        action_space: A bounded Box action space.
        config: The trainer's merged config.
        num_gpus: Must be 0.
        sampling_seed: Seed of the exploration noise.
        postprocess_fn: Unused (postprocessing is :func:`postprocess_ddpg`); kept for the
            rollout worker's uniform constructor call.
    """

    model_class = NumpyActorCritic

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict, num_gpus: float = 0,
                 sampling_seed: int | None = None, postprocess_fn: PostprocessFn | None = None) -> None:
        super().__init__(observation_space, action_space, config, num_gpus, sampling_seed, postprocess_fn)
        self.exploration = make_exploration(self)

    def set_acting_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Loads the learner's ``acting_weights``: the actor's alone (the critics stay),
        unless ``worker_side_prioritization`` needs the critics too."""
        if self.config.get("worker_side_prioritization"):
            self.set_weights(weights)
        else:
            self.model.set_actor_weights(weights)

    def actor_actions(self, obs_batch: np.ndarray) -> np.ndarray:
        """The actor's actions ``mu(s) = tanh(actor(s))``, ``float32 [B, A]`` in [-1, 1]."""
        return np.tanh(self.model.actor_outputs(np.asarray(obs_batch, dtype=np.float32))).astype(np.float32)

    def compute_values(self, obs_batch: np.ndarray) -> np.ndarray:
        """``min_j Q_j(s, mu(s))``: the critics' value of the actor's behaviour."""
        obs = np.asarray(obs_batch, dtype=np.float32)
        return self.model.critic_values(obs, self.actor_actions(obs)).min(axis=0).astype(np.float32)

    def postprocess_trajectory(self, batch: SampleBatch) -> SampleBatch:
        return postprocess_ddpg(batch, self.config, self.actor_actions, self.model.critic_values)
