"""PPO's clipped-surrogate loss with adaptive KL penalty, in TensorFlow (Schulman et al. 2017)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from rlstack.models.tf.framework import tf
from rlstack.policies.postprocessing import adapt_kl_coeff, postprocess_advantages
from rlstack.policies.tf_policy import TFPolicy
from rlstack.sample_batch import SampleBatch


class PPOTFPolicy(TFPolicy):
    """PPO in TensorFlow; the loss equals :class:`PPOTorchPolicy`'s to float32 rounding."""

    schedules_entropy_coeff = True
    # use_lstm and custom recurrent models: the loss reads padded sequences (unroll).
    supports_recurrent_models = True

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

