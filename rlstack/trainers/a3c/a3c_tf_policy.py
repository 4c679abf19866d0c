"""The advantage actor-critic loss of A2C and A3C in TensorFlow (Mnih et al. 2016);
see :mod:`a3c_torch_policy`."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from rlstack.models.tf.framework import tf
from rlstack.policies.postprocessing import postprocess_advantages
from rlstack.policies.tf_policy import TFPolicy, clip_by_global_norm, nest_model_stats, non_finite_as_error
from rlstack.sample_batch import SampleBatch


class A3CTFPolicy(TFPolicy):
    """A2C/A3C in TensorFlow; the loss equals :class:`A3CTorchPolicy`'s to float32 rounding."""

    schedules_entropy_coeff = True

    loss_columns = (SampleBatch.OBS, SampleBatch.ACTIONS, SampleBatch.ADVANTAGES, SampleBatch.VALUE_TARGETS)

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict, num_gpus: float = 0,
                 sampling_seed: int | None = None) -> None:
        super().__init__(observation_space, action_space, config, num_gpus, sampling_seed)
        self._grad_fn = None
        self._apply_fn = self.graph_function(self._apply)

    def postprocess_trajectory(self, batch: SampleBatch) -> SampleBatch:
        return postprocess_advantages(batch, self.config)

    def loss(self, train_batch: dict[str, tf.Tensor]) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
        dist_inputs, values = self.model.policy_and_value(train_batch[SampleBatch.OBS])
        dist = self.action_distribution(dist_inputs)
        logp = dist.logp(train_batch[SampleBatch.ACTIONS])
        # Sums over the batch, as in the paper's implementation and classic RLlib.
        pi_err = -tf.reduce_sum(logp * train_batch[SampleBatch.ADVANTAGES])
        value_err = 0.5 * tf.reduce_sum(tf.square(values - train_batch[SampleBatch.VALUE_TARGETS]))
        entropy = tf.reduce_sum(dist.entropy())
        total_loss = pi_err + self.config["vf_loss_coeff"] * value_err - self.entropy_coeff * entropy
        count = tf.maximum(1.0, tf.cast(tf.shape(logp)[0], tf.float32))
        return total_loss, {"total_loss": total_loss, "policy_loss": pi_err, "vf_loss": value_err,
                            "entropy": entropy / count}

    def _gradients(self, tensors: dict[str, tf.Tensor]) -> tuple[list[tf.Tensor], dict[str, tf.Tensor]]:
        with tf.GradientTape() as tape:
            loss, stats = self.loss_with_model(tensors)
        return tape.gradient(loss, self.train_variables), stats

    def _apply(self, grads: list[tf.Tensor]) -> None:
        self.optimizer.apply(grads, self.train_variables)

    def compute_gradients(self, batch: SampleBatch) -> tuple[list[np.ndarray], dict[str, float]]:
        """Gradients of the loss on ``batch`` (accumulated over ``microbatch_size`` rows at
        a time), clipped to ``grad_clip``, as numpy arrays in variable order."""
        n = batch.count
        step = int(self.config.get("microbatch_size") or n)
        with tf.device(self.device):
            tensors = {key: tf.convert_to_tensor(batch[key]) for key in self.loss_columns}
            if self._grad_fn is None:
                signature = ({key: tf.TensorSpec([None, *value.shape[1:]], value.dtype)
                              for key, value in tensors.items()},)
                self._grad_fn = self.graph_function(self._gradients, signature)
            total_grads = None
            totals: dict[str, float] = {}
            for start in range(0, n, step):
                grads, stats = self._grad_fn({key: value[start : start + step] for key, value in tensors.items()})
                total_grads = grads if total_grads is None else [a + b for a, b in zip(total_grads, grads)]
                for key, value in stats.items():
                    # Sums over the batch add up; means (entropy, model metrics) are weighted.
                    mean = key == "entropy" or key.startswith("model/")
                    weight = min(step, n - start) / n if mean else 1.0
                    totals[key] = totals.get(key, 0.0) + float(value) * weight
            grad_clip = self.config.get("grad_clip")
            if grad_clip is not None:
                total_grads, norm = clip_by_global_norm(total_grads, float(grad_clip))
                totals["grad_gnorm"] = float(norm)
        return [g.numpy() for g in total_grads], nest_model_stats(totals)

    def apply_gradients(self, grads: list[np.ndarray]) -> None:
        """One optimizer step with the given gradients (from :meth:`compute_gradients`)."""
        with tf.device(self.device), non_finite_as_error(f"{type(self).__name__}.apply_gradients", self.lr):
            self._apply_fn([tf.convert_to_tensor(g, dtype=tf.float32) for g in grads])

    def learn_on_batch(self, batch: SampleBatch) -> dict[str, float]:
        """One gradient step on the whole batch (A2C)."""
        if self.calls_learn_hook:
            self.run_learn_on_batch_callback(batch)
        grads, stats = self.compute_gradients(batch)
        self.apply_gradients(grads)
        stats["cur_lr"] = float(self.lr.numpy())
        stats["entropy_coeff"] = float(self.entropy_coeff.numpy())
        return stats
