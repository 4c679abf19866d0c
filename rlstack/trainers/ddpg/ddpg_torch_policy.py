"""DDPG's and TD3's losses in torch: the deterministic policy gradient (Lillicrap et al.
2016) with TD3's clipped double Q, target policy smoothing and delayed actor updates
(Fujimoto et al. 2018), n-step targets, importance weights and L2 regularisation as in
classic RLlib 1.13.
"""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F

from rlstack.models.torch.blocks import TorchActorCritic
from rlstack.policies.policy import PolicyState, decode_json, encode_json, saved_target_weights, target_state
from rlstack.policies.torch_policy import Adam, TorchPolicy
from rlstack.sample_batch import SampleBatch
from rlstack.trainers.ddpg.ddpg_policy import DDPGLearningPolicyMixin, make_exploration
from rlstack.utils.schedules import make_schedule

B = SampleBatch


def l2_loss(params: list[torch.nn.Parameter]) -> torch.Tensor:
    """``sum(w^2) / 2`` over ``params`` (TF's ``tf.nn.l2_loss``, which 1.13 used)."""
    return sum(torch.sum(p * p) for p in params) / 2.0


class DDPGTorchPolicy(DDPGLearningPolicyMixin, TorchPolicy):
    """DDPG / TD3 in torch; the loss equals :class:`DDPGTFPolicy`'s to float32 rounding.

    Two optimizers, in this order: the actor's (``actor_lr``; it steps every
    ``policy_delay``-th gradient step) and the critics' (``critic_lr``).
    """

    model_class = TorchActorCritic
    # The actor's loss reads the critics through frozen weights and the targets carry no
    # gradient: one backward pass for both losses.
    losses_are_separate = True

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict, num_gpus: float = 0,
                 sampling_seed: int | None = None) -> None:
        super().__init__(observation_space, action_space, config, num_gpus, sampling_seed)
        # The base's lr / lr_schedule move optimizer 0: the actor's, at actor_lr.
        self.lr_schedule = make_schedule(config["actor_lr"], None, "actor_lr")
        self.exploration = make_exploration(self)
        # The target actor and critics: frozen copies that follow by polyak averaging.
        self.target_model = copy.deepcopy(self.model)
        self.target_model.requires_grad_(False)
        # Target policy smoothing's noise, drawn apart from acting.
        seed = config.get("seed")
        self.target_noise_generator = torch.Generator(device=self.device)
        if seed is None:
            self.target_noise_generator.seed()
        else:
            self.target_noise_generator.manual_seed(int(seed) + 17)

    def make_optimizers(self) -> list[Adam]:
        eps = self.config["adam_epsilon"]
        return [Adam(self.model.actor_parameters(), lr=self.config["actor_lr"], eps=eps),
                Adam(self.model.critic_parameters(), lr=self.config["critic_lr"], eps=eps)]

    def optimizer_step_mask(self, step: int) -> tuple[bool, bool]:
        # TD3's delayed policy updates: the actor steps on gradient steps 0, k, 2k, ...
        return step % int(self.config["policy_delay"]) == 0, True

    # ----- acting -----------------------------------------------------------------

    @torch.no_grad()
    def actor_actions(self, obs_batch: np.ndarray) -> np.ndarray:
        """The actor's actions ``mu(s) = tanh(actor(s))``, ``float32 [B, A]`` in [-1, 1]."""
        obs = torch.from_numpy(np.asarray(obs_batch, dtype=np.float32)).to(self.device)
        return torch.tanh(self.model.actor_outputs(obs)).cpu().numpy()

    @torch.no_grad()
    def critic_values(self, obs_batch: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """Every critic's ``Q(s, a)``, ``float32 [C, B]``."""
        obs = torch.from_numpy(np.asarray(obs_batch, dtype=np.float32)).to(self.device)
        act = torch.from_numpy(np.asarray(actions, dtype=np.float32)).to(self.device)
        return self.model.critic_values(obs, act).cpu().numpy()

    # ----- learning ---------------------------------------------------------------

    def draw_target_noise(self, actions: torch.Tensor) -> torch.Tensor:
        """A standard-normal draw of ``actions``' shape from the policy's own generator
        (tests replace it with a fixed draw)."""
        return torch.randn(actions.shape, generator=self.target_noise_generator, device=actions.device)

    def target_policy_noise(self, actions: torch.Tensor) -> torch.Tensor:
        """TD3's smoothing noise for the target actor's ``actions``:
        ``clip(N(0, target_noise^2), -target_noise_clip, target_noise_clip)``."""
        clip = float(self.config["target_noise_clip"])
        return torch.clamp(self.draw_target_noise(actions) * float(self.config["target_noise"]), -clip, clip)

    def loss(self, train_batch: dict[str, torch.Tensor]
             ) -> tuple[tuple[torch.Tensor, torch.Tensor], dict[str, torch.Tensor]]:
        """``((actor_loss, critic_loss), stats)``, one loss per optimizer, in their order."""
        cfg = self.config
        obs, actions = train_batch[B.OBS], train_batch[B.ACTIONS].float()
        # Actor: maximise Q(s, mu(s)) of the first critic (the deterministic policy gradient),
        # computed only on the steps the actor takes (TD3's policy_delay rests it between).
        actor_steps = self.stepping(0)
        if actor_steps:
            policy_t = torch.tanh(self.model.actor_outputs(obs))
            actor_loss = -self.model.critic_values(obs, policy_t, frozen=True, first_only=True)[0].mean()
        else:
            actor_loss = torch.zeros((), device=self.device)

        # Critics: regress Q_j(s, a) on y = R^(n) + gamma^n * (1 - terminated) * Q'(s', a').
        q_t = self.model.critic_values(obs, actions)  # [C, B]
        with torch.no_grad():
            next_obs = train_batch[B.NEXT_OBS]
            policy_tp1 = torch.tanh(self.target_model.actor_outputs(next_obs))
            if cfg["smooth_target_policy"]:
                # a' = clip(mu'(s') + clip(eps, -c, c), -1, 1): a smoother target.
                policy_tp1 = torch.clamp(policy_tp1 + self.target_policy_noise(policy_tp1), -1.0, 1.0)
            q_tp1 = self.target_model.critic_values(next_obs, policy_tp1)
            # Clipped double Q: the smaller of the twin targets.
            q_tp1_best = q_tp1.min(dim=0).values if cfg["twin_q"] else q_tp1[0]
            not_done = 1.0 - train_batch[B.TERMINATEDS].float()
            target = train_batch[B.REWARDS] + train_batch[B.DISCOUNTS] * not_done * q_tp1_best
        td = q_t - target  # [C, B]
        if cfg["use_huber"]:
            errors = F.huber_loss(q_t, target.expand_as(q_t), reduction="none", delta=float(cfg["huber_threshold"]))
        else:
            errors = 0.5 * td**2
        # Importance weights of prioritized replay; each critic's error counts once.
        critic_loss = torch.mean(train_batch[B.WEIGHTS] * errors.sum(dim=0))
        l2_reg = cfg["l2_reg"]
        if l2_reg:
            if actor_steps:
                actor_loss = actor_loss + l2_reg * l2_loss(_kernels(self.model.actor))
            critic_loss = critic_loss + l2_reg * l2_loss(_kernels(self.model.critics))
        stats = {
            **({"actor_loss": actor_loss} if actor_steps else {}),
            "critic_loss": critic_loss,
            "mean_q": q_t[0].mean(),
            "max_q": q_t[0].max(),
            "min_q": q_t[0].min(),
            "mean_td_error": td.sum(dim=0).mean(),
            # 1.13's priorities: the critics' TD errors summed.
            "td_error": td.sum(dim=0).detach(),
        }
        return (actor_loss, critic_loss), stats

    def update_target(self, tau: float | None = None) -> None:
        """Polyak averaging of the target actor and critics: ``target <- tau * online +
        (1 - tau) * target`` (``tau`` from the config; 1.0 copies)."""
        tau = float(self.config["tau"] if tau is None else tau)
        online = list(self.model.parameters())
        target = list(self.target_model.parameters())
        if tau == 1.0:
            torch._foreach_copy_(target, online)
        else:
            torch._foreach_lerp_(target, online, tau)

    # ----- weights and state ------------------------------------------------------

    def get_weights(self) -> dict[str, np.ndarray]:
        return self.model.get_canonical_weights()

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        self.model.set_canonical_weights(weights)

    def get_state(self) -> PolicyState:
        state = super().get_state()
        state.update(target_state(self.target_model.get_canonical_weights()))
        state["target_noise_rng"] = encode_json(self.target_noise_generator.get_state().tolist())
        return state

    def set_state(self, state: PolicyState) -> None:
        super().set_state(state)
        target = saved_target_weights(state)
        if target:
            self.target_model.set_canonical_weights(target)
        else:
            self.update_target(tau=1.0)
        if "target_noise_rng" in state:
            saved = torch.tensor(decode_json(state["target_noise_rng"]), dtype=torch.uint8)
            if saved.numel() == self.target_noise_generator.get_state().numel():
                self.target_noise_generator.set_state(saved)


def _kernels(module: torch.nn.Module) -> list[torch.nn.Parameter]:
    # The weights L2 regularisation covers: kernels, not biases (1.13's rule).
    return [param for name, param in module.named_parameters() if "bias" not in name]
