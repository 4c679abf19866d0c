"""MARWIL's (and BC's) loss in torch (Wang et al. 2018)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch

from rlstack.policies.torch_policy import TorchPolicy
from rlstack.sample_batch import SampleBatch
from rlstack.trainers.marwil.marwil_policy import postprocess_returns
from rlstack.utils.torch_utils import explained_variance


class MARWILTorchPolicy(TorchPolicy):
    """MARWIL in torch; the loss equals :class:`MARWILTFPolicy`'s to float32 rounding.

    ``beta > 0``: ``-mean(exp(beta * A / sqrt(m)) * log pi(a|s)) + vf_coeff * 0.5 *
    mean(A^2)`` with ``A = R - V(s)`` (``R`` the recorded return) and ``m`` the moving
    average of ``A^2``, updated each step before it is used. ``beta = 0`` (BC):
    ``-mean(log pi(a|s))`` and no value loss.
    """

    loss_columns = (SampleBatch.OBS, SampleBatch.ACTIONS, SampleBatch.VALUE_TARGETS)

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict, num_gpus: float = 0,
                 sampling_seed: int | None = None) -> None:
        super().__init__(observation_space, action_space, config, num_gpus, sampling_seed)
        self.ma_adv_norm = torch.tensor(float(config["moving_average_sqd_adv_norm_start"]), device=self.device)

    def postprocess_trajectory(self, batch: SampleBatch) -> SampleBatch:
        return postprocess_returns(batch, self.config)

    def loss(self, train_batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        cfg = self.config
        batch, mean = self.unroll(train_batch)
        dist_inputs, values = self.model_outputs(batch)
        dist = self.action_dist(dist_inputs)
        logp = dist.logp(batch[SampleBatch.ACTIONS])
        returns = batch[SampleBatch.VALUE_TARGETS]
        stats: dict[str, torch.Tensor] = {}
        if cfg["beta"] != 0.0:
            advantages = returns - values
            with torch.no_grad():
                rate = cfg["moving_average_sqd_adv_norm_update_rate"]
                self.ma_adv_norm += rate * (mean(advantages.detach() ** 2) - self.ma_adv_norm)
                weights = torch.exp(cfg["beta"] * advantages / (1e-8 + self.ma_adv_norm.sqrt()))
            policy_loss = -mean(weights * logp)
            vf_loss = 0.5 * mean(advantages**2)
            total_loss = policy_loss + cfg["vf_coeff"] * vf_loss
            stats.update(vf_loss=vf_loss, vf_explained_var=explained_variance(returns, values),
                         moving_average_sqd_adv_norm=self.ma_adv_norm.clone())
        else:
            policy_loss = -mean(logp)
            total_loss = policy_loss
        if cfg["bc_logstd_coeff"] > 0.0 and hasattr(dist, "log_std"):
            total_loss = total_loss - cfg["bc_logstd_coeff"] * mean(dist.log_std.sum(-1))
        stats.update(policy_loss=policy_loss, total_loss=total_loss)
        return total_loss, stats

    def get_state(self) -> dict[str, np.ndarray]:
        state = super().get_state()
        state["moving_average_sqd_adv_norm"] = np.asarray(float(self.ma_adv_norm), dtype=np.float64)
        return state

    def set_state(self, state: dict[str, np.ndarray]) -> None:
        super().set_state(state)
        if "moving_average_sqd_adv_norm" in state:
            self.ma_adv_norm.fill_(float(state["moving_average_sqd_adv_norm"]))
