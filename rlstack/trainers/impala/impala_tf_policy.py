"""IMPALA's V-trace actor-critic loss in TensorFlow (Espeholt et al. 2018, section 4.2)."""

from __future__ import annotations

from rlstack.models.tf.framework import tf
from rlstack.policies.tf_policy import Adam, RMSProp, TFPolicy
from rlstack.sample_batch import SampleBatch
from rlstack.trainers.impala.fragments import VALID, with_valid_column
from rlstack.trainers.impala.separate_vf import value_layer_names
from rlstack.trainers.impala.vtrace_tf import vtrace


def to_time_major(x: tf.Tensor, seq_len: int) -> tf.Tensor:
    """``[B * T, ...]`` rows (each sequence's T steps contiguous) to ``[T, B, ...]``."""
    x = tf.reshape(x, tf.concat([[-1, seq_len], tf.shape(x)[1:]], axis=0))
    return tf.transpose(x, tf.concat([[1, 0], tf.range(2, tf.rank(x))], axis=0))


class ImpalaTFPolicy(TFPolicy):
    """IMPALA in TensorFlow; see :class:`ImpalaTorchPolicy` for the batch layout."""

    schedules_entropy_coeff = True
    # use_lstm and custom recurrent models: whole fragments in row order, the model run
    # over their sequences from the state at each one's start (model_outputs).
    supports_recurrent_models = True
    sequences_in_row_order = True

    shuffle_minibatches = False
    loss_columns = (SampleBatch.OBS, SampleBatch.ACTIONS, SampleBatch.ACTION_LOGP, SampleBatch.REWARDS,
                    SampleBatch.TERMINATEDS, SampleBatch.TRUNCATEDS, SampleBatch.BOOTSTRAP_VALUE, VALID)

    def learner_batch(self, batch: SampleBatch) -> SampleBatch:
        # Padding rows of multi-agent fragments are left out through ``valid`` (fragments.py).
        return super().learner_batch(with_valid_column(batch))

    def make_optimizer(self, variables: list[tf.Variable], lr: tf.Variable) -> Adam | RMSProp:
        if self.config["opt_type"] == "rmsprop":
            cfg = self.config
            return RMSProp(variables, lr, decay=cfg["decay"], momentum=cfg["momentum"], eps=cfg["epsilon"])
        return super().make_optimizer(variables, lr)

    def make_optimizers(self) -> list[Adam | RMSProp]:
        """One optimizer, or with ``_separate_vf_optimizer`` the policy layers' (at ``lr``)
        and the value layers' (at ``_lr_vf``), in the order of :meth:`loss`'s losses."""
        if not self.config["_separate_vf_optimizer"]:
            return super().make_optimizers()
        value_layers = value_layer_names(self)
        named = sorted(self.model.weight_vars.items())  # canonical names: "<layer>/kernel", "log_std"
        value_vars = [var for name, var in named if name.split("/")[0] in value_layers]
        policy_vars = [var for name, var in named if name.split("/")[0] not in value_layers]
        return [self.make_optimizer(policy_vars, self.lr),
                self.make_optimizer(value_vars, float(self.config["_lr_vf"]))]

    def loss(self, train_batch: dict[str, tf.Tensor]
             ) -> tuple[tf.Tensor | tuple[tf.Tensor, tf.Tensor], dict[str, tf.Tensor]]:
        cfg = self.config
        T = int(cfg["rollout_fragment_length"])
        gamma = float(cfg["gamma"])
        dist_inputs, values = self.model_outputs(train_batch)
        dist = self.action_distribution(dist_inputs)
        target_logp = to_time_major(dist.logp(train_batch[SampleBatch.ACTIONS]), T)
        entropy = to_time_major(dist.entropy(), T)
        values = to_time_major(values, T)
        behaviour_logp = to_time_major(train_batch[SampleBatch.ACTION_LOGP], T)
        rewards = to_time_major(train_batch[SampleBatch.REWARDS], T)
        terminateds = to_time_major(train_batch[SampleBatch.TERMINATEDS], T)
        truncateds = to_time_major(train_batch[SampleBatch.TRUNCATEDS], T)
        # gamma_t = 0 at an episode end; a time-limit end adds gamma V(x_final) (computed
        # on the worker) to its reward instead of bootstrapping into the next episode.
        discounts = gamma * tf.cast(tf.logical_not(tf.logical_or(terminateds, truncateds)), tf.float32)
        rewards = rewards + gamma * tf.cast(truncateds, tf.float32) * to_time_major(
            train_batch[SampleBatch.BOOTSTRAP_VALUE], T)

        # V-trace over steps 0..T-2 (vtrace_drop_last_ts) or 0..T-1, bootstrapping from the
        # learner's V(x_{T-1}).
        steps = slice(None, -1) if cfg["vtrace_drop_last_ts"] else slice(None)
        log_rhos = (target_logp - behaviour_logp)[steps]
        vs, pg_advantages = vtrace(
            log_rhos, discounts[steps], rewards[steps], values[steps], values[-1],
            clip_rho_threshold=cfg["vtrace_clip_rho_threshold"],
            clip_pg_rho_threshold=cfg["vtrace_clip_pg_rho_threshold"],
        )
        # Sums over the batch's real rows (valid: padding left out), as in the paper's
        # implementation and classic RLlib.
        valid = to_time_major(train_batch[VALID], T)[steps]
        count = tf.maximum(tf.reduce_sum(valid), 1.0)
        pi_loss = -tf.reduce_sum(target_logp[steps] * pg_advantages * valid)
        delta = values[steps] - vs
        vf_loss = 0.5 * tf.reduce_sum(tf.square(delta) * valid)
        entropy_sum = tf.reduce_sum(entropy[steps] * valid)
        if cfg["_separate_vf_optimizer"]:
            # Two losses for two optimizers; total_loss reports the policy optimizer's.
            total_loss = pi_loss - self.entropy_coeff * entropy_sum
            losses: tf.Tensor | tuple[tf.Tensor, tf.Tensor] = (total_loss, vf_loss)
        else:
            total_loss = losses = pi_loss + cfg["vf_loss_coeff"] * vf_loss - self.entropy_coeff * entropy_sum

        def masked_var(x: tf.Tensor) -> tf.Tensor:
            mean = tf.reduce_sum(x * valid) / count
            return tf.reduce_sum(tf.square(x - mean) * valid) / count

        stats = {
            "total_loss": total_loss,
            "policy_loss": pi_loss,
            "vf_loss": vf_loss,
            "entropy": entropy_sum / count,
            "mean_rho": tf.reduce_sum(tf.exp(log_rhos) * valid) / count,
            "vf_explained_var": 1.0 - masked_var(vs - values[steps]) / tf.maximum(masked_var(vs), 1e-8),
        }
        return losses, stats

    def after_learn(self, stats: dict[str, float]) -> dict[str, float]:
        return {"entropy_coeff": float(self.entropy_coeff.numpy())}
