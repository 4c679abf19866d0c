"""APPO's loss in TensorFlow: PPO's clipped surrogate on IMPALA's fragments, against a
target network with V-trace (1.13's APPO; Luo et al. 2020, "IMPACT")."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from rlstack.models.modelv2 import model_obs_space
from rlstack.models.tf.framework import tf
from rlstack.policies.policy import saved_target_weights, target_state
from rlstack.policies.postprocessing import adapt_kl_coeff
from rlstack.policies.tf_policy import get_model_weights, set_model_weights
from rlstack.sample_batch import SampleBatch
from rlstack.trainers.appo.appo import postprocess_appo
from rlstack.trainers.impala.fragments import VALID
from rlstack.trainers.impala.impala_tf_policy import ImpalaTFPolicy, to_time_major
from rlstack.trainers.impala.vtrace_tf import vtrace

# The clip of mu / pi_target in the ratio (see appo_torch_policy.py).
IS_RATIO_MAX = 2.0


class APPOTFPolicy(ImpalaTFPolicy):
    """APPO in TensorFlow; see :class:`APPOTorchPolicy` for the batch layout and the
    target network."""

    supports_recurrent_models = False

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict, num_gpus: float = 0,
                 sampling_seed: int | None = None) -> None:
        super().__init__(observation_space, action_space, config, num_gpus, sampling_seed)
        # A variable, not a Python float, so that adapting it does not retrace the loss.
        self.kl_coeff = tf.Variable(float(config["kl_coeff"]), trainable=False, dtype=tf.float32)
        with tf.device(self.device):
            if self.builtin_model:
                self.target_model = self.model_class(self.model.spec, model_obs_space(observation_space),
                                                     action_space, config.get("model", {}))
                self.target_variables = self.target_model.variables_list
            else:
                self.target_model = self.make_custom_model()
                self.target_variables, _ = self._find_variables(self.target_model)
        self._copy_to_target()
        extra = (SampleBatch.ACTION_DIST_INPUTS,) if config["vtrace"] else (
            SampleBatch.ACTION_DIST_INPUTS, SampleBatch.ADVANTAGES, SampleBatch.VALUE_TARGETS)
        self.loss_columns = (*ImpalaTFPolicy.loss_columns, *extra)

    def postprocess_trajectory(self, batch: SampleBatch) -> SampleBatch:
        return postprocess_appo(batch, self.config)

    def loss(self, train_batch: dict[str, tf.Tensor]
             ) -> tuple[tf.Tensor | tuple[tf.Tensor, tf.Tensor], dict[str, tf.Tensor]]:
        cfg = self.config
        dist_inputs, values = self.model_outputs(train_batch)
        dist = self.action_distribution(dist_inputs)
        behaviour_dist = self.action_distribution(train_batch[SampleBatch.ACTION_DIST_INPUTS])
        actions = train_batch[SampleBatch.ACTIONS]
        logp, behaviour_logp = dist.logp(actions), train_batch[SampleBatch.ACTION_LOGP]
        entropy = dist.entropy()
        valid = train_batch[VALID]
        stats: dict[str, tf.Tensor] = {}

        if cfg["vtrace"]:
            T, gamma = int(cfg["rollout_fragment_length"]), float(cfg["gamma"])
            target_inputs = tf.stop_gradient(self.target_model.policy_and_value(train_batch[SampleBatch.OBS])[0])
            target_dist = self.action_distribution(target_inputs)
            target_logp = target_dist.logp(actions)
            kl = target_dist.kl(dist)  # KL(pi_target || pi)
            logp, behaviour_logp, target_logp, values, entropy, kl, valid = (
                to_time_major(x, T) for x in (logp, behaviour_logp, target_logp, values, entropy, kl, valid))
            terminateds = to_time_major(train_batch[SampleBatch.TERMINATEDS], T)
            truncateds = to_time_major(train_batch[SampleBatch.TRUNCATEDS], T)
            rewards = to_time_major(train_batch[SampleBatch.REWARDS], T)
            # As IMPALA's: gamma_t = 0 at an episode end, a time-limit end adds gamma V(x_final).
            discounts = gamma * tf.cast(tf.logical_not(tf.logical_or(terminateds, truncateds)), tf.float32)
            rewards = rewards + gamma * tf.cast(truncateds, tf.float32) * to_time_major(
                train_batch[SampleBatch.BOOTSTRAP_VALUE], T)
            # V-trace of the target policy over the behaviour policy, steps 0..T-2
            # (vtrace_drop_last_ts) or 0..T-1, bootstrapping from the learner's V(x_{T-1}).
            steps = slice(None, -1) if cfg["vtrace_drop_last_ts"] else slice(None)
            vs, advantages = vtrace(
                (target_logp - behaviour_logp)[steps], discounts[steps], rewards[steps], values[steps], values[-1],
                clip_rho_threshold=cfg["vtrace_clip_rho_threshold"],
                clip_pg_rho_threshold=cfg["vtrace_clip_pg_rho_threshold"],
            )
            logp, behaviour_logp, target_logp, values, entropy, kl, valid = (
                x[steps] for x in (logp, behaviour_logp, target_logp, values, entropy, kl, valid))
            # ratio = pi / pi_target = (mu / pi_target) * (pi / mu), the first factor clipped.
            is_ratio = tf.stop_gradient(tf.clip_by_value(tf.exp(behaviour_logp - target_logp), 0.0, IS_RATIO_MAX))
            ratio = is_ratio * tf.exp(logp - behaviour_logp)
            value_targets = tf.stop_gradient(vs)
        else:
            kl = behaviour_dist.kl(dist)  # KL(mu || pi)
            advantages = train_batch[SampleBatch.ADVANTAGES]
            ratio = tf.exp(logp - behaviour_logp)
            value_targets = train_batch[SampleBatch.VALUE_TARGETS]

        count = tf.maximum(tf.reduce_sum(valid), 1.0)

        def mean(x: tf.Tensor) -> tf.Tensor:  # over real rows (multi-agent padding left out)
            return tf.reduce_sum(x * valid) / count

        pg_loss1 = advantages * ratio
        pg_loss2 = advantages * tf.clip_by_value(ratio, 1.0 - cfg["clip_param"], 1.0 + cfg["clip_param"])
        policy_loss = -mean(tf.minimum(pg_loss1, pg_loss2))
        vf_loss = 0.5 * mean(tf.square(values - value_targets))
        mean_entropy = mean(entropy)
        separate = cfg["_separate_vf_optimizer"]
        # With _separate_vf_optimizer the value loss is a loss of its own (1.13's APPO).
        total_loss = policy_loss - self.entropy_coeff * mean_entropy if separate else (
            policy_loss + cfg["vf_loss_coeff"] * vf_loss - self.entropy_coeff * mean_entropy)
        if cfg["use_kl_loss"]:
            mean_kl = mean(kl)
            total_loss = total_loss + self.kl_coeff * mean_kl
            stats.update(kl=mean_kl, KL_Coeff=tf.identity(self.kl_coeff))
        if cfg["vtrace"]:
            is_mean = mean(is_ratio)
            stats.update(mean_IS=is_mean, var_IS=mean(tf.square(is_ratio - is_mean)))
        error = value_targets - values
        explained = 1.0 - mean(tf.square(error - mean(error))) / tf.maximum(
            mean(tf.square(value_targets - mean(value_targets))), 1e-8)
        stats.update(total_loss=total_loss, policy_loss=policy_loss, vf_loss=vf_loss, entropy=mean_entropy,
                     vf_explained_var=tf.stop_gradient(explained))
        return ((total_loss, vf_loss) if separate else total_loss), stats

    def _copy_to_target(self) -> None:
        for target, source in zip(self.target_variables, self.train_variables):
            target.assign(source)

    def update_target(self, kl: float | None = None) -> None:
        """Copies the model's weights into the target network and, with ``use_kl_loss``,
        adapts ``kl_coeff`` to ``kl`` (the last train batch's KL)."""
        self._copy_to_target()
        if self.config["use_kl_loss"] and kl is not None:
            self.kl_coeff.assign(adapt_kl_coeff(float(self.kl_coeff.numpy()), float(kl), self.config["kl_target"]))

    def after_learn(self, stats: dict[str, float]) -> dict[str, float]:
        return {"entropy_coeff": float(self.entropy_coeff.numpy())}

    def get_state(self) -> dict[str, np.ndarray]:
        state = super().get_state()
        target = self.target_model.get_canonical_weights() if self.builtin_model else get_model_weights(
            self.target_model)
        state.update(target_state(target))
        state["kl_coeff"] = np.asarray(float(self.kl_coeff.numpy()), dtype=np.float64)
        return state

    def set_state(self, state: dict[str, np.ndarray]) -> None:
        super().set_state(state)
        target = saved_target_weights(state)
        if not target:
            self._copy_to_target()
        elif self.builtin_model:
            self.target_model.set_canonical_weights(target)
        else:
            set_model_weights(self.target_model, target)
        if "kl_coeff" in state:
            self.kl_coeff.assign(float(state["kl_coeff"]))


# RLlib 1.13's name (`ray.rllib.agents.ppo.appo_tf_policy.AsyncPPOTFPolicy`).
AsyncPPOTFPolicy = APPOTFPolicy
