"""PG's REINFORCE loss in TensorFlow (Williams 1992); see :mod:`pg_torch_policy`."""

from __future__ import annotations

from rlstack.models.tf.framework import tf
from rlstack.policies.tf_policy import TFPolicy
from rlstack.sample_batch import SampleBatch
from rlstack.trainers.pg.pg_policy import postprocess_returns


class PGTFPolicy(TFPolicy):
    """Vanilla policy gradient in TensorFlow; the loss equals :class:`PGTorchPolicy`'s to
    float32 rounding. The model's value head is built but never trained or read."""

    # No critic: the worker computes no V(s) where a piece is cut.
    needs_bootstrap_value = False
    supports_recurrent_models = True

    loss_columns = (SampleBatch.OBS, SampleBatch.ACTIONS, SampleBatch.ADVANTAGES)

    def postprocess_trajectory(self, batch: SampleBatch) -> SampleBatch:
        return postprocess_returns(batch, self.config)

    def loss(self, train_batch: dict[str, tf.Tensor]) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
        # One row per step; `mean` is over real steps only (padded sequences of a recurrent model).
        batch, mean = self.unroll(train_batch)
        dist_inputs, _ = self.model_outputs(batch)
        logp = self.action_distribution(dist_inputs).logp(batch[SampleBatch.ACTIONS])
        # grad J = E[grad log pi(a_t | s_t) * G_t]; "advantages" holds the returns G_t.
        policy_loss = -mean(logp * batch[SampleBatch.ADVANTAGES])
        return policy_loss, {"policy_loss": policy_loss}
