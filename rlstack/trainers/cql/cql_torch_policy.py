"""CQL's losses in torch: SAC's (sac_torch_policy.py) with the conservative term on the
critics, behaviour cloning for the actor's first ``bc_iters`` steps, and (``lagrangian``)
a fourth optimizer for log(alpha')."""

from __future__ import annotations

import math

import gymnasium as gym
import torch

from rlstack.models.torch.torch_action_dist import TorchSquashedGaussian
from rlstack.policies.torch_policy import Optimizer
from rlstack.sample_batch import SampleBatch
from rlstack.trainers.cql.cql import check_cql_action_space
from rlstack.trainers.sac.sac_torch_policy import SACTorchPolicy

B = SampleBatch


class CQLTorchPolicy(SACTorchPolicy):
    """CQL in torch; the losses equal :class:`CQLTFPolicy`'s to float32 rounding."""

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict, num_gpus: float = 0,
                 sampling_seed: int | None = None) -> None:
        check_cql_action_space(action_space)
        super().__init__(observation_space, action_space, config, num_gpus, sampling_seed)
        # The Lagrangian's log(alpha') (learned only with lagrangian=True).
        self.log_alpha_prime = torch.nn.Parameter(torch.zeros((), device=self.device))

    def make_optimizers(self) -> list[Optimizer]:
        optimizers = super().make_optimizers()
        if self.config["lagrangian"]:
            optimizers.append(self.make_optimizer([self.log_alpha_prime], self.config["optimization"]["critic_learning_rate"]))
        return optimizers

    def cql_uniform_actions(self, shape: torch.Size) -> torch.Tensor:
        """The uniform actions in [-1, 1] of the conservative term (tests replace it)."""
        return torch.rand(shape, generator=self.loss_generator, device=self.device) * 2.0 - 1.0

    def loss(self, train_batch: dict[str, torch.Tensor]) -> tuple[tuple[torch.Tensor, ...], dict[str, torch.Tensor]]:
        cfg = self.config
        (actor_loss, critic_loss, alpha_loss), stats = super().loss(train_batch)
        obs, next_obs, actions = train_batch[B.OBS], train_batch[B.NEXT_OBS], train_batch[B.ACTIONS]
        n, num, dim = obs.shape[0], int(cfg["num_actions"]), actions.shape[1]
        alpha = self.log_alpha.exp().detach()
        # Behaviour cloning: J_pi = E[alpha log pi(a~|s) - log pi(a_data|s)] for the first bc_iters steps.
        if self.num_grad_steps < cfg["bc_iters"]:
            dist_t = TorchSquashedGaussian(self.model.actor_outputs(obs))
            _, log_pis_t = dist_t.sample_with_logp(noise=self.loss_noise(torch.Size((n, dim))))
            actor_loss = (alpha * log_pis_t - dist_t.logp(actions.clamp(-1 + 1e-6, 1 - 1e-6))).mean()
        # The conservative term, per critic: temp * logsumexp(Q(s, a_k) - log density(a_k) / temp) - Q(s, a_data).
        obs_rep, next_rep = obs.repeat_interleave(num, dim=0), next_obs.repeat_interleave(num, dim=0)
        with torch.no_grad():
            noise = self.loss_noise(torch.Size((2 * n * num, dim)))
            curr, logp_curr = TorchSquashedGaussian(self.model.actor_outputs(obs_rep)).sample_with_logp(
                noise=noise[:n * num])
            nxt, logp_next = TorchSquashedGaussian(self.model.actor_outputs(next_rep)).sample_with_logp(
                noise=noise[n * num:])
        uniform = self.cql_uniform_actions(torch.Size((n * num, dim)))
        q_rand = self.model.critic_values(obs_rep, uniform).view(-1, n, num) - dim * math.log(0.5)
        q_curr = self.model.critic_values(obs_rep, curr).view(-1, n, num) - logp_curr.view(1, n, num)
        q_next = self.model.critic_values(obs_rep, nxt).view(-1, n, num) - logp_next.view(1, n, num)
        temp = float(cfg["temperature"])
        soft_max = torch.logsumexp(torch.cat([q_rand, q_next, q_curr], dim=2) / temp, dim=2).mean(dim=1) * temp
        q_data = self.model.critic_values(obs, actions).mean(dim=1)
        gap = cfg["min_q_weight"] * (soft_max - q_data)  # [C]
        losses = [actor_loss, critic_loss, alpha_loss]
        if cfg["lagrangian"]:
            alpha_prime = self.log_alpha_prime.exp().clamp(0.0, 1e6)
            conservative = alpha_prime.detach() * (gap - cfg["lagrangian_thresh"])
            losses.append(-0.5 * (alpha_prime * (gap.detach() - cfg["lagrangian_thresh"])).sum())
            stats["alpha_prime_value"] = alpha_prime.detach()
            stats["alpha_prime_loss"] = losses[-1]
        else:
            conservative = gap
        losses[1] = critic_loss + conservative.sum()
        stats.update(actor_loss=losses[0], critic_loss=losses[1], cql_loss=conservative.sum(),
                     cql_gap=gap.detach().mean() / max(cfg["min_q_weight"], 1e-8))
        return tuple(losses), stats

    def get_state(self):  # noqa: ANN201 - PolicyState
        state = super().get_state()
        state["log_alpha_prime"] = self.log_alpha_prime.detach().cpu().numpy()
        return state

    def set_state(self, state) -> None:  # noqa: ANN001 - PolicyState
        super().set_state(state)
        if "log_alpha_prime" in state:
            self.log_alpha_prime.data.fill_(float(state["log_alpha_prime"]))
