"""PPO's clipped-surrogate loss with adaptive KL penalty, in torch (Schulman et al. 2017)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch

from rlstack.models.torch import closed_form
from rlstack.policies.postprocessing import adapt_kl_coeff, postprocess_advantages
from rlstack.policies.torch_policy import GradFn, TorchPolicy
from rlstack.sample_batch import SampleBatch


class PPOTorchPolicy(TorchPolicy):
    """PPO in torch; the loss equals :class:`PPOTFPolicy`'s to float32 rounding."""

    schedules_entropy_coeff = True
    # use_lstm and custom recurrent models: the loss reads padded sequences (unroll).
    supports_recurrent_models = True
    # Built-in dense models with Discrete or Box actions learn through the closed-form
    # gradient of this loss (models/torch/closed_form.py: the same numbers, a faster
    # training step); False: autograd of loss() always.
    use_closed_form = True

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
        self.kl_coeff = float(config["kl_coeff"])
        # The closed form's view of the model, built at its first learn_on_batch.
        self.dense_graph: closed_form.DenseGraph | None = None

    def postprocess_trajectory(self, batch: SampleBatch) -> SampleBatch:
        return postprocess_advantages(batch, self.config)

    def loss(self, train_batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        cfg = self.config
        # One row per step; `mean` is over real steps only (padded sequences of a recurrent model).
        batch, mean = self.unroll(train_batch)
        dist_inputs, values = self.model_outputs(batch)
        curr_dist = self.action_dist(dist_inputs)
        prev_dist = self.action_dist(batch[SampleBatch.ACTION_DIST_INPUTS])

        # ratio = pi_new(a|s) / pi_old(a|s)
        ratio = torch.exp(curr_dist.logp(batch[SampleBatch.ACTIONS]) - batch[SampleBatch.ACTION_LOGP])
        advantages = batch[SampleBatch.ADVANTAGES]
        pg_loss1 = advantages * ratio
        pg_loss2 = advantages * torch.clamp(ratio, 1.0 - cfg["clip_param"], 1.0 + cfg["clip_param"])
        surrogate = mean(torch.min(pg_loss1, pg_loss2))

        # KL(pi_old || pi_new), penalised with the adaptive kl_coeff.
        mean_kl = mean(prev_dist.kl(curr_dist))
        entropy = mean(curr_dist.entropy())

        if cfg["use_critic"]:
            # vf_clip_param clips the squared value error (the loss), not the value.
            vf_loss = mean(torch.clamp((values - batch[SampleBatch.VALUE_TARGETS]) ** 2, 0.0, cfg["vf_clip_param"]))
        else:
            vf_loss = torch.zeros((), device=values.device)

        total_loss = -surrogate + self.kl_coeff * mean_kl + cfg["vf_loss_coeff"] * vf_loss - self.entropy_coeff * entropy
        stats = {
            "total_loss": total_loss,
            "policy_loss": -surrogate,
            "vf_loss": vf_loss,
            "kl": mean_kl,
            "entropy": entropy,
        }
        return total_loss, stats

    def make_grad_fn(self, tensors: dict[str, torch.Tensor]) -> GradFn:
        if self.use_closed_form and closed_form.supports(self):
            return closed_form.ppo_grad_fn(self, tensors)
        return super().make_grad_fn(tensors)

    def after_learn(self, stats: dict[str, float]) -> dict[str, float]:
        self.kl_coeff = adapt_kl_coeff(self.kl_coeff, stats["kl"], self.config["kl_target"])
        return {"kl_coeff": self.kl_coeff, "entropy_coeff": self.entropy_coeff}

    def get_state(self) -> dict[str, np.ndarray]:
        state = super().get_state()
        state["kl_coeff"] = np.asarray(self.kl_coeff, dtype=np.float64)
        return state

    def set_state(self, state: dict[str, np.ndarray]) -> None:
        super().set_state(state)
        if "kl_coeff" in state:
            self.kl_coeff = float(state["kl_coeff"])

