"""DDPG's and TD3's losses in TensorFlow: the same loss as :mod:`ddpg_torch_policy` (see
there for the papers), inside the compiled learner loop of :class:`TFPolicy`.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from rlstack.models.modelv2 import model_obs_space
from rlstack.models.tf.blocks import TFActorCritic
from rlstack.models.tf.framework import tf
from rlstack.policies.policy import PolicyState, saved_target_weights, target_state
from rlstack.policies.tf_policy import Adam
from rlstack.policies.tf_policy import TFPolicy
from rlstack.sample_batch import SampleBatch
from rlstack.trainers.ddpg.ddpg_policy import DDPGLearningPolicyMixin, make_exploration
from rlstack.utils.schedules import make_schedule

B = SampleBatch


def l2_loss(variables: list[tf.Variable]) -> tf.Tensor:
    """``sum(w^2) / 2`` over ``variables`` (``tf.nn.l2_loss``, as 1.13)."""
    return tf.add_n([tf.nn.l2_loss(v) for v in variables])


def huber(x: tf.Tensor, delta: float) -> tf.Tensor:
    """``0.5 x^2`` for ``|x| < delta``, ``delta (|x| - delta / 2)`` beyond (torch's huber_loss)."""
    abs_x = tf.abs(x)
    return tf.where(abs_x < delta, 0.5 * tf.square(x), delta * (abs_x - 0.5 * delta))


class DDPGTFPolicy(DDPGLearningPolicyMixin, TFPolicy):
    """DDPG / TD3 in TensorFlow; the loss equals :class:`DDPGTorchPolicy`'s to float32
    rounding. Two optimizers, in this order: the actor's (``actor_lr``, stepping every
    ``policy_delay``-th gradient step) and the critics' (``critic_lr``)."""

    model_class = TFActorCritic

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict, num_gpus: float = 0,
                 sampling_seed: int | None = None) -> None:
        super().__init__(observation_space, action_space, config, num_gpus, sampling_seed)
        # The base's lr / lr_schedule move optimizer 0: the actor's, at actor_lr.
        self.lr_schedule = make_schedule(config["actor_lr"], None, "actor_lr")
        self.exploration = make_exploration(self)
        seed = config.get("seed")
        with tf.device(self.device):
            self.lr.assign(config["actor_lr"])
            self.critic_lr = tf.Variable(float(config["critic_lr"]), trainable=False, dtype=tf.float32,
                                         name="critic_lr")
            # The target actor and critics, following by polyak averaging.
            self.target_model = TFActorCritic(self.model.spec, model_obs_space(observation_space), action_space)
            # Target policy smoothing's noise, drawn apart from acting.
            self.target_noise_rng = (tf.random.Generator.from_non_deterministic_state() if seed is None
                                     else tf.random.Generator.from_seed(int(seed) + 17))
        obs_spec = tf.TensorSpec([None, self.preprocessor.size], tf.float32)
        action_spec = tf.TensorSpec([None, self.model.spec.action_dim], tf.float32)
        self._actor_fn = self.graph_function(lambda obs: tf.tanh(self.model.actor_outputs(obs)), [obs_spec])
        self._critic_fn = self.graph_function(self.model.critic_values, [obs_spec, action_spec])
        self._polyak_fn = self.graph_function(self._polyak, [tf.TensorSpec([], tf.float32)])
        self.update_target(tau=1.0)

    def make_optimizers(self) -> list[Adam]:
        eps = self.config["adam_epsilon"]
        return [Adam(self.model.actor_variables, self.lr, eps=eps),
                Adam(self.model.critic_variables, self.critic_lr, eps=eps)]

    def optimizer_step_mask(self, step: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        # TD3's delayed policy updates: the actor steps on gradient steps 0, k, 2k, ...
        delay = tf.cast(int(self.config["policy_delay"]), step.dtype)
        return tf.equal(tf.math.floormod(step, delay), 0), tf.constant(True)

    # ----- acting -----------------------------------------------------------------

    def actor_actions(self, obs_batch: np.ndarray) -> np.ndarray:
        """The actor's actions ``mu(s) = tanh(actor(s))``, ``float32 [B, A]`` in [-1, 1]."""
        with tf.device(self.device):
            return self._actor_fn(tf.convert_to_tensor(obs_batch, dtype=tf.float32)).numpy()

    def critic_values(self, obs_batch: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """Every critic's ``Q(s, a)``, ``float32 [C, B]``."""
        with tf.device(self.device):
            return self._critic_fn(tf.convert_to_tensor(obs_batch, dtype=tf.float32),
                                   tf.convert_to_tensor(actions, dtype=tf.float32)).numpy()

    # ----- learning ---------------------------------------------------------------

    def draw_target_noise(self, actions: tf.Tensor) -> tf.Tensor:
        """A standard-normal draw of ``actions``' shape from the policy's own generator
        (tests replace it with a fixed draw)."""
        return self.target_noise_rng.normal(tf.shape(actions))

    def target_policy_noise(self, actions: tf.Tensor) -> tf.Tensor:
        """TD3's smoothing noise for the target actor's ``actions``:
        ``clip(N(0, target_noise^2), -target_noise_clip, target_noise_clip)``."""
        clip = float(self.config["target_noise_clip"])
        return tf.clip_by_value(self.draw_target_noise(actions) * float(self.config["target_noise"]), -clip, clip)

    def loss(self, train_batch: dict[str, tf.Tensor]) -> tuple[tuple[tf.Tensor, tf.Tensor], dict[str, tf.Tensor]]:
        """``((actor_loss, critic_loss), stats)``, one loss per optimizer, in their order."""
        cfg = self.config
        obs, actions = train_batch[B.OBS], tf.cast(train_batch[B.ACTIONS], tf.float32)
        # Actor: maximise Q(s, mu(s)) of the first critic (the deterministic policy gradient).
        policy_t = tf.tanh(self.model.actor_outputs(obs))
        actor_loss = -tf.reduce_mean(self.model.critic_values(obs, policy_t)[0])

        # Critics: regress Q_j(s, a) on y = R^(n) + gamma^n * (1 - terminated) * Q'(s', a').
        q_t = self.model.critic_values(obs, actions)  # [C, B]
        next_obs = train_batch[B.NEXT_OBS]
        policy_tp1 = tf.tanh(self.target_model.actor_outputs(next_obs))
        if cfg["smooth_target_policy"]:
            # a' = clip(mu'(s') + clip(eps, -c, c), -1, 1): a smoother target.
            policy_tp1 = tf.clip_by_value(policy_tp1 + self.target_policy_noise(policy_tp1), -1.0, 1.0)
        q_tp1 = self.target_model.critic_values(next_obs, policy_tp1)
        # Clipped double Q: the smaller of the twin targets.
        q_tp1_best = tf.reduce_min(q_tp1, axis=0) if cfg["twin_q"] else q_tp1[0]
        not_done = 1.0 - tf.cast(train_batch[B.TERMINATEDS], tf.float32)
        target = tf.stop_gradient(train_batch[B.REWARDS] + train_batch[B.DISCOUNTS] * not_done * q_tp1_best)
        td = q_t - target  # [C, B]
        errors = huber(td, float(cfg["huber_threshold"])) if cfg["use_huber"] else 0.5 * tf.square(td)
        # Importance weights of prioritized replay; each critic's error counts once.
        critic_loss = tf.reduce_mean(train_batch[B.WEIGHTS] * tf.reduce_sum(errors, axis=0))
        l2_reg = cfg["l2_reg"]
        if l2_reg:
            actor_loss += l2_reg * l2_loss([v for name, v in self.model.actor_vars.items() if name.endswith("kernel")])
            critic_loss += l2_reg * l2_loss([v for name, v in self.model.critics.raw_variables().items()
                                             if name.endswith("kernel")])
        td_error = tf.reduce_sum(td, axis=0)
        stats = {
            "actor_loss": actor_loss,
            "critic_loss": critic_loss,
            "mean_q": tf.reduce_mean(q_t[0]),
            "max_q": tf.reduce_max(q_t[0]),
            "min_q": tf.reduce_min(q_t[0]),
            "mean_td_error": tf.reduce_mean(td_error),
            # 1.13's priorities: the critics' TD errors summed.
            "td_error": td_error,
        }
        return (actor_loss, critic_loss), stats

    def _polyak(self, tau: tf.Tensor) -> tf.Tensor:
        for target, online in zip(self.target_model.variables_list, self.model.variables_list):
            target.assign(target + tau * (online - target))
        return tau

    def update_target(self, tau: float | None = None) -> None:
        """Polyak averaging of the target actor and critics: ``target <- tau * online +
        (1 - tau) * target`` (``tau`` from the config; 1.0 copies)."""
        tau = float(self.config["tau"] if tau is None else tau)
        with tf.device(self.device):
            if tau == 1.0:
                for target, online in zip(self.target_model.variables_list, self.model.variables_list):
                    target.assign(online)
            else:
                self._polyak_fn(tf.constant(tau, tf.float32))

    # ----- state ------------------------------------------------------------------

    def acting_weights(self) -> dict[str, np.ndarray]:
        """The actor's weights, all the numpy acting copy reads, or every weight where the
        copy also computes replay priorities from the critics (``worker_side_prioritization``)."""
        if self.config.get("worker_side_prioritization"):
            return self.get_weights()
        return self.model.get_actor_weights()

    def get_state(self) -> PolicyState:
        state = super().get_state()
        state.update(target_state(self.target_model.get_canonical_weights()))
        state["target_noise_rng"] = self.target_noise_rng.state.numpy()
        return state

    def set_state(self, state: PolicyState) -> None:
        super().set_state(state)
        target = saved_target_weights(state)
        if target:
            self.target_model.set_canonical_weights(target)
        else:
            self.update_target(tau=1.0)
        if "target_noise_rng" in state:
            self.target_noise_rng.state.assign(state["target_noise_rng"])
