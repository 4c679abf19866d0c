"""IMPALA's V-trace actor-critic loss in torch (Espeholt et al. 2018, section 4.2)."""

from __future__ import annotations

import torch

from rlstack.policies.torch_policy import Adam, RMSProp, TorchPolicy
from rlstack.sample_batch import SampleBatch
from rlstack.trainers.impala.fragments import VALID, with_valid_column
from rlstack.trainers.impala.separate_vf import value_layer_names
from rlstack.trainers.impala.vtrace_torch import vtrace


def to_time_major(x: torch.Tensor, seq_len: int) -> torch.Tensor:
    """``[B * T, ...]`` rows (each sequence's T steps contiguous) to ``[T, B, ...]``."""
    return x.reshape(-1, seq_len, *x.shape[1:]).transpose(0, 1)


class ImpalaTorchPolicy(TorchPolicy):
    """IMPALA in torch; the loss equals :class:`ImpalaTFPolicy`'s to float32 rounding.

    Train batches are whole rollout fragments (``rollout_fragment_length`` steps of one
    sub-env each, in order). V-trace bootstraps each fragment from ``V(x_{T-1})`` of the
    learner's value function. With ``vtrace_drop_last_ts`` (the default) the last step
    only bootstraps: V-trace and the loss run over the first T - 1 steps. Without it they
    run over all T, the last step bootstrapping from its own value, as in 1.13.
    With ``_separate_vf_optimizer`` the loss is two losses, the policy's and the value
    function's, for two optimizers (:meth:`make_optimizers`).
    """

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

    def make_optimizer(self, params: list[torch.nn.Parameter], lr: float) -> Adam | RMSProp:
        if self.config["opt_type"] == "rmsprop":
            cfg = self.config
            return RMSProp(params, lr, decay=cfg["decay"], momentum=cfg["momentum"], eps=cfg["epsilon"])
        return super().make_optimizer(params, lr)

    def make_optimizers(self) -> list[Adam | RMSProp]:
        """One optimizer, or with ``_separate_vf_optimizer`` the policy layers' (at ``lr``)
        and the value layers' (at ``_lr_vf``), in the order of :meth:`loss`'s losses."""
        if not self.config["_separate_vf_optimizer"]:
            return super().make_optimizers()
        value_params = [param for name in sorted(value_layer_names(self))
                        for param in self.model.layers[name].parameters()]
        value_ids = {id(param) for param in value_params}
        policy_params = [param for param in self.model.parameters() if id(param) not in value_ids]
        return [self.make_optimizer(policy_params, self.lr_schedule.value(self.global_timestep)),
                self.make_optimizer(value_params, float(self.config["_lr_vf"]))]

    def loss(self, train_batch: dict[str, torch.Tensor]
             ) -> tuple[torch.Tensor | tuple[torch.Tensor, torch.Tensor], dict[str, torch.Tensor]]:
        cfg = self.config
        T = int(cfg["rollout_fragment_length"])
        gamma = float(cfg["gamma"])
        dist_inputs, values = self.model_outputs(train_batch)
        dist = self.action_dist(dist_inputs)
        target_logp = to_time_major(dist.logp(train_batch[SampleBatch.ACTIONS]), T)
        entropy = to_time_major(dist.entropy(), T)
        values = to_time_major(values, T)
        behaviour_logp = to_time_major(train_batch[SampleBatch.ACTION_LOGP], T)
        rewards = to_time_major(train_batch[SampleBatch.REWARDS], T)
        terminateds = to_time_major(train_batch[SampleBatch.TERMINATEDS], T)
        truncateds = to_time_major(train_batch[SampleBatch.TRUNCATEDS], T)
        # gamma_t = 0 at an episode end; a time-limit end adds gamma V(x_final) (computed
        # on the worker) to its reward instead of bootstrapping into the next episode.
        discounts = gamma * (~(terminateds | truncateds)).float()
        rewards = rewards + gamma * truncateds.float() * to_time_major(train_batch[SampleBatch.BOOTSTRAP_VALUE], T)

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
        count = valid.sum().clamp(min=1.0)
        pi_loss = -(target_logp[steps] * pg_advantages * valid).sum()
        delta = values[steps] - vs
        vf_loss = 0.5 * (delta**2 * valid).sum()
        entropy_sum = (entropy[steps] * valid).sum()
        if cfg["_separate_vf_optimizer"]:
            # Two losses for two optimizers; total_loss reports the policy optimizer's.
            total_loss = pi_loss - self.entropy_coeff * entropy_sum
            losses: torch.Tensor | tuple[torch.Tensor, torch.Tensor] = (total_loss, vf_loss)
        else:
            total_loss = losses = pi_loss + cfg["vf_loss_coeff"] * vf_loss - self.entropy_coeff * entropy_sum

        def masked_var(x: torch.Tensor) -> torch.Tensor:
            mean = (x * valid).sum() / count
            return ((x - mean) ** 2 * valid).sum() / count

        stats = {
            "total_loss": total_loss,
            "policy_loss": pi_loss,
            "vf_loss": vf_loss,
            "entropy": entropy_sum / count,
            "mean_rho": ((torch.exp(log_rhos) * valid).sum() / count).detach(),
            "vf_explained_var": 1.0 - masked_var(vs - values[steps]) / masked_var(vs).clamp(min=1e-8),
        }
        return losses, stats

    def after_learn(self, stats: dict[str, float]) -> dict[str, float]:
        return {"entropy_coeff": self.entropy_coeff}
