"""The advantage actor-critic loss of A2C and A3C in TensorFlow (Mnih et al. 2016);
see :mod:`a3c_torch_policy`."""

from __future__ import annotations

from rlstack.models.tf.framework import tf
from rlstack.policies.postprocessing import postprocess_advantages
from rlstack.policies.tf_policy import TFPolicy
from rlstack.sample_batch import SampleBatch


class A3CTFPolicy(TFPolicy):
    """A2C/A3C in TensorFlow; the loss equals :class:`A3CTorchPolicy`'s to float32 rounding."""

    schedules_entropy_coeff = True
    # use_lstm and custom recurrent models: the loss reads padded sequences (unroll).
    supports_recurrent_models = True
    # The loss sums over rows; its entropy statistic is a per-row mean (microbatches
    # of compute_gradients weight it by rows).
    row_mean_stats = ("entropy",)

    loss_columns = (SampleBatch.OBS, SampleBatch.ACTIONS, SampleBatch.ADVANTAGES, SampleBatch.VALUE_TARGETS)

    def postprocess_trajectory(self, batch: SampleBatch) -> SampleBatch:
        return postprocess_advantages(batch, self.config)

    def loss(self, train_batch: dict[str, tf.Tensor]) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
        # Sums over the batch's steps (only the real ones of padded sequences), as in the
        # paper's implementation and classic RLlib.
        batch, total = self.unroll(train_batch, reduce="sum")
        dist_inputs, values = self.model_outputs(batch)
        dist = self.action_distribution(dist_inputs)
        logp = dist.logp(batch[SampleBatch.ACTIONS])
        pi_err = -total(logp * batch[SampleBatch.ADVANTAGES])
        value_err = 0.5 * total(tf.square(values - batch[SampleBatch.VALUE_TARGETS]))
        entropy = total(dist.entropy())
        total_loss = pi_err + self.config["vf_loss_coeff"] * value_err - self.entropy_coeff * entropy
        count = tf.maximum(1.0, total(tf.ones_like(logp)))
        return total_loss, {"total_loss": total_loss, "policy_loss": pi_err, "vf_loss": value_err,
                            "entropy": entropy / count}
