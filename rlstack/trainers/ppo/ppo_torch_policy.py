"""PPO's clipped-surrogate loss with adaptive KL penalty, in torch (Schulman et al. 2017)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch

from rlstack.models.torch.fused import DenseGraph
from rlstack.models.torch.torch_action_dist import CLOSED_FORM_TERMS
from rlstack.policies.postprocessing import adapt_kl_coeff, postprocess_advantages
from rlstack.policies.torch_policy import GradFn, TorchPolicy
from rlstack.sample_batch import SampleBatch


class PPOTorchPolicy(TorchPolicy):
    """PPO in torch; the loss equals :class:`PPOTFPolicy`'s to float32 rounding."""

    schedules_entropy_coeff = True
    # use_lstm and custom recurrent models: the loss reads padded sequences (unroll).
    supports_recurrent_models = True
    # Built-in dense models with Discrete or Box actions learn through the closed-form
    # gradient below instead of autograd (same result, more SGD steps per second:
    # bench/learner.py, BENCHMARKS.md "Learner throughput"); False forces autograd.
    use_fused_sgd = True

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
        self.kl_coeff = float(config["kl_coeff"])
        self._dense_graph: DenseGraph | None = None  # built at the first fused learn_on_batch

    def postprocess_trajectory(self, batch: SampleBatch) -> SampleBatch:
        return postprocess_advantages(batch, self.config)

    def loss(self, train_batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        cfg = self.config
        # One row per step; `mean` is over real steps only (padded sequences of a recurrent model).
        batch, mean = self.unroll(train_batch)
        dist_inputs, values = self.model_outputs(batch)
        curr_dist = self.action_dist(dist_inputs)
        prev_dist = self.action_dist(batch[SampleBatch.ACTION_DIST_INPUTS])

        # ratio = pi_new(a|s) / pi_old(a|s)
        ratio = torch.exp(curr_dist.logp(batch[SampleBatch.ACTIONS]) - batch[SampleBatch.ACTION_LOGP])
        advantages = batch[SampleBatch.ADVANTAGES]
        pg_loss1 = advantages * ratio
        pg_loss2 = advantages * torch.clamp(ratio, 1.0 - cfg["clip_param"], 1.0 + cfg["clip_param"])
        surrogate = mean(torch.min(pg_loss1, pg_loss2))

        # KL(pi_old || pi_new), penalised with the adaptive kl_coeff.
        mean_kl = mean(prev_dist.kl(curr_dist))
        entropy = mean(curr_dist.entropy())

        if cfg["use_critic"]:
            # vf_clip_param clips the squared value error (the loss), not the value.
            vf_loss = mean(torch.clamp((values - batch[SampleBatch.VALUE_TARGETS]) ** 2, 0.0, cfg["vf_clip_param"]))
        else:
            vf_loss = torch.zeros((), device=values.device)

        total_loss = -surrogate + self.kl_coeff * mean_kl + cfg["vf_loss_coeff"] * vf_loss - self.entropy_coeff * entropy
        stats = {
            "total_loss": total_loss,
            "policy_loss": -surrogate,
            "vf_loss": vf_loss,
            "kl": mean_kl,
            "entropy": entropy,
        }
        return total_loss, stats

    def make_grad_fn(self, tensors: dict[str, torch.Tensor]) -> GradFn:
        # Without a critic the value layers get no gradient (autograd leaves them out of
        # the update); that case keeps autograd.
        # Only built-in models (which define no custom_loss) qualify.
        # Recurrent models (BPTT over padded sequences) keep autograd of loss() too.
        if not (self.use_fused_sgd and self.config["use_critic"] and self.dist_spec.kind in CLOSED_FORM_TERMS
                and not self.is_recurrent and DenseGraph.supports(self.model)):
            return super().make_grad_fn(tensors)
        return self._fused_grad_fn(tensors)

    def _fused_grad_fn(self, tensors: dict[str, torch.Tensor]) -> GradFn:
        """:meth:`loss` and its gradient written out for a :class:`DenseGraph` (see
        models/torch/fused.py for why). With ``z`` the distribution inputs, ``r`` the
        ratio, ``B`` the minibatch size:

        * surrogate: d/dz of ``-mean(min(A r, A clip(r)))`` is ``-g r dlogp/dz / B`` with
          ``g = A`` where the unclipped term is the minimum (ties included, which is
          every row inside the clip range) and 0 where the clip binds;
        * KL(old || new) and the entropy H: their own d/dz over ``B`` (the distribution's
          ``closed_form_terms``, ``CLOSED_FORM_TERMS``);
        * value loss ``clamp((v - v_target)^2, 0, vf_clip)``: ``2 (v - v_target) / B``
          where the square is within the clip, else 0.
        """
        cfg = self.config
        if self._dense_graph is None:
            self._dense_graph = DenseGraph(self.model)
        graph = self._dense_graph
        graph.attach_grads()
        clip_low, clip_high = 1.0 - cfg["clip_param"], 1.0 + cfg["clip_param"]
        kl_coeff, entropy_coeff = self.kl_coeff, float(self.entropy_coeff)
        vf_coeff, vf_clip = float(cfg["vf_loss_coeff"]), float(cfg["vf_clip_param"])
        # The distribution's own derivatives (models/torch/torch_action_dist.py).
        head = CLOSED_FORM_TERMS[self.dist_spec.kind]
        # Every column the loss reads in one matrix: one gather per minibatch.
        obs = tensors[SampleBatch.OBS].float()
        dist_columns = head.closed_form_columns(tensors[SampleBatch.ACTIONS], tensors[SampleBatch.ACTION_DIST_INPUTS].float())
        packed = torch.cat([obs, *dist_columns,
                            torch.stack([tensors[SampleBatch.ACTION_LOGP].float(), tensors[SampleBatch.ADVANTAGES].float(),
                                         tensors[SampleBatch.VALUE_TARGETS].float()], dim=1)], dim=1)
        widths = [obs.shape[1], *(c.shape[1] for c in dist_columns), 3]
        # total = -surrogate + kl_coeff kl + vf_coeff vf - entropy_coeff entropy
        loss_weights = torch.tensor([-1.0, kl_coeff, vf_coeff, -entropy_coeff], device=self.device)

        def grads(index: torch.Tensor, with_stats: bool = True) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
            rows = len(index)
            obs, *dist_parts, rest = packed.index_select(0, index).split(widths, dim=1)
            logp_old, advantages, value_targets = rest.unbind(1)
            dist_inputs, values, saved = graph.forward(obs)

            logp, kl, entropy, dlogp, dkl, dentropy = head.closed_form_terms(dist_inputs, *dist_parts)
            ratio = torch.exp(logp - logp_old)
            pg_loss1 = advantages * ratio
            pg_loss2 = advantages * ratio.clamp(clip_low, clip_high)
            surrogate = torch.minimum(pg_loss1, pg_loss2)

            grad_logp = torch.where(pg_loss1 <= pg_loss2, advantages, 0.0).mul_(ratio).mul_(-1.0 / rows)
            grad_inputs = dlogp.mul_(grad_logp.unsqueeze(1))
            grad_inputs.add_(dkl, alpha=kl_coeff / rows)
            if entropy_coeff:
                grad_inputs.add_(dentropy, alpha=-entropy_coeff / rows)
            error = values - value_targets
            squared_error = error * error
            vf_loss = squared_error.clamp(max=vf_clip)
            grad_values = torch.where(squared_error <= vf_clip, error, 0.0).mul_(2.0 * vf_coeff / rows)
            graph.backward(saved, grad_inputs, grad_values)

            means = torch.stack([surrogate, kl, vf_loss, entropy], dim=1).mean(0)
            total_loss = (means * loss_weights).sum()
            if not with_stats:
                return total_loss, {}
            policy_loss, mean_kl, mean_vf_loss, mean_entropy = (-means[0], means[1], means[2], means[3])
            return total_loss, {"total_loss": total_loss, "policy_loss": policy_loss, "vf_loss": mean_vf_loss,
                                "kl": mean_kl, "entropy": mean_entropy}

        return grads

    def after_learn(self, stats: dict[str, float]) -> dict[str, float]:
        self.kl_coeff = adapt_kl_coeff(self.kl_coeff, stats["kl"], self.config["kl_target"])
        return {"kl_coeff": self.kl_coeff, "entropy_coeff": self.entropy_coeff}

    def get_state(self) -> dict[str, np.ndarray]:
        state = super().get_state()
        state["kl_coeff"] = np.asarray(self.kl_coeff, dtype=np.float64)
        return state

    def set_state(self, state: dict[str, np.ndarray]) -> None:
        super().set_state(state)
        if "kl_coeff" in state:
            self.kl_coeff = float(state["kl_coeff"])

