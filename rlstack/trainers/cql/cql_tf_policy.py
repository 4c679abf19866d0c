"""CQL's losses in TensorFlow; see :mod:`cql_torch_policy`."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np

from rlstack.models.tf.distributions import SquashedGaussian
from rlstack.models.tf.framework import tf
from rlstack.policies.tf_policy import Optimizer
from rlstack.sample_batch import SampleBatch
from rlstack.trainers.cql.cql import check_cql_action_space
from rlstack.trainers.sac.sac_tf_policy import SACTFPolicy

B = SampleBatch


class CQLTFPolicy(SACTFPolicy):
    """CQL in TensorFlow; the losses equal :class:`CQLTorchPolicy`'s to float32 rounding."""

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict, num_gpus: float = 0,
                 sampling_seed: int | None = None) -> None:
        check_cql_action_space(action_space)
        super().__init__(observation_space, action_space, config, num_gpus, sampling_seed)
        with tf.device(self.device):
            # The Lagrangian's log(alpha') (learned only with lagrangian=True).
            self.log_alpha_prime = tf.Variable(0.0, dtype=tf.float32, name="log_alpha_prime")

    def make_optimizers(self) -> list[Optimizer]:
        optimizers = super().make_optimizers()
        if self.config["lagrangian"]:
            optimizers.append(self.make_optimizer([self.log_alpha_prime], self.critic_lr))
        return optimizers

    def cql_uniform_actions(self, shape: tf.Tensor) -> tf.Tensor:
        """The uniform actions in [-1, 1] of the conservative term (tests replace it)."""
        return self.loss_rng.uniform(shape, -1.0, 1.0)

    def loss(self, train_batch: dict[str, tf.Tensor]) -> tuple[tuple[tf.Tensor, ...], dict[str, tf.Tensor]]:
        cfg = self.config
        (actor_loss, critic_loss, alpha_loss), stats = super().loss(train_batch)
        obs, next_obs, actions = train_batch[B.OBS], train_batch[B.NEXT_OBS], train_batch[B.ACTIONS]
        n, num, dim = tf.shape(obs)[0], int(cfg["num_actions"]), int(self.action_space.shape[0])
        alpha = tf.stop_gradient(tf.exp(self.log_alpha))
        # Behaviour cloning for the first bc_iters steps (see cql_torch_policy.py).
        dist_t = SquashedGaussian(self.model.actor_outputs(obs))
        _, log_pis_t = dist_t.sample_with_logp(noise=self.loss_noise(tf.stack([n, dim])))
        bc_loss = tf.reduce_mean(alpha * log_pis_t - dist_t.logp(tf.clip_by_value(actions, -1 + 1e-6, 1 - 1e-6)))
        actor_loss = tf.cond(self.num_grad_steps < cfg["bc_iters"], lambda: bc_loss, lambda: actor_loss)
        obs_rep, next_rep = tf.repeat(obs, num, axis=0), tf.repeat(next_obs, num, axis=0)
        noise = self.loss_noise(tf.stack([2 * n * num, dim]))
        curr, logp_curr = SquashedGaussian(self.model.actor_outputs(obs_rep)).sample_with_logp(noise=noise[:n * num])
        nxt, logp_next = SquashedGaussian(self.model.actor_outputs(next_rep)).sample_with_logp(noise=noise[n * num:])
        curr, logp_curr, nxt, logp_next = map(tf.stop_gradient, (curr, logp_curr, nxt, logp_next))
        uniform = self.cql_uniform_actions(tf.stack([n * num, dim]))

        def per_state(q: tf.Tensor) -> tf.Tensor:
            return tf.reshape(q, tf.stack([-1, n, num]))

        q_rand = per_state(self.model.critic_values(obs_rep, uniform)) - dim * math.log(0.5)
        q_curr = per_state(self.model.critic_values(obs_rep, curr)) - tf.reshape(logp_curr, tf.stack([1, n, num]))
        q_next = per_state(self.model.critic_values(obs_rep, nxt)) - tf.reshape(logp_next, tf.stack([1, n, num]))
        temp = float(cfg["temperature"])
        soft_max = tf.reduce_mean(tf.reduce_logsumexp(tf.concat([q_rand, q_next, q_curr], axis=2) / temp, axis=2),
                                  axis=1) * temp
        q_data = tf.reduce_mean(self.model.critic_values(obs, actions), axis=1)
        gap = cfg["min_q_weight"] * (soft_max - q_data)
        losses = [actor_loss, critic_loss, alpha_loss]
        if cfg["lagrangian"]:
            alpha_prime = tf.clip_by_value(tf.exp(self.log_alpha_prime), 0.0, 1e6)
            conservative = tf.stop_gradient(alpha_prime) * (gap - cfg["lagrangian_thresh"])
            losses.append(-0.5 * tf.reduce_sum(alpha_prime * (tf.stop_gradient(gap) - cfg["lagrangian_thresh"])))
            stats["alpha_prime_value"] = tf.stop_gradient(alpha_prime)
            stats["alpha_prime_loss"] = losses[-1]
        else:
            conservative = gap
        losses[1] = critic_loss + tf.reduce_sum(conservative)
        stats.update(actor_loss=losses[0], critic_loss=losses[1], cql_loss=tf.reduce_sum(conservative),
                     cql_gap=tf.reduce_mean(tf.stop_gradient(gap)) / max(cfg["min_q_weight"], 1e-8))
        return tuple(losses), stats

    def get_state(self):  # noqa: ANN201 - PolicyState
        state = super().get_state()
        state["log_alpha_prime"] = np.asarray(self.log_alpha_prime.numpy())
        return state

    def set_state(self, state) -> None:  # noqa: ANN001 - PolicyState
        super().set_state(state)
        if "log_alpha_prime" in state:
            self.log_alpha_prime.assign(float(state["log_alpha_prime"]))
