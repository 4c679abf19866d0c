"""APPO's loss in torch: PPO's clipped surrogate on IMPALA's fragments, against a target
network with V-trace (1.13's APPO; Luo et al. 2020, "IMPACT")."""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import torch

from rlstack.policies.policy import saved_target_weights, target_state
from rlstack.policies.postprocessing import adapt_kl_coeff
from rlstack.policies.torch_policy import load_model_weights, model_weights
from rlstack.sample_batch import SampleBatch
from rlstack.trainers.appo.appo import postprocess_appo
from rlstack.trainers.impala.fragments import VALID
from rlstack.trainers.impala.impala_torch_policy import ImpalaTorchPolicy, to_time_major
from rlstack.trainers.impala.vtrace_torch import vtrace

# vtrace: the behaviour/target importance weight mu / pi_target in the ratio is clipped to
# [0, IS_RATIO_MAX] (1.13's bound), so a worker far behind cannot blow the ratio up.
IS_RATIO_MAX = 2.0


class APPOTorchPolicy(ImpalaTorchPolicy):
    """APPO in torch; the loss equals :class:`APPOTFPolicy`'s to float32 rounding.

    Batch layout and optimizer as IMPALA's (whole fragments in row order, ``valid``
    marking real rows). ``target_model`` is a frozen copy of the model that
    :meth:`update_target` refreshes (the trainer calls it every
    ``target_update_frequency`` learner steps).
    """

    # The target network would have to run over whole sequences as well.
    supports_recurrent_models = False

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict, num_gpus: float = 0,
                 sampling_seed: int | None = None) -> None:
        super().__init__(observation_space, action_space, config, num_gpus, sampling_seed)
        self.kl_coeff = float(config["kl_coeff"])
        self.target_model = copy.deepcopy(self.model)
        self.target_model.requires_grad_(False)
        extra = (SampleBatch.ACTION_DIST_INPUTS,) if config["vtrace"] else (
            SampleBatch.ACTION_DIST_INPUTS, SampleBatch.ADVANTAGES, SampleBatch.VALUE_TARGETS)
        self.loss_columns = (*ImpalaTorchPolicy.loss_columns, *extra)

    def postprocess_trajectory(self, batch: SampleBatch) -> SampleBatch:
        return postprocess_appo(batch, self.config)

    def loss(self, train_batch: dict[str, torch.Tensor]
             ) -> tuple[torch.Tensor | tuple[torch.Tensor, torch.Tensor], dict[str, torch.Tensor]]:
        cfg = self.config
        dist_inputs, values = self.model_outputs(train_batch)
        dist = self.action_dist(dist_inputs)
        behaviour_dist = self.action_dist(train_batch[SampleBatch.ACTION_DIST_INPUTS])
        actions = train_batch[SampleBatch.ACTIONS]
        logp, behaviour_logp = dist.logp(actions), train_batch[SampleBatch.ACTION_LOGP]
        entropy = dist.entropy()
        valid = train_batch[VALID]
        stats: dict[str, torch.Tensor] = {}

        if cfg["vtrace"]:
            T, gamma = int(cfg["rollout_fragment_length"]), float(cfg["gamma"])
            with torch.no_grad():
                target_dist = self.action_dist(self.target_model.policy_and_value(train_batch[SampleBatch.OBS])[0])
                target_logp = target_dist.logp(actions)
            kl = target_dist.kl(dist)  # KL(pi_target || pi)
            logp, behaviour_logp, target_logp, values, entropy, kl, valid = (
                to_time_major(x, T) for x in (logp, behaviour_logp, target_logp, values, entropy, kl, valid))
            terminateds = to_time_major(train_batch[SampleBatch.TERMINATEDS], T)
            truncateds = to_time_major(train_batch[SampleBatch.TRUNCATEDS], T)
            rewards = to_time_major(train_batch[SampleBatch.REWARDS], T)
            # As IMPALA's: gamma_t = 0 at an episode end, a time-limit end adds gamma V(x_final).
            discounts = gamma * (~(terminateds | truncateds)).float()
            rewards = rewards + gamma * truncateds.float() * to_time_major(train_batch[SampleBatch.BOOTSTRAP_VALUE], T)
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
            is_ratio = torch.clamp(torch.exp(behaviour_logp - target_logp), 0.0, IS_RATIO_MAX)
            ratio = is_ratio * torch.exp(logp - behaviour_logp)
            value_targets = vs
        else:
            kl = behaviour_dist.kl(dist)  # KL(mu || pi)
            advantages = train_batch[SampleBatch.ADVANTAGES]
            ratio = torch.exp(logp - behaviour_logp)
            value_targets = train_batch[SampleBatch.VALUE_TARGETS]

        count = valid.sum().clamp(min=1.0)

        def mean(x: torch.Tensor) -> torch.Tensor:  # over real rows (multi-agent padding left out)
            return (x * valid).sum() / count

        pg_loss1 = advantages * ratio
        pg_loss2 = advantages * torch.clamp(ratio, 1.0 - cfg["clip_param"], 1.0 + cfg["clip_param"])
        policy_loss = -mean(torch.min(pg_loss1, pg_loss2))
        vf_loss = 0.5 * mean((values - value_targets) ** 2)
        mean_entropy = mean(entropy)
        separate = cfg["_separate_vf_optimizer"]
        # With _separate_vf_optimizer the value loss is a loss of its own (1.13's APPO).
        total_loss = policy_loss - self.entropy_coeff * mean_entropy if separate else (
            policy_loss + cfg["vf_loss_coeff"] * vf_loss - self.entropy_coeff * mean_entropy)
        if cfg["use_kl_loss"]:
            mean_kl = mean(kl)
            total_loss = total_loss + self.kl_coeff * mean_kl
            stats.update(kl=mean_kl, KL_Coeff=torch.tensor(self.kl_coeff, device=mean_kl.device))
        if cfg["vtrace"]:
            is_mean = mean(is_ratio)
            stats.update(mean_IS=is_mean, var_IS=mean((is_ratio - is_mean) ** 2))
        explained = 1.0 - mean((value_targets - values - mean(value_targets - values)) ** 2) / (
            mean((value_targets - mean(value_targets)) ** 2).clamp(min=1e-8))
        stats.update(total_loss=total_loss, policy_loss=policy_loss, vf_loss=vf_loss, entropy=mean_entropy,
                     vf_explained_var=explained.detach())
        return ((total_loss, vf_loss) if separate else total_loss), stats

    def update_target(self, kl: float | None = None) -> None:
        """Copies the model's weights into the target network and, with ``use_kl_loss``,
        adapts ``kl_coeff`` to ``kl`` (the last train batch's KL)."""
        self.target_model.load_state_dict(self.model.state_dict())
        if self.config["use_kl_loss"] and kl is not None:
            self.kl_coeff = adapt_kl_coeff(self.kl_coeff, float(kl), self.config["kl_target"])

    def after_learn(self, stats: dict[str, float]) -> dict[str, float]:
        return {"entropy_coeff": self.entropy_coeff}

    def get_state(self) -> dict[str, np.ndarray]:
        state = super().get_state()
        state.update(target_state(model_weights(self.target_model)))
        state["kl_coeff"] = np.asarray(self.kl_coeff, dtype=np.float64)
        return state

    def set_state(self, state: dict[str, np.ndarray]) -> None:
        super().set_state(state)
        target = saved_target_weights(state)
        if target:
            load_model_weights(self.target_model, target)
        else:
            self.target_model.load_state_dict(self.model.state_dict())
        if "kl_coeff" in state:
            self.kl_coeff = float(state["kl_coeff"])


# RLlib 1.13's name (`ray.rllib.agents.ppo.appo_torch_policy.AsyncPPOTorchPolicy`).
AsyncPPOTorchPolicy = APPOTorchPolicy
