"""The advantage actor-critic loss of A2C and A3C in torch (Mnih et al. 2016).

Gradients are computed and applied in two calls, so that A3C's rollout workers can
compute them on their own samples and the driver apply them as they arrive.
"""

from __future__ import annotations

import numpy as np
import torch

from rlstack.policies.postprocessing import postprocess_advantages
from rlstack.policies.torch_policy import TorchPolicy, clip_grad_norm
from rlstack.sample_batch import SampleBatch


class A3CTorchPolicy(TorchPolicy):
    """A2C/A3C in torch; the loss equals :class:`A3CTFPolicy`'s to float32 rounding."""

    schedules_entropy_coeff = True

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

    def compute_gradients(self, batch: SampleBatch) -> tuple[list[np.ndarray], dict[str, float]]:
        """Gradients of the loss on ``batch`` (accumulated over ``microbatch_size`` rows at
        a time; the loss is a sum, so this equals the full-batch gradient), clipped to
        ``grad_clip``, as numpy arrays in parameter order."""
        tensors = self._to_tensors(batch)
        n = batch.count
        step = int(self.config.get("microbatch_size") or n)
        self.optimizer.zero_grad()
        totals: dict[str, float] = {}
        self.model.train()
        try:
            for start in range(0, n, step):
                loss, stats = self.model_loss({key: value[start : start + step] for key, value in tensors.items()})
                loss.backward()
                for key, value in stats.items():
                    totals[key] = totals.get(key, 0.0) + float(value.detach()) * (1.0 if key != "entropy" else
                                                                                 min(step, n - start) / n)
        finally:
            self.model.eval()  # also after an error: acting must not stay in train mode
        grad_clip = self.config.get("grad_clip")
        if grad_clip is not None:
            totals["grad_gnorm"] = float(clip_grad_norm(self.optimizer.params, grad_clip))
        grads = [p.grad.detach().cpu().numpy().copy() for p in self.optimizer.params]
        return grads, totals

    def apply_gradients(self, grads: list[np.ndarray]) -> None:
        """One optimizer step with the given gradients (from :meth:`compute_gradients`)."""
        for param, grad in zip(self.optimizer.params, grads):
            param.grad = torch.from_numpy(np.array(grad, dtype=np.float32)).to(self.device)
        self.optimizer.step()

    def learn_on_batch(self, batch: SampleBatch) -> dict[str, float]:
        """One gradient step on the whole batch (A2C)."""
        if self.calls_learn_hook:
            self.run_learn_on_batch_callback(batch)
        grads, stats = self.compute_gradients(batch)
        self.apply_gradients(grads)
        stats["cur_lr"] = self.optimizer.lr
        stats["entropy_coeff"] = self.entropy_coeff
        return stats
