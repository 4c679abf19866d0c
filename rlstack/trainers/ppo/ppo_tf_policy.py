"""PPO's clipped-surrogate loss with adaptive KL penalty, in TensorFlow (Schulman et al. 2017)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from rlstack.models.tf.distributions import CLOSED_FORM_TERMS
from rlstack.models.tf.framework import tf
from rlstack.models.tf.fused import DenseGraph
from rlstack.policies.postprocessing import adapt_kl_coeff, postprocess_advantages
from rlstack.policies.tf_policy import TFPolicy
from rlstack.sample_batch import SampleBatch


class PPOTFPolicy(TFPolicy):
    """PPO in TensorFlow; the loss equals :class:`PPOTorchPolicy`'s to float32 rounding."""

    schedules_entropy_coeff = True
    # use_lstm and custom recurrent models: the loss reads padded sequences (unroll).
    supports_recurrent_models = True
    # The closed-form gradient (see _fused_loss_and_gradients) where the model and the
    # action distribution allow it; False: always the GradientTape.
    use_fused_sgd = True

    loss_columns = (
        SampleBatch.OBS,
        SampleBatch.ACTIONS,
        SampleBatch.ACTION_LOGP,
        SampleBatch.ACTION_DIST_INPUTS,
        SampleBatch.ADVANTAGES,
        SampleBatch.VALUE_TARGETS,
    )

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict, num_gpus: float = 0,
                 sampling_seed: int | None = None) -> None:
        super().__init__(observation_space, action_space, config, num_gpus, sampling_seed)
        # Variables, not Python floats, so that changing them does not retrace the loss.
        self.kl_coeff = tf.Variable(float(config["kl_coeff"]), trainable=False, dtype=tf.float32)
        self._dense_graph: DenseGraph | None = None

    def postprocess_trajectory(self, batch: SampleBatch) -> SampleBatch:
        return postprocess_advantages(batch, self.config)

    def loss(self, train_batch: dict[str, tf.Tensor]) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
        cfg = self.config
        # One row per step; `mean` is over real steps only (padded sequences of a recurrent model).
        batch, mean = self.unroll(train_batch)
        dist_inputs, values = self.model_outputs(batch)
        curr_dist = self.action_distribution(dist_inputs)
        prev_dist = self.action_distribution(batch[SampleBatch.ACTION_DIST_INPUTS])

        # ratio = pi_new(a|s) / pi_old(a|s)
        ratio = tf.exp(curr_dist.logp(batch[SampleBatch.ACTIONS]) - batch[SampleBatch.ACTION_LOGP])
        advantages = batch[SampleBatch.ADVANTAGES]
        pg_loss1 = advantages * ratio
        pg_loss2 = advantages * tf.clip_by_value(ratio, 1.0 - cfg["clip_param"], 1.0 + cfg["clip_param"])
        surrogate = mean(tf.minimum(pg_loss1, pg_loss2))

        # KL(pi_old || pi_new), penalised with the adaptive kl_coeff.
        mean_kl = mean(prev_dist.kl(curr_dist))
        entropy = mean(curr_dist.entropy())

        if cfg["use_critic"]:
            # vf_clip_param clips the squared value error (the loss), not the value.
            vf_loss = mean(
                tf.clip_by_value(tf.square(values - batch[SampleBatch.VALUE_TARGETS]), 0.0, cfg["vf_clip_param"])
            )
        else:
            vf_loss = tf.constant(0.0)

        total_loss = -surrogate + self.kl_coeff * mean_kl + cfg["vf_loss_coeff"] * vf_loss - self.entropy_coeff * entropy
        stats = {
            "total_loss": total_loss,
            "policy_loss": -surrogate,
            "vf_loss": vf_loss,
            "kl": mean_kl,
            "entropy": entropy,
        }
        return total_loss, stats

    def loss_and_gradients(self, minibatch: dict[str, tf.Tensor]) -> tuple[tf.Tensor, dict, list[tf.Tensor]]:
        # Without a critic the value layers get no gradient; that case keeps the tape.
        # Recurrent models (BPTT over padded sequences) keep the tape too.
        if not (self.use_fused_sgd and self.config["use_critic"] and self.custom_dist_class is None
                and self.dist_spec.kind in CLOSED_FORM_TERMS and not self.is_recurrent
                and DenseGraph.supports(self.model)):
            return super().loss_and_gradients(minibatch)
        return self._fused_loss_and_gradients(minibatch)

    def _fused_loss_and_gradients(self, minibatch: dict[str, tf.Tensor]) -> tuple[tf.Tensor, dict, list[tf.Tensor]]:
        """:meth:`loss` and its gradient written out for a :class:`DenseGraph`; the
        formulas are :meth:`PPOTorchPolicy._fused_grad_fn`'s. ``tf.minimum``'s gradient
        goes to its first argument on ties, as torch's does."""
        cfg = self.config
        if self._dense_graph is None:
            self._dense_graph = DenseGraph(self.model)
        graph = self._dense_graph
        dist_inputs, values, saved = graph.forward(minibatch[SampleBatch.OBS])
        rows = tf.cast(tf.shape(dist_inputs)[0], tf.float32)
        logp, kl, entropy, dlogp, dkl, dentropy = CLOSED_FORM_TERMS[self.dist_spec.kind].closed_form_terms(
            dist_inputs, minibatch[SampleBatch.ACTIONS], minibatch[SampleBatch.ACTION_DIST_INPUTS])
        advantages = minibatch[SampleBatch.ADVANTAGES]
        ratio = tf.exp(logp - minibatch[SampleBatch.ACTION_LOGP])
        pg_loss1 = advantages * ratio
        pg_loss2 = advantages * tf.clip_by_value(ratio, 1.0 - cfg["clip_param"], 1.0 + cfg["clip_param"])
        error = values - minibatch[SampleBatch.VALUE_TARGETS]
        squared_error = tf.square(error)
        vf_clip = float(cfg["vf_clip_param"])

        grad_logp = tf.where(pg_loss1 <= pg_loss2, advantages, 0.0) * ratio * (-1.0 / rows)
        grad_inputs = (dlogp * tf.expand_dims(grad_logp, 1) + dkl * (self.kl_coeff / rows)
                       - dentropy * (self.entropy_coeff / rows))
        grad_values = tf.where(squared_error <= vf_clip, error, 0.0) * (2.0 * float(cfg["vf_loss_coeff"]) / rows)
        grads = graph.gradients(saved, grad_inputs, grad_values)

        surrogate = tf.reduce_mean(tf.minimum(pg_loss1, pg_loss2))
        mean_kl, mean_entropy = tf.reduce_mean(kl), tf.reduce_mean(entropy)
        vf_loss = tf.reduce_mean(tf.minimum(squared_error, vf_clip))
        total_loss = (-surrogate + self.kl_coeff * mean_kl + cfg["vf_loss_coeff"] * vf_loss
                      - self.entropy_coeff * mean_entropy)
        stats = {"total_loss": total_loss, "policy_loss": -surrogate, "vf_loss": vf_loss, "kl": mean_kl,
                 "entropy": mean_entropy}
        return total_loss, stats, grads

    def after_learn(self, stats: dict[str, float]) -> dict[str, float]:
        self.kl_coeff.assign(adapt_kl_coeff(float(self.kl_coeff.numpy()), stats["kl"], self.config["kl_target"]))
        return {"kl_coeff": float(self.kl_coeff.numpy()), "entropy_coeff": float(self.entropy_coeff.numpy())}

    def get_state(self) -> dict[str, np.ndarray]:
        state = super().get_state()
        state["kl_coeff"] = np.asarray(self.kl_coeff.numpy(), dtype=np.float64)
        return state

    def set_state(self, state: dict[str, np.ndarray]) -> None:
        super().set_state(state)
        if "kl_coeff" in state:
            self.kl_coeff.assign(float(state["kl_coeff"]))

