"""SAC's loss in TensorFlow: the same three losses as :mod:`sac_torch_policy` (see there
for the papers and 1.13's choices), traced into the base's compiled learner loop."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np

from rlstack.models.blocks import ActorCriticSpec
from rlstack.models.tf.blocks import TFActorCritic, TFCritics
from rlstack.models.tf.distributions import Categorical, SquashedGaussian
from rlstack.models.tf.framework import tf
from rlstack.policies.policy import saved_target_weights, target_state
from rlstack.policies.tf_policy import Optimizer, TFPolicy
from rlstack.sample_batch import SampleBatch
from rlstack.trainers.sac.sac_policy import (SACLearningPolicyMixin, check_action_space, sac_model_spec,
                                             target_entropy)
from rlstack.utils.schedules import make_schedule

B = SampleBatch


def _huber(x: tf.Tensor) -> tf.Tensor:
    # Huber loss with delta 1, as torch's F.huber_loss.
    abs_x = tf.abs(x)
    return tf.where(abs_x < 1.0, 0.5 * tf.square(x), abs_x - 0.5)


class SACTFPolicy(SACLearningPolicyMixin, TFPolicy):
    """SAC in TensorFlow; the losses equal :class:`SACTorchPolicy`'s to float32 rounding."""

    model_class = TFActorCritic

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict, num_gpus: float = 0,
                 sampling_seed: int | None = None) -> None:
        check_action_space(action_space)  # SAC's message before the generic one
        super().__init__(observation_space, action_space, config, num_gpus, sampling_seed)
        self.discrete = isinstance(action_space, gym.spaces.Discrete)
        self.dist_class = Categorical if self.discrete else SquashedGaussian
        self.target_entropy = target_entropy(config, action_space)
        rates = config["optimization"]
        # `lr` is not SAC's: the actor's rate is optimization.actor_learning_rate.
        self.lr_schedule = make_schedule(rates["actor_learning_rate"], None, "lr_schedule")
        with tf.device(self.device):
            self.lr.assign(rates["actor_learning_rate"])
            # The entropy coefficient, learned as log(alpha) (an optimizer of its own).
            self.log_alpha = tf.Variable(math.log(config["initial_alpha"]), dtype=tf.float32, name="log_alpha")
            self.critic_lr = tf.Variable(rates["critic_learning_rate"], trainable=False, dtype=tf.float32)
            self.entropy_lr = tf.Variable(rates["entropy_learning_rate"], trainable=False, dtype=tf.float32)
            # Target critics: moved towards the critics by update_target().
            self.target_critics = TFCritics(self.model.spec, self.model.get_canonical_weights())
            # The loss's own noise (reparameterised action samples), apart from acting's.
            self.loss_rng = (tf.random.Generator.from_seed(int(config["seed"])) if config.get("seed") is not None
                             else tf.random.Generator.from_non_deterministic_state())
        self._update_target_fn = self.graph_function(self._update_target, [tf.TensorSpec([], tf.float32)])

    def model_spec(self) -> ActorCriticSpec:
        return sac_model_spec(self)

    def make_optimizers(self) -> list[Optimizer]:
        """Adam for the actor, the critics and log(alpha), in the order of :meth:`loss`'s
        losses; each with its own learning-rate variable (the actor's is ``self.lr``)."""
        return [self.make_optimizer(self.model.actor_variables, self.lr),
                self.make_optimizer(self.model.critic_variables, self.critic_lr),
                self.make_optimizer([self.log_alpha], self.entropy_lr)]

    # ----- acting -----------------------------------------------------------------

    def action_distribution(self, dist_inputs: tf.Tensor) -> SquashedGaussian | Categorical:
        """The actor's distribution: a squashed Gaussian acting in [-1, 1], or a categorical."""
        return self.dist_class(dist_inputs, self.model)

    def _act(self, obs: tf.Tensor, explore: bool) -> tuple[tf.Tensor, ...]:
        dist_inputs = self.model.actor_outputs(obs)
        dist = self.action_distribution(dist_inputs)
        actions = dist.sample(self.sampling_rng) if explore else dist.deterministic_sample()
        logp = dist.logp(actions) if self.discrete else dist.sampled_action_logp()
        return actions, logp, dist_inputs

    def compute_actions(self, obs_batch: np.ndarray, explore: bool | None = None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        explore = self.config.get("explore", True) if explore is None else bool(explore)
        fn = self._act_explore if explore else self._act_greedy
        with tf.device(self.device):
            actions, logp, dist_inputs = fn(tf.convert_to_tensor(obs_batch, dtype=tf.float32))
        return actions.numpy(), {B.ACTION_DIST_INPUTS: dist_inputs.numpy(), B.ACTION_LOGP: logp.numpy()}

    # ----- learning ---------------------------------------------------------------

    def loss_noise(self, shape: tf.Tensor) -> tf.Tensor:
        """Standard normal noise of the loss's reparameterised samples (tests replace it)."""
        return self.loss_rng.normal(shape)

    def loss(self, train_batch: dict[str, tf.Tensor]) -> tuple[tuple[tf.Tensor, ...], dict[str, tf.Tensor]]:
        """``((actor_loss, critic_loss, alpha_loss), stats)`` on a replayed minibatch."""
        obs, next_obs = train_batch[B.OBS], train_batch[B.NEXT_OBS]
        alpha = tf.exp(self.log_alpha)
        not_done = 1.0 - tf.cast(train_batch[B.TERMINATEDS], tf.float32)
        # The actor on s_t (differentiated) and on s_{t+1} (only the target reads it).
        dist_inputs_t = self.model.actor_outputs(obs)
        dist_inputs_tp1 = tf.stop_gradient(self.model.actor_outputs(next_obs))
        if self.discrete:
            return self._discrete_loss(train_batch, dist_inputs_t, dist_inputs_tp1, alpha, not_done)
        dist_t, dist_tp1 = SquashedGaussian(dist_inputs_t), SquashedGaussian(dist_inputs_tp1)
        if self.config["_deterministic_loss"]:
            policy_t, log_pis_t = dist_t.deterministic_sample(), dist_t.sampled_action_logp()
            policy_tp1, log_pis_tp1 = dist_tp1.deterministic_sample(), dist_tp1.sampled_action_logp()
        else:
            # Rows 0..n-1 of the noise for s_t, rows n..2n-1 for s_{t+1}.
            n = tf.shape(obs)[0]
            noise = self.loss_noise(tf.stack([2 * n, tf.shape(dist_t.mean)[1]]))
            policy_t, log_pis_t = dist_t.sample_with_logp(noise=noise[:n])
            policy_tp1, log_pis_tp1 = dist_tp1.sample_with_logp(noise=noise[n:])
        # Q_j(s, a) of the replayed actions, and min_j Q_j(s, pi(s)): two passes, so that
        # each loss's backward pass runs over its own rows only.
        q_t = self.model.critic_values(obs, train_batch[B.ACTIONS])  # [C, n]
        q_t_policy = tf.reduce_min(self.model.critic_values(obs, policy_t), axis=0)
        # y = r + gamma^k (1 - terminated) (min_j Q'_j(s', a') - alpha log pi(a'|s')),  a' ~ pi(.|s')
        q_tp1 = tf.reduce_min(self.target_critics(next_obs, policy_tp1), axis=0) - alpha * log_pis_tp1
        target = tf.stop_gradient(train_batch[B.REWARDS] + train_batch[B.DISCOUNTS] * not_done * q_tp1)
        # J_pi = E[alpha log pi(a|s) - min_j Q_j(s, a)],  a = tanh(mean + std * noise)
        actor_loss = tf.reduce_mean(tf.stop_gradient(alpha) * log_pis_t - q_t_policy)
        # J_alpha = E[-log(alpha) (log pi(a|s) + target_entropy)]
        alpha_loss = -tf.reduce_mean(self.log_alpha * tf.stop_gradient(log_pis_t + self.target_entropy))
        return self._with_critic_loss(train_batch, q_t, target, actor_loss, alpha_loss, alpha, log_pis_t, policy_t)

    def _discrete_loss(self, train_batch: dict[str, tf.Tensor], logits_t: tf.Tensor, logits_tp1: tf.Tensor,
                       alpha: tf.Tensor, not_done: tf.Tensor) -> tuple[tuple[tf.Tensor, ...], dict[str, tf.Tensor]]:
        # Discrete SAC: expectations over actions in closed form, no sampling.
        log_pis_t, log_pis_tp1 = tf.nn.log_softmax(logits_t, axis=-1), tf.nn.log_softmax(logits_tp1, axis=-1)
        policy_t, policy_tp1 = tf.exp(log_pis_t), tf.exp(log_pis_tp1)
        q_all = self.model.critic_values(train_batch[B.OBS])  # [C, n, num_actions]
        actions = tf.cast(train_batch[B.ACTIONS], tf.int32)
        q_t = tf.reduce_sum(q_all * tf.one_hot(actions, tf.shape(q_all)[-1]), axis=-1)
        # V(s') = sum_a' pi(a'|s') (min_j Q'_j(s', a') - alpha log pi(a'|s'))
        q_tp1 = tf.reduce_min(self.target_critics(train_batch[B.NEXT_OBS]), axis=0)
        v_tp1 = tf.reduce_sum(policy_tp1 * (q_tp1 - alpha * log_pis_tp1), axis=-1)
        target = tf.stop_gradient(train_batch[B.REWARDS] + train_batch[B.DISCOUNTS] * not_done * v_tp1)
        # J_pi = E_s[sum_a pi(a|s) (alpha log pi(a|s) - min_j Q_j(s, a))]
        q_min = tf.stop_gradient(tf.reduce_min(q_all, axis=0))
        actor_loss = tf.reduce_mean(tf.reduce_sum(policy_t * (tf.stop_gradient(alpha) * log_pis_t - q_min), -1))
        # J_alpha = E_s[-log(alpha) sum_a pi(a|s) (log pi(a|s) + target_entropy)]
        entropy_gap = tf.stop_gradient(tf.reduce_sum(policy_t * (log_pis_t + self.target_entropy), axis=-1))
        alpha_loss = -tf.reduce_mean(self.log_alpha * entropy_gap)
        log_pi_mean = tf.reduce_sum(policy_t * log_pis_t, axis=-1)
        return self._with_critic_loss(train_batch, q_t, target, actor_loss, alpha_loss, alpha, log_pi_mean, policy_t)

    def _with_critic_loss(self, train_batch: dict[str, tf.Tensor], q_t: tf.Tensor, target: tf.Tensor,
                          actor_loss: tf.Tensor, alpha_loss: tf.Tensor, alpha: tf.Tensor, log_pis_t: tf.Tensor,
                          policy_t: tf.Tensor) -> tuple[tuple[tf.Tensor, ...], dict[str, tf.Tensor]]:
        # J_Q = sum_j E[w * huber(Q_j(s, a) - y)] (1.13: Huber, delta 1; w: importance weights)
        td = q_t - target  # [C, n]
        critic_loss = tf.reduce_sum(tf.reduce_mean(train_batch[B.WEIGHTS] * _huber(td), axis=1))
        stats = {
            "actor_loss": actor_loss,
            "critic_loss": critic_loss,
            "alpha_loss": alpha_loss,
            "alpha_value": alpha,
            "log_alpha_value": tf.identity(self.log_alpha),
            "target_entropy": tf.constant(self.target_entropy, tf.float32),
            "entropy": -tf.reduce_mean(log_pis_t),
            "policy_t": tf.reduce_mean(policy_t),
            "mean_q": tf.reduce_mean(q_t[0]),
            "max_q": tf.reduce_max(q_t[0]),
            "min_q": tf.reduce_min(q_t[0]),
            # The new priorities: |TD error| averaged over the critics (1.13's).
            "td_error": tf.reduce_mean(tf.abs(td), axis=0),
        }
        return (actor_loss, critic_loss, alpha_loss), stats

    def _update_target(self, tau: tf.Tensor) -> tf.Tensor:
        for target, source in zip(self.target_critics.variables_list, self.model.critic_variables):
            target.assign(target + tau * (source - target))
        return tau

    def update_target(self, tau: float | None = None) -> None:
        """Moves the target critics towards the critics: ``target <- tau * critics +
        (1 - tau) * target`` (``tau`` from the config by default; 1.0 copies)."""
        tau = float(self.config["tau"] if tau is None else tau)
        with tf.device(self.device):
            if tau == 1.0:  # an exact copy
                self.target_critics.assign_from(self.model.critics)
            else:
                self._update_target_fn(tf.constant(tau, tf.float32))

    # ----- weights and state ------------------------------------------------------

    def get_weights(self) -> dict[str, np.ndarray]:
        """The actor's and critics' weights (canonical layout) and ``log_alpha``."""
        return {**self.model.get_canonical_weights(), "log_alpha": self.log_alpha.numpy().copy()}

    def acting_weights(self) -> dict[str, np.ndarray]:
        """The actor's weights: all the numpy acting copy reads (it samples from the
        actor's distribution; the critics and alpha only learn). Copying the critics too
        after every gradient step was ~20% of cartpole-sac's TF run."""
        return self.model.get_actor_weights()

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        self.model.set_canonical_weights(weights)
        if "log_alpha" in weights:
            self.log_alpha.assign(float(np.asarray(weights["log_alpha"])))

    def get_state(self) -> dict[str, np.ndarray]:
        state = super().get_state()
        state.update(target_state(self.target_critics.get_canonical_weights()))
        state["loss_rng"] = self.loss_rng.state.numpy()
        return state

    def set_state(self, state: dict[str, np.ndarray]) -> None:
        super().set_state(state)
        target = saved_target_weights(state)
        if target:
            self.target_critics.set_canonical_weights(target)
        else:
            self.update_target(tau=1.0)
        if "loss_rng" in state:
            self.loss_rng.state.assign(state["loss_rng"])
