"""DQN's loss in TensorFlow: double Q, dueling, n-step targets, importance weights, Huber;
with ``num_atoms > 1`` the distributional (C51) cross-entropy.

The same loss as :mod:`dqn_torch_policy` (see there for the papers), learned through the
base loop: all the gradient steps of one ``learn_on_batch`` run inside one ``tf.function``.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from rlstack.models.specs import QModelSpec
from rlstack.models.tf.framework import tf
from rlstack.models.tf.model import TFQModel
from rlstack.models.modelv2 import ModelV2
from rlstack.policies.policy import saved_target_weights, target_state
from rlstack.policies.tf_policy import TFPolicy, get_model_weights, set_model_weights
from rlstack.sample_batch import SampleBatch
from rlstack.trainers.dqn.dqn_policy import (Q_TP1_BEST, act_on_q_values, adapt_parameter_noise, check_rainbow_model,
                                            make_exploration, postprocess_q_learning, q_model_kwargs, q_model_spec)


def q_values_of(model: ModelV2, obs: tf.Tensor) -> tf.Tensor:
    """``Q(s, .)`` ``[B, num_actions]`` of a model (every ModelV2 has ``q_values``)."""
    return model.q_values(obs)


def project_distribution(rewards: tf.Tensor, bootstrap: tf.Tensor, probs: tf.Tensor, support: np.ndarray) -> tf.Tensor:
    """The categorical projection of C51, as ``dqn_torch_policy.project_distribution``:
    ``Tz_j = r + bootstrap * z_j`` clipped to ``[v_min, v_max]``, its mass ``probs[:, j]``
    split between the support points around it (all to ``z_i`` when it lands on ``z_i``).

    Returns:
        The target distribution ``m [B, N]`` on ``support``.
    """
    num_atoms = len(support)
    v_min, v_max = float(support[0]), float(support[-1])
    delta_z = (v_max - v_min) / (num_atoms - 1)
    tz = tf.clip_by_value(rewards[:, None] + bootstrap[:, None] * support[None, :], v_min, v_max)
    b = (tz - v_min) / delta_z
    lower, upper = tf.floor(b), tf.math.ceil(b)
    mass_lower = probs * (upper - b + tf.cast(tf.equal(lower, upper), tf.float32))
    mass_upper = probs * (b - lower)
    # Rounding can put b a hair above N - 1 (ceil N): clip the index, the mass is right.
    lower_index = tf.clip_by_value(tf.cast(lower, tf.int32), 0, num_atoms - 1)
    upper_index = tf.clip_by_value(tf.cast(upper, tf.int32), 0, num_atoms - 1)
    # m_i = sum_j mass_j [index_j == i]
    return tf.reduce_sum(mass_lower[:, :, None] * tf.one_hot(lower_index, num_atoms)
                         + mass_upper[:, :, None] * tf.one_hot(upper_index, num_atoms), axis=1)


class DQNTFPolicy(TFPolicy):
    """DQN in TensorFlow; the loss equals :class:`DQNTorchPolicy`'s to float32 rounding.

    ``learn_on_batch`` takes one Adam step per ``train_batch_size`` rows, in order, and
    returns ``td_error`` (one per row) for the replay priorities.
    """

    model_class = TFQModel
    shuffle_minibatches = False
    per_row_stats = ("td_error",)
    needs_next_obs = True
    needs_bootstrap_value = False
    loss_columns = (SampleBatch.OBS, SampleBatch.ACTIONS, SampleBatch.REWARDS, SampleBatch.NEXT_OBS,
                    SampleBatch.TERMINATEDS, SampleBatch.DISCOUNTS, SampleBatch.WEIGHTS)

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict, num_gpus: float = 0,
                 sampling_seed: int | None = None) -> None:
        super().__init__(observation_space, action_space, config, num_gpus, sampling_seed)
        check_rainbow_model(self)
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
        # Noisy networks act greedily with their mean weights (no noise drawn).
        self._greedy_q_fn = (self.graph_function(lambda obs: self.model.q_values(obs, noise=False), [obs_spec])
                             if config["noisy"] else self._q_fn)
        # ParameterNoise's perturbed acting copy and its graph (made on first use).
        self.perturbed_model: ModelV2 | None = None
        self._perturbed_q_fn = None

    def model_spec(self) -> QModelSpec:
        return q_model_spec(self)

    def custom_model_kwargs(self, model_class: type) -> dict:
        # 1.13's Q-model base (a custom model's forward gives an embedding; the base
        # adds the Q-head) takes the DQN config's head keys.
        from rlstack.trainers.dqn.distributional_q_tf_model import DistributionalQTFModel

        return q_model_kwargs(self.config) if issubclass(model_class, DistributionalQTFModel) else {}

    def bind_worker(self, worker_index: int, num_workers: int) -> None:
        super().bind_worker(worker_index, num_workers)
        self.exploration = make_exploration(self)

    # ----- acting -----------------------------------------------------------------

    def first_model_call(self, model: ModelV2, obs: tf.Tensor) -> None:
        q_values_of(model, obs)

    def q_values(self, obs_batch: np.ndarray, noise: bool = True) -> np.ndarray:
        """``Q(s, .)`` as ``float32 [B, num_actions]`` (``noise``: draw noisy layers' noise)."""
        with tf.device(self.device):
            q_fn = self._q_fn if noise else self._greedy_q_fn
            return q_fn(tf.convert_to_tensor(obs_batch, dtype=tf.float32)).numpy()

    def load_perturbed_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Loads ParameterNoise's perturbed weights into the acting copy of the network."""
        with tf.device(self.device):
            if self.perturbed_model is None:
                if self.builtin_model:
                    self.perturbed_model = TFQModel(self.model.spec)
                else:
                    self.perturbed_model = self.make_custom_model()
                    self._find_variables(self.perturbed_model)
                obs_spec = tf.TensorSpec([None, self.preprocessor.size], tf.float32)
                self._perturbed_q_fn = self.graph_function(lambda obs: q_values_of(self.perturbed_model, obs),
                                                           [obs_spec])
            if self.builtin_model:
                self.perturbed_model.set_canonical_weights(weights)
            else:
                set_model_weights(self.perturbed_model, weights)

    def perturbed_q_values(self, obs_batch: np.ndarray) -> np.ndarray:
        """``Q(s, .)`` of the perturbed copy, ``float32 [B, num_actions]``."""
        with tf.device(self.device):
            return self._perturbed_q_fn(tf.convert_to_tensor(obs_batch, dtype=tf.float32)).numpy()

    def compute_actions(self, obs_batch: np.ndarray, explore: bool | None = None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        return act_on_q_values(self, obs_batch, explore)

    def compute_values(self, obs_batch: np.ndarray) -> np.ndarray:
        return self.q_values(obs_batch).max(axis=1)

    def q_logits(self, obs_batch: np.ndarray) -> np.ndarray:
        """The built-in heads' outputs ``[B, num_actions, num_atoms]`` (noise drawn)."""
        with tf.device(self.device):
            return self.model.q_logits(tf.convert_to_tensor(obs_batch, dtype=tf.float32)).numpy()

    def postprocess_trajectory(self, batch: SampleBatch) -> SampleBatch:
        adapt_parameter_noise(self, batch)
        return postprocess_q_learning(batch, self.config, self.q_values, self.q_logits)

    # ----- learning ---------------------------------------------------------------

    def minibatch_plan(self, n: int) -> tuple[int, int]:
        if self._plan_override is not None:  # an execution plan's TrainOneStep arguments
            return super().minibatch_plan(n)
        # k * train_batch_size replayed rows for k gradient steps (training_intensity):
        # one Adam step per train_batch_size rows, in order.
        return min(int(self.config["train_batch_size"]), n), 1

    def prepare_batch(self, tensors: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        # The target network stays fixed within learn_on_batch: without double Q (which
        # needs each step's online network) one forward pass gives every step's targets.
        if not self.config["double_q"] and self.config["num_atoms"] == 1:
            tensors = {**tensors, Q_TP1_BEST: self._q_tp1_best(tensors[SampleBatch.NEXT_OBS])}
        return tensors

    def _q_tp1_best(self, next_obs: tf.Tensor) -> tf.Tensor:
        """``Q'(s', a*)``: the target network's value of the best next action."""
        q_tp1_target = tf.stop_gradient(q_values_of(self.target_model, next_obs))
        if self.config["double_q"]:
            # Double Q: the online network picks a*, the target network rates it.
            best_actions = tf.argmax(tf.stop_gradient(q_values_of(self.model, next_obs)), axis=1)
        else:
            best_actions = tf.argmax(q_tp1_target, axis=1)
        return tf.gather(q_tp1_target, best_actions, batch_dims=1)

    def _probs_tp1_best(self, next_obs: tf.Tensor) -> tf.Tensor:
        """``p'(s', a*)`` ``[B, N]``: the target network's distribution at the best next action."""
        logits_tp1_target = tf.stop_gradient(self.target_model.q_logits(next_obs))
        if self.config["double_q"]:
            # Double Q: the online network picks a*, the target network's distribution rates it.
            best_actions = tf.argmax(tf.stop_gradient(self.model.q_values(next_obs)), axis=1)
        else:
            q_tp1_target = tf.reduce_sum(tf.nn.softmax(logits_tp1_target, axis=2) * self.model.spec.support, axis=2)
            best_actions = tf.argmax(q_tp1_target, axis=1)
        return tf.nn.softmax(tf.gather(logits_tp1_target, best_actions, batch_dims=1), axis=1)

    def distributional_loss(self, train_batch: dict[str, tf.Tensor]) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
        """C51: the importance-weighted cross-entropy between the projected target
        distribution and ``p(s, a)``; the per-row cross-entropy is the TD error (as 1.13)."""
        support = self.model.spec.support
        logits_t = self.model.q_logits(train_batch[SampleBatch.OBS])
        actions = tf.cast(train_batch[SampleBatch.ACTIONS], tf.int64)
        logits_t_selected = tf.gather(logits_t, actions, batch_dims=1)
        not_done = 1.0 - tf.cast(train_batch[SampleBatch.TERMINATEDS], tf.float32)
        # m = Phi(R^(n) + gamma^k (1 - terminated) z) under p'(s_{t+k}, a*)
        target = tf.stop_gradient(project_distribution(
            train_batch[SampleBatch.REWARDS], train_batch[SampleBatch.DISCOUNTS] * not_done,
            self._probs_tp1_best(train_batch[SampleBatch.NEXT_OBS]), support))
        cross_entropy = -tf.reduce_sum(target * tf.nn.log_softmax(logits_t_selected, axis=1), axis=1)
        loss = tf.reduce_mean(train_batch[SampleBatch.WEIGHTS] * cross_entropy)
        q_t_selected = tf.reduce_sum(tf.nn.softmax(logits_t_selected, axis=1) * support, axis=1)
        return loss, {"loss": loss, "mean_q": tf.reduce_mean(q_t_selected), "min_q": tf.reduce_min(q_t_selected),
                      "max_q": tf.reduce_max(q_t_selected), "mean_td_error": tf.reduce_mean(cross_entropy),
                      "td_error": cross_entropy}

    def loss(self, train_batch: dict[str, tf.Tensor]) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
        if self.config["num_atoms"] > 1:
            return self.distributional_loss(train_batch)
        q_t = q_values_of(self.model, train_batch[SampleBatch.OBS])
        actions = tf.cast(train_batch[SampleBatch.ACTIONS], tf.int64)
        q_t_selected = tf.gather(q_t, actions, batch_dims=1)
        q_tp1_best = train_batch.get(Q_TP1_BEST)  # from prepare_batch, when it could
        if q_tp1_best is None:
            q_tp1_best = self._q_tp1_best(train_batch[SampleBatch.NEXT_OBS])
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
        state.update(target_state(target))
        return state

    def set_state(self, state: dict[str, np.ndarray]) -> None:
        super().set_state(state)
        target = saved_target_weights(state)
        if not target:
            self.update_target()
        elif self.builtin_model:
            self.target_model.set_canonical_weights(target)
        else:
            set_model_weights(self.target_model, target)
