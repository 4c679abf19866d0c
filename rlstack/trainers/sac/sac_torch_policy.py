"""SAC's loss in torch: Haarnoja et al. 2018 ("Soft Actor-Critic Algorithms and
Applications", https://arxiv.org/abs/1812.05905) for Box actions and Christodoulou 2019
("Soft Actor-Critic for Discrete Action Settings", https://arxiv.org/abs/1910.07207) for
Discrete actions, with 1.13's choices: twin critics trained on the Huber loss, n-step
targets, importance weights from prioritized replay, a learned log(alpha).

Three losses, three optimizers (the base's learner loop steps each on the gradient of its
own loss w.r.t. its own parameters): the actor, both critics together (their parameters
are disjoint, so one Adam on the summed loss equals 1.13's one Adam per critic, except
that ``grad_clip`` clips them together), and log(alpha).
"""

from __future__ import annotations

import copy
import math

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F

from rlstack.models.blocks import ActorCriticSpec
from rlstack.models.torch.blocks import TorchActorCritic
from rlstack.models.torch.torch_action_dist import TorchCategorical, TorchSquashedGaussian
from rlstack.policies.policy import saved_target_weights, target_state
from rlstack.policies.torch_policy import Optimizer, TorchPolicy
from rlstack.sample_batch import SampleBatch
from rlstack.trainers.sac.sac_policy import (SACLearningPolicyMixin, check_action_space, sac_model_spec,
                                             target_entropy)
from rlstack.utils.schedules import make_schedule

B = SampleBatch


