"""MARWIL's (and BC's) loss in TensorFlow; see :mod:`marwil_torch_policy`."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from rlstack.models.tf.framework import tf
from rlstack.policies.tf_policy import TFPolicy
from rlstack.sample_batch import SampleBatch
from rlstack.trainers.marwil.marwil_policy import postprocess_returns
from rlstack.utils.tf_utils import explained_variance


class MARWILTFPolicy(TFPolicy):
    """MARWIL in TensorFlow; the loss equals :class:`MARWILTorchPolicy`'s to float32 rounding."""

    loss_columns = (SampleBatch.OBS, SampleBatch.ACTIONS, SampleBatch.VALUE_TARGETS)

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict, num_gpus: float = 0,
                 sampling_seed: int | None = None) -> None:
        super().__init__(observation_space, action_space, config, num_gpus, sampling_seed)
        # A variable, updated inside the compiled step.
        self.ma_adv_norm = tf.Variable(float(config["moving_average_sqd_adv_norm_start"]), trainable=False,
                                       dtype=tf.float32)

    def postprocess_trajectory(self, batch: SampleBatch) -> SampleBatch:
        return postprocess_returns(batch, self.config)

    def loss(self, train_batch: dict[str, tf.Tensor]) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
        cfg = self.config
        batch, mean = self.unroll(train_batch)
        dist_inputs, values = self.model_outputs(batch)
        dist = self.action_distribution(dist_inputs)
        logp = dist.logp(batch[SampleBatch.ACTIONS])
        returns = batch[SampleBatch.VALUE_TARGETS]
        stats: dict[str, tf.Tensor] = {}
        if cfg["beta"] != 0.0:
            advantages = returns - values
            rate = cfg["moving_average_sqd_adv_norm_update_rate"]
            norm = self.ma_adv_norm + rate * (mean(tf.square(tf.stop_gradient(advantages))) - self.ma_adv_norm)
            self.ma_adv_norm.assign(norm)
            weights = tf.stop_gradient(tf.exp(cfg["beta"] * advantages / (1e-8 + tf.sqrt(norm))))
            policy_loss = -mean(weights * logp)
            vf_loss = 0.5 * mean(tf.square(advantages))
            total_loss = policy_loss + cfg["vf_coeff"] * vf_loss
            stats.update(vf_loss=vf_loss, vf_explained_var=explained_variance(returns, values),
                         moving_average_sqd_adv_norm=tf.identity(norm))
        else:
            policy_loss = -mean(logp)
            total_loss = policy_loss
        if cfg["bc_logstd_coeff"] > 0.0 and hasattr(dist, "log_std"):
            total_loss = total_loss - cfg["bc_logstd_coeff"] * mean(tf.reduce_sum(dist.log_std, axis=-1))
        stats.update(policy_loss=policy_loss, total_loss=total_loss)
        return total_loss, stats

    def get_state(self) -> dict[str, np.ndarray]:
        state = super().get_state()
        state["moving_average_sqd_adv_norm"] = np.asarray(self.ma_adv_norm.numpy(), dtype=np.float64)
        return state

    def set_state(self, state: dict[str, np.ndarray]) -> None:
        super().set_state(state)
        if "moving_average_sqd_adv_norm" in state:
            self.ma_adv_norm.assign(float(state["moving_average_sqd_adv_norm"]))
