"""PG's REINFORCE loss in torch (Williams 1992)."""

from __future__ import annotations

import torch

from rlstack.policies.torch_policy import TorchPolicy
from rlstack.sample_batch import SampleBatch
from rlstack.trainers.pg.pg_policy import postprocess_returns


class PGTorchPolicy(TorchPolicy):
    """Vanilla policy gradient in torch; the loss equals :class:`PGTFPolicy`'s to float32
    rounding. The model's value head is built (the catalog's networks have one) but never
    trained or read."""

    # No critic: the worker computes no V(s) where a piece is cut.
    needs_bootstrap_value = False
    supports_recurrent_models = True

    loss_columns = (SampleBatch.OBS, SampleBatch.ACTIONS, SampleBatch.ADVANTAGES)

    def postprocess_trajectory(self, batch: SampleBatch) -> SampleBatch:
        return postprocess_returns(batch, self.config)

    def loss(self, train_batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        # One row per step; `mean` is over real steps only (padded sequences of a recurrent model).
        batch, mean = self.unroll(train_batch)
        dist_inputs, _ = self.model_outputs(batch)
        logp = self.action_dist(dist_inputs).logp(batch[SampleBatch.ACTIONS])
        # grad J = E[grad log pi(a_t | s_t) * G_t]; "advantages" holds the returns G_t.
        policy_loss = -mean(logp * batch[SampleBatch.ADVANTAGES])
        return policy_loss, {"policy_loss": policy_loss}
