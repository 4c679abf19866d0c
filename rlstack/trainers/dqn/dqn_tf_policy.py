"""DQN's loss in TensorFlow: double Q, dueling, n-step targets, importance weights, Huber.

The same loss as :mod:`dqn_torch_policy` (see there for the papers); all the gradient
steps of one ``learn_on_batch`` run inside one ``tf.function``.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from rlstack.models.catalog import QModelSpec
from rlstack.models.tf.framework import tf
from rlstack.models.tf.model import TFQModel
from rlstack.models.modelv2 import ModelV2
from rlstack.policies.tf_policy import (TFPolicy, clip_by_global_norm, get_model_weights, nest_model_stats,
                                        non_finite_as_error, set_model_weights)
from rlstack.sample_batch import SampleBatch
from rlstack.trainers.dqn.q_learning import act_on_q_values, make_exploration, postprocess_q_learning, q_model_spec


def q_values_of(model: ModelV2, obs: tf.Tensor) -> tf.Tensor:
    """``Q(s, .)`` ``[B, num_actions]`` of a model (every ModelV2 has ``q_values``)."""
    return model.q_values(obs)


class DQNTFPolicy(TFPolicy):
    """DQN in TensorFlow; the loss equals :class:`DQNTorchPolicy`'s to float32 rounding."""

    model_class = TFQModel
    needs_next_obs = True
    needs_bootstrap_value = False
    loss_columns = (SampleBatch.OBS, SampleBatch.ACTIONS, SampleBatch.REWARDS, SampleBatch.NEXT_OBS,
                    SampleBatch.TERMINATEDS, SampleBatch.DISCOUNTS, SampleBatch.WEIGHTS)

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict, num_gpus: float = 0,
                 sampling_seed: int | None = None) -> None:
        super().__init__(observation_space, action_space, config, num_gpus, sampling_seed)
        self.exploration = make_exploration(self)
        with tf.device(self.device):
            if self.builtin_model:
                self.target_model = TFQModel(self.model.spec)
                self.target_variables = self.target_model.variables_list
            else:
                self.target_model = self.make_custom_model()
                self.target_variables, _ = self._find_variables(self.target_model)
        self.update_target()
        obs_spec = tf.TensorSpec([None, self.preprocessor.size], tf.float32)
        self._q_fn = self.graph_function(lambda obs: q_values_of(self.model, obs), [obs_spec])
        self._dqn_train_fn = None
        self._dqn_stat_keys: list[str] = []

    def model_spec(self) -> QModelSpec:
        return q_model_spec(self)

    def bind_worker(self, worker_index: int, num_workers: int) -> None:
        super().bind_worker(worker_index, num_workers)
        self.exploration = make_exploration(self)

    # ----- acting -----------------------------------------------------------------

    def first_model_call(self, model: ModelV2, obs: tf.Tensor) -> None:
        q_values_of(model, obs)

    def q_values(self, obs_batch: np.ndarray) -> np.ndarray:
        """``Q(s, .)`` as ``float32 [B, num_actions]``."""
        with tf.device(self.device):
            return self._q_fn(tf.convert_to_tensor(obs_batch, dtype=tf.float32)).numpy()

    def compute_actions(self, obs_batch: np.ndarray, explore: bool | None = None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        return act_on_q_values(self, self.exploration, self.q_values(obs_batch), explore)

    def compute_values(self, obs_batch: np.ndarray) -> np.ndarray:
        return self.q_values(obs_batch).max(axis=1)

    def postprocess_trajectory(self, batch: SampleBatch) -> SampleBatch:
        return postprocess_q_learning(batch, self.config, self.q_values)

    # ----- learning ---------------------------------------------------------------

    def loss(self, train_batch: dict[str, tf.Tensor]) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
        obs, next_obs = train_batch[SampleBatch.OBS], train_batch[SampleBatch.NEXT_OBS]
        q_t = q_values_of(self.model, obs)
        actions = tf.cast(train_batch[SampleBatch.ACTIONS], tf.int64)
        q_t_selected = tf.gather(q_t, actions, batch_dims=1)
        q_tp1_target = tf.stop_gradient(q_values_of(self.target_model, next_obs))
        if self.config["double_q"]:
            # Double Q: the online network picks a*, the target network rates it.
            best_actions = tf.argmax(tf.stop_gradient(q_values_of(self.model, next_obs)), axis=1)
        else:
            best_actions = tf.argmax(q_tp1_target, axis=1)
        q_tp1_best = tf.gather(q_tp1_target, best_actions, batch_dims=1)
        # y = R^(n) + gamma^k * (1 - terminated) * Q'(s_{t+k}, a*)
        not_done = 1.0 - tf.cast(train_batch[SampleBatch.TERMINATEDS], tf.float32)
        target = train_batch[SampleBatch.REWARDS] + train_batch[SampleBatch.DISCOUNTS] * not_done * q_tp1_best
        td_error = q_t_selected - target
        abs_td = tf.abs(td_error)
        huber = tf.where(abs_td < 1.0, 0.5 * tf.square(td_error), abs_td - 0.5)
        loss = tf.reduce_mean(train_batch[SampleBatch.WEIGHTS] * huber)
        stats = {
            "loss": loss,
            "mean_q": tf.reduce_mean(q_t_selected),
            "min_q": tf.reduce_min(q_t_selected),
            "max_q": tf.reduce_max(q_t_selected),
            "mean_td_error": tf.reduce_mean(td_error),
            "td_error": td_error,
        }
        return loss, stats

    def _dqn_train_loop(self, tensors: dict[str, tf.Tensor], starts: tf.Tensor, ends: tf.Tensor):
        num_steps = tf.shape(starts)[0]
        grad_clip = self.config.get("grad_clip")

        def step(i, rows, td_errors):
            minibatch = {key: value[starts[i] : ends[i]] for key, value in tensors.items()}
            with tf.GradientTape() as tape:
                loss, stats = self.loss_with_model(minibatch)
            grads = tape.gradient(loss, self.train_variables)
            if grad_clip is not None:
                grads, stats["grad_gnorm"] = clip_by_global_norm(grads, float(grad_clip))
            self.optimizer.apply(grads, self.train_variables)
            td_errors = td_errors.write(i, stats.pop("td_error"))
            self._dqn_stat_keys = sorted(stats)  # named while tracing, read by learn_on_batch
            rows = rows.write(i, tf.stack([tf.cast(stats[key], tf.float32) for key in self._dqn_stat_keys]))
            return i + 1, rows, td_errors

        start = (tf.constant(0), tf.TensorArray(tf.float32, size=num_steps),
                 tf.TensorArray(tf.float32, size=num_steps, infer_shape=False))
        _, rows, td_errors = tf.while_loop(lambda i, *_: i < num_steps, step, start)
        return rows.stack(), td_errors.concat()

    def learn_on_batch(self, batch: SampleBatch) -> dict[str, float]:
        """One Adam step per ``train_batch_size`` rows of ``batch``, in order (see
        :meth:`DQNTorchPolicy.learn_on_batch`)."""
        if self.calls_learn_hook:
            self.run_learn_on_batch_callback(batch)
        n = batch.count
        step_size = min(int(self.config["train_batch_size"]), n)
        starts = np.arange(0, n, step_size, dtype=np.int64)
        ends = np.minimum(starts + step_size, n)
        with tf.device(self.device):
            tensors = {key: tf.convert_to_tensor(batch[key]) for key in self.loss_columns}
            if self._dqn_train_fn is None:
                index_spec = tf.TensorSpec([None], tf.int64)
                signature = ({key: tf.TensorSpec([None, *value.shape[1:]], value.dtype)
                              for key, value in tensors.items()}, index_spec, index_spec)
                self._dqn_train_fn = self.graph_function(self._dqn_train_loop, signature)
            with non_finite_as_error(f"{type(self).__name__}.learn_on_batch", self.lr):
                rows, td_error = self._dqn_train_fn(tensors, tf.constant(starts), tf.constant(ends))
        mean_stats = {key: float(value) for key, value in zip(self._dqn_stat_keys, rows.numpy().mean(axis=0))}
        mean_stats["cur_lr"] = float(self.lr.numpy())
        mean_stats["td_error"] = td_error.numpy()
        return nest_model_stats(mean_stats)

    def update_target(self) -> None:
        """Copies the online network's weights into the target network."""
        for target, source in zip(self.target_variables, self.train_variables):
            target.assign(source)

    # ----- state ------------------------------------------------------------------

    def get_state(self) -> dict[str, np.ndarray]:
        state = super().get_state()
        if self.builtin_model:
            target = self.target_model.get_canonical_weights()
        else:
            target = get_model_weights(self.target_model)
        state.update({f"target/{name}": value for name, value in target.items()})
        return state

    def set_state(self, state: dict[str, np.ndarray]) -> None:
        super().set_state(state)
        target = {key[len("target/"):]: value for key, value in state.items() if key.startswith("target/")}
        if not target:
            self.update_target()
        elif self.builtin_model:
            self.target_model.set_canonical_weights(target)
        else:
            set_model_weights(self.target_model, target)