class SACTorchPolicy(SACLearningPolicyMixin, TorchPolicy):
    """SAC in torch; the losses equal :class:`SACTFPolicy`'s to float32 rounding."""

    model_class = TorchActorCritic
    # The actor's loss reads the critics through frozen weights, alpha enters the actor's
    # and critics' losses detached, and the targets carry no gradient: one backward pass.
    losses_are_separate = True

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict, num_gpus: float = 0,
                 sampling_seed: int | None = None) -> None:
        check_action_space(action_space)  # SAC's message before the generic one
        super().__init__(observation_space, action_space, config, num_gpus, sampling_seed)
        self.discrete = isinstance(action_space, gym.spaces.Discrete)
        self.dist_class = TorchCategorical if self.discrete else TorchSquashedGaussian
        self.target_entropy = target_entropy(config, action_space)
        self._target_entropy_tensor = torch.tensor(self.target_entropy, device=self.device)
        # The entropy coefficient, learned as log(alpha) (an optimizer of its own).
        self.log_alpha = torch.nn.Parameter(torch.tensor(math.log(config["initial_alpha"]), device=self.device))
        # Target critics: a frozen copy, moved towards the critics by update_target().
        self.target_critics = copy.deepcopy(self.model.critics).requires_grad_(False)
        # The loss's own noise (reparameterised action samples), apart from acting's.
        self.loss_generator = torch.Generator(device=self.device)
        self.loss_generator.manual_seed(int(config["seed"]) if config.get("seed") is not None else
                                        int(np.random.SeedSequence().entropy % 2**63))
        # `lr` is not SAC's: the actor's rate is optimization.actor_learning_rate.
        self.lr_schedule = make_schedule(config["optimization"]["actor_learning_rate"], None, "lr_schedule")

    def model_spec(self) -> ActorCriticSpec:
        return sac_model_spec(self)

    def make_optimizers(self) -> list[Optimizer]:
        """Adam for the actor, the critics and log(alpha), in the order of :meth:`loss`'s losses."""
        rates = self.config["optimization"]
        return [self.make_optimizer(self.model.actor_parameters(), rates["actor_learning_rate"]),
                self.make_optimizer(self.model.critic_parameters(), rates["critic_learning_rate"]),
                self.make_optimizer([self.log_alpha], rates["entropy_learning_rate"])]

    # ----- acting -----------------------------------------------------------------

    def action_dist(self, dist_inputs: torch.Tensor) -> TorchSquashedGaussian | TorchCategorical:
        """The actor's distribution: a squashed Gaussian acting in [-1, 1], or a categorical."""
        return self.dist_class(dist_inputs, self.dist_spec)

    def compute_actions(self, obs_batch: np.ndarray, explore: bool | None = None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        with torch.no_grad():
            obs = torch.from_numpy(np.asarray(obs_batch, dtype=np.float32)).to(self.device)
            dist_inputs = self.model.actor_outputs(obs)
            dist = self.action_dist(dist_inputs)
            actions = dist.sample(self.sampling_generator) if self._explore(explore) else dist.deterministic_sample()
            logp = dist.logp(actions) if self.discrete else dist.sampled_action_logp()
        return actions.cpu().numpy(), {B.ACTION_DIST_INPUTS: dist_inputs.cpu().numpy(),
                                       B.ACTION_LOGP: logp.cpu().numpy()}

    # ----- learning ---------------------------------------------------------------

    def loss_noise(self, shape: torch.Size) -> torch.Tensor:
        """Standard normal noise of the loss's reparameterised samples (tests replace it)."""
        return torch.randn(shape, generator=self.loss_generator, device=self.device)

    def loss(self, train_batch: dict[str, torch.Tensor]) -> tuple[tuple[torch.Tensor, ...], dict[str, torch.Tensor]]:
        """``((actor_loss, critic_loss, alpha_loss), stats)`` on a replayed minibatch."""
        obs, next_obs = train_batch[B.OBS], train_batch[B.NEXT_OBS]
        alpha = self.log_alpha.exp()
        not_done = 1.0 - train_batch[B.TERMINATEDS].float()
        # The actor on s_t (differentiated) and on s_{t+1} (only the target reads it).
        dist_inputs_t = self.model.actor_outputs(obs)
        with torch.no_grad():
            dist_inputs_tp1 = self.model.actor_outputs(next_obs)
        if self.discrete:
            return self._discrete_loss(train_batch, dist_inputs_t, dist_inputs_tp1, alpha, not_done)
        dist_t, dist_tp1 = TorchSquashedGaussian(dist_inputs_t), TorchSquashedGaussian(dist_inputs_tp1)
        if self.config["_deterministic_loss"]:
            policy_t, log_pis_t = dist_t.deterministic_sample(), dist_t.sampled_action_logp()
            policy_tp1, log_pis_tp1 = dist_tp1.deterministic_sample(), dist_tp1.sampled_action_logp()
        else:
            # Rows 0..n-1 of the noise for s_t, rows n..2n-1 for s_{t+1}.
            n = obs.shape[0]
            noise = self.loss_noise(torch.Size((2 * n, dist_t.mean.shape[1])))
            policy_t, log_pis_t = dist_t.sample_with_logp(noise=noise[:n])
            policy_tp1, log_pis_tp1 = dist_tp1.sample_with_logp(noise=noise[n:])
        # Q_j(s, a) of the replayed actions, and min_j Q_j(s, pi(s)): two passes, so that
        # each loss's backward pass runs over its own rows only.
        q_t = self.model.critic_values(obs, train_batch[B.ACTIONS])  # [C, n]
        q_t_policy = self.model.critic_values(obs, policy_t, frozen=True).min(dim=0).values
        with torch.no_grad():
            # y = r + gamma^k (1 - terminated) (min_j Q'_j(s', a') - alpha log pi(a'|s')),  a' ~ pi(.|s')
            q_tp1 = self.target_critics(next_obs, policy_tp1).min(dim=0).values - alpha * log_pis_tp1
            target = train_batch[B.REWARDS] + train_batch[B.DISCOUNTS] * not_done * q_tp1
        # J_pi = E[alpha log pi(a|s) - min_j Q_j(s, a)],  a = tanh(mean + std * noise)
        actor_loss = (alpha.detach() * log_pis_t - q_t_policy).mean()
        # J_alpha = E[-log(alpha) (log pi(a|s) + target_entropy)]
        alpha_loss = -(self.log_alpha * (log_pis_t + self.target_entropy).detach()).mean()
        return self._with_critic_loss(train_batch, q_t, target, actor_loss, alpha_loss, alpha, log_pis_t, policy_t)

    def _discrete_loss(self, train_batch: dict[str, torch.Tensor], logits_t: torch.Tensor, logits_tp1: torch.Tensor,
                       alpha: torch.Tensor, not_done: torch.Tensor,
                       ) -> tuple[tuple[torch.Tensor, ...], dict[str, torch.Tensor]]:
        # Discrete SAC: expectations over actions in closed form, no sampling.
        log_pis_t, log_pis_tp1 = F.log_softmax(logits_t, dim=-1), F.log_softmax(logits_tp1, dim=-1)
        policy_t, policy_tp1 = log_pis_t.exp(), log_pis_tp1.exp()
        q_all = self.model.critic_values(train_batch[B.OBS])  # [C, n, num_actions]
        actions = train_batch[B.ACTIONS].long()
        n = actions.shape[0]
        q_t = q_all.gather(2, actions.view(1, n, 1).expand(q_all.shape[0], n, 1)).squeeze(2)
        with torch.no_grad():
            # V(s') = sum_a' pi(a'|s') (min_j Q'_j(s', a') - alpha log pi(a'|s'))
            q_tp1 = self.target_critics(train_batch[B.NEXT_OBS]).min(dim=0).values
            v_tp1 = (policy_tp1 * (q_tp1 - alpha * log_pis_tp1)).sum(dim=-1)
            target = train_batch[B.REWARDS] + train_batch[B.DISCOUNTS] * not_done * v_tp1
        # J_pi = E_s[sum_a pi(a|s) (alpha log pi(a|s) - min_j Q_j(s, a))]
        q_min = q_all.detach().min(dim=0).values
        actor_loss = (policy_t * (alpha.detach() * log_pis_t - q_min)).sum(dim=-1).mean()
        # J_alpha = E_s[-log(alpha) sum_a pi(a|s) (log pi(a|s) + target_entropy)]
        entropy_gap = (policy_t * (log_pis_t + self.target_entropy)).sum(dim=-1).detach()
        alpha_loss = -(self.log_alpha * entropy_gap).mean()
        log_pi_mean = (policy_t * log_pis_t).sum(dim=-1)
        return self._with_critic_loss(train_batch, q_t, target, actor_loss, alpha_loss, alpha, log_pi_mean, policy_t)

    def _with_critic_loss(self, train_batch: dict[str, torch.Tensor], q_t: torch.Tensor, target: torch.Tensor,
                          actor_loss: torch.Tensor, alpha_loss: torch.Tensor, alpha: torch.Tensor,
                          log_pis_t: torch.Tensor, policy_t: torch.Tensor,
                          ) -> tuple[tuple[torch.Tensor, ...], dict[str, torch.Tensor]]:
        # J_Q = sum_j E[w * huber(Q_j(s, a) - y)] (1.13: Huber, delta 1; w: importance weights)
        td = q_t - target  # [C, n]
        huber = F.huber_loss(q_t, target.expand_as(q_t), reduction="none", delta=1.0)
        critic_loss = (train_batch[B.WEIGHTS] * huber).mean(dim=1).sum()
        stats = self._stats(q_t, td, actor_loss, critic_loss, alpha_loss, alpha, log_pis_t, policy_t)
        return (actor_loss, critic_loss, alpha_loss), stats

    def _stats(self, q_t: torch.Tensor, td: torch.Tensor, actor_loss: torch.Tensor, critic_loss: torch.Tensor,
               alpha_loss: torch.Tensor, alpha: torch.Tensor, log_pis_t: torch.Tensor, policy_t: torch.Tensor,
               ) -> dict[str, torch.Tensor]:
        # The statistics of one step, the same on the autograd and the closed-form paths.
        q_t = q_t.detach()
        return {
            "actor_loss": actor_loss,
            "critic_loss": critic_loss,
            "alpha_loss": alpha_loss,
            "alpha_value": alpha.detach(),
            # A copy: the entropy optimizer updates log_alpha in place after this step.
            "log_alpha_value": self.log_alpha.detach().clone(),
            "target_entropy": self._target_entropy_tensor,
            "entropy": -log_pis_t.detach().mean(),
            "policy_t": policy_t.detach().mean(),
            "mean_q": q_t[0].mean(),
            "max_q": q_t[0].max(),
            "min_q": q_t[0].min(),
            # The new priorities: |TD error| averaged over the critics (1.13's).
            "td_error": td.detach().abs().mean(dim=0),
        }

    def update_target(self, tau: float | None = None) -> None:
        """Moves the target critics towards the critics: ``target <- tau * critics +
        (1 - tau) * target`` (``tau`` from the config by default; 1.0 copies)."""
        tau = float(self.config["tau"] if tau is None else tau)
        targets, sources = list(self.target_critics.parameters()), list(self.model.critics.parameters())
        if tau == 1.0:
            torch._foreach_copy_(targets, sources)
        else:
            torch._foreach_lerp_(targets, sources, tau)

    # ----- weights and state ------------------------------------------------------

    def get_weights(self) -> dict[str, np.ndarray]:
        """The actor's and critics' weights (canonical layout) and ``log_alpha``."""
        return {**self.model.get_canonical_weights(), "log_alpha": self.log_alpha.detach().cpu().numpy().copy()}

    @torch.no_grad()
    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        self.model.set_canonical_weights(weights)
        if "log_alpha" in weights:
            self.log_alpha.copy_(torch.as_tensor(np.asarray(weights["log_alpha"], np.float32)))

    def get_state(self) -> dict[str, np.ndarray]:
        state = super().get_state()
        state.update(target_state(self.target_critics.get_canonical_weights()))
        state["loss_rng"] = self.loss_generator.get_state().numpy()
        return state

    def set_state(self, state: dict[str, np.ndarray]) -> None:
        super().set_state(state)
        target = saved_target_weights(state)
        if target:
            self.target_critics.set_canonical_weights(target)
        else:
            self.update_target(tau=1.0)
        if "loss_rng" in state:
            saved = np.array(state["loss_rng"], dtype=np.uint8)
            if saved.size == self.loss_generator.get_state().numel():
                self.loss_generator.set_state(torch.from_numpy(saved))
