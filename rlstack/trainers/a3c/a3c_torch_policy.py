"""The advantage actor-critic loss of A2C and A3C in torch (Mnih et al. 2016).

A2C learns through the base loop (one step on the whole batch); A3C's rollout workers
call the base ``compute_gradients`` on their own samples and the driver
``apply_gradients`` as they arrive.
"""

from __future__ import annotations

import torch

from rlstack.policies.postprocessing import postprocess_advantages
from rlstack.policies.torch_policy import TorchPolicy
from rlstack.sample_batch import SampleBatch


class A3CTorchPolicy(TorchPolicy):
    """A2C/A3C in torch; the loss equals :class:`A3CTFPolicy`'s to float32 rounding."""

    schedules_entropy_coeff = True
    # use_lstm and custom recurrent models: the loss reads padded sequences (unroll).
    supports_recurrent_models = True
    # The loss sums over rows; its entropy statistic is a per-row mean (microbatches
    # of compute_gradients weight it by rows).
    row_mean_stats = ("entropy",)

    loss_columns = (SampleBatch.OBS, SampleBatch.ACTIONS, SampleBatch.ADVANTAGES, SampleBatch.VALUE_TARGETS)

    def postprocess_trajectory(self, batch: SampleBatch) -> SampleBatch:
        return postprocess_advantages(batch, self.config)

    def loss(self, train_batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        # Sums over the batch's steps (only the real ones of padded sequences), as in the
        # paper's implementation and classic RLlib.
        batch, total = self.unroll(train_batch, reduce="sum")
        dist_inputs, values = self.model_outputs(batch)
        dist = self.action_dist(dist_inputs)
        logp = dist.logp(batch[SampleBatch.ACTIONS])
        pi_err = -total(logp * batch[SampleBatch.ADVANTAGES])
        value_err = 0.5 * total((values - batch[SampleBatch.VALUE_TARGETS]) ** 2)
        entropy = total(dist.entropy())
        total_loss = pi_err + self.config["vf_loss_coeff"] * value_err - self.entropy_coeff * entropy
        steps = total(torch.ones_like(logp)).clamp(min=1.0)
        return total_loss, {"total_loss": total_loss, "policy_loss": pi_err, "vf_loss": value_err,
                            "entropy": entropy / steps}
