"""What SAC's numpy, torch and TF policies share: the networks for a pair of spaces (and
the errors for spaces SAC cannot act in), the entropy target, trajectory postprocessing,
and the numpy acting policy of rollout workers."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np

from rlstack.errors import ConfigError
from rlstack.models.blocks import ActorCriticSpec, actor_critic_spec
from rlstack.models.numpy.blocks import NumpyActorCritic
from rlstack.models.numpy.distributions import Categorical, SquashedGaussian
from rlstack.policies.numpy_policy import NumpyPolicy, PostprocessFn
from rlstack.policies.policy import Policy
from rlstack.policies.postprocessing import postprocess_n_step
from rlstack.sample_batch import SampleBatch

# The columns SAC's loss reads from a replayed batch.
LOSS_COLUMNS = (SampleBatch.OBS, SampleBatch.ACTIONS, SampleBatch.REWARDS, SampleBatch.NEXT_OBS,
                SampleBatch.TERMINATEDS, SampleBatch.DISCOUNTS, SampleBatch.WEIGHTS)


def check_action_space(action_space: gym.Space) -> None:
    """Raises unless SAC can act in ``action_space``: a Box with finite bounds (the
    squashed Gaussian acts in [-1, 1], mapped onto the bounds) or a Discrete space.

    Raises:
        ConfigError: Saying what to use instead.
    """
    if isinstance(action_space, gym.spaces.Discrete):
        return
    if isinstance(action_space, gym.spaces.MultiDiscrete):
        raise ConfigError(
            f"SAC does not support MultiDiscrete action spaces ({action_space}): use PPO, or discretise the actions "
            "into one Discrete space with a gymnasium ActionWrapper.")
    if not isinstance(action_space, gym.spaces.Box):
        raise ConfigError(f"SAC needs a Box or Discrete action space, got {action_space}; use PPO for other spaces.")
    if not (np.isfinite(action_space.low).all() and np.isfinite(action_space.high).all()):
        raise ConfigError(
            f"SAC needs finite action bounds, got {action_space} (low {action_space.low}, high {action_space.high}): "
            "its squashed Gaussian acts in [-1, 1] and is mapped onto the bounds. Wrap the env to rescale its actions "
            "(gymnasium.wrappers.RescaleAction onto finite bounds) or use PPO.")


def sac_model_spec(policy: Policy) -> ActorCriticSpec:
    """The actor (``policy_model``) and critics (``Q_model``, two with ``twin_q``) of a
    SAC policy: a squashed-Gaussian actor with Q(s, a) critics for Box actions, a
    categorical actor with Q(s, .) critics for Discrete actions.

    Raises:
        ConfigError: For an action space SAC cannot act in, or a bad sub-config.
    """
    check_action_space(policy.action_space)
    discrete = isinstance(policy.action_space, gym.spaces.Discrete)
    config = policy.config
    return actor_critic_spec(policy.observation_space, policy.action_space, config["policy_model"],
                             config["Q_model"], "categorical" if discrete else "squashed_gaussian", config["twin_q"])


def target_entropy(config: dict, action_space: gym.Space) -> float:
    """The entropy the learned ``alpha`` steers towards: ``target_entropy``, or with
    "auto" (or None) 1.13's choice: ``-action_dim`` for Box actions (Haarnoja et al.
    2018) and ``0.98 * log(num_actions)``, 98% of the uniform policy's entropy, for
    Discrete actions (Christodoulou 2019)."""
    value = config["target_entropy"]
    if value is None or value == "auto":
        if isinstance(action_space, gym.spaces.Discrete):
            return 0.98 * -math.log(1.0 / int(action_space.n))
        return -float(np.prod(action_space.shape))
    return float(value)


def postprocess_sac(batch: SampleBatch, config: dict) -> SampleBatch:
    """n-step returns (``no_done_at_end`` is applied where episodes end, in the
    rollout worker's VectorEnv)."""
    return postprocess_n_step(batch, config)


class SACPolicyMixin:
    """What SAC's numpy, torch and TF policies share, put before their base
    (``class SACTorchPolicy(SACLearningPolicyMixin, TorchPolicy)``): the actor acts in
    [-1, 1] and replay keeps each step's next observation."""

    needs_next_obs = True
    needs_bootstrap_value = False
    # The actor acts in [-1, 1]; Box actions are mapped onto the bounds whatever
    # normalize_actions says (1.13's squashed Gaussian mapped onto them itself).
    acts_in_unit_box = True


class SACLearningPolicyMixin(SACPolicyMixin):
    """:class:`SACPolicyMixin` and what the torch and TF policies add alike: the loss's
    columns and per-row TD errors, one gradient step per ``train_batch_size`` replayed
    rows in order, and :func:`postprocess_sac`."""

    loss_columns = LOSS_COLUMNS
    # One gradient step per train_batch_size replayed rows, in order; TD errors per row
    # become the rows' new replay priorities.
    shuffle_minibatches = False
    per_row_stats = ("td_error",)

    # The trainer's merged config (the policy's).
    config: dict

    def minibatch_plan(self, n: int) -> tuple[int, int]:
        if self._plan_override is not None:  # an execution plan's TrainOneStep arguments
            return super().minibatch_plan(n)
        """One pass, ``train_batch_size`` rows per gradient step."""
        return min(int(self.config["train_batch_size"]), n), 1

    def postprocess_trajectory(self, batch: SampleBatch) -> SampleBatch:
        return postprocess_sac(batch, self.config)


class SACNumpyPolicy(SACPolicyMixin, NumpyPolicy):
    """Acts with SAC's built-in dense actor in numpy (rollout workers).

    Args:
        observation_space: The env's observation space.
        action_space: A bounded Box or a Discrete action space.
        config: The trainer's merged config.
        num_gpus: Must be 0.
        sampling_seed: Seed of the action-sampling generator.
        postprocess_fn: The trajectory postprocessing (:func:`postprocess_sac`).
    """

    model_class = NumpyActorCritic

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict, num_gpus: float = 0,
                 sampling_seed: int | None = None, postprocess_fn: PostprocessFn | None = None) -> None:
        check_action_space(action_space)  # SAC's message before the generic one
        super().__init__(observation_space, action_space, config, num_gpus, sampling_seed, postprocess_fn)

    def model_spec(self) -> ActorCriticSpec:
        return sac_model_spec(self)

    def set_acting_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Loads the learner's actor (SAC's ``acting_weights``); the critics stay."""
        self.model.set_actor_weights(weights)

    def compute_actions(self, obs_batch: np.ndarray, explore: bool | None = None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        explore = self.config.get("explore", True) if explore is None else bool(explore)
        outputs = self.model.actor_outputs(np.asarray(obs_batch, dtype=np.float32))
        if isinstance(self.action_space, gym.spaces.Discrete):
            dist = Categorical(outputs, self.dist_spec)
        else:
            dist = SquashedGaussian(outputs)
        actions = dist.sample(self.sampling_rng) if explore else dist.deterministic_sample()
        return actions, {SampleBatch.ACTION_DIST_INPUTS: outputs.astype(np.float32, copy=False),
                         SampleBatch.ACTION_LOGP: dist.logp(actions)}



__all__ = ["LOSS_COLUMNS", "SACLearningPolicyMixin", "SACNumpyPolicy", "SACPolicyMixin", "check_action_space",
           "postprocess_sac", "sac_model_spec", "target_entropy"]
