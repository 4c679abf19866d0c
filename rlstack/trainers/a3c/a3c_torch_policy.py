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
    # The loss sums over rows; its entropy statistic is a per-row mean (microbatches
    # of compute_gradients weight it by rows).
    row_mean_stats = ("entropy",)

    loss_columns = (SampleBatch.OBS, SampleBatch.ACTIONS, SampleBatch.ADVANTAGES, SampleBatch.VALUE_TARGETS)

    def postprocess_trajectory(self, batch: SampleBatch) -> SampleBatch:
        return postprocess_advantages(batch, self.config)

    def loss(self, train_batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        dist_inputs, values = self.model.policy_and_value(train_batch[SampleBatch.OBS])
        dist = self.action_dist(dist_inputs)
        logp = dist.logp(train_batch[SampleBatch.ACTIONS])
        # Sums over the batch, as in the paper's implementation and classic RLlib.
        pi_err = -(logp * train_batch[SampleBatch.ADVANTAGES]).sum()
        value_err = 0.5 * ((values - train_batch[SampleBatch.VALUE_TARGETS]) ** 2).sum()
        entropy = dist.entropy().sum()
        total_loss = pi_err + self.config["vf_loss_coeff"] * value_err - self.entropy_coeff * entropy
        return total_loss, {"total_loss": total_loss, "policy_loss": pi_err, "vf_loss": value_err,
                            "entropy": entropy / max(1, len(logp))}
