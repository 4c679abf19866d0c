"""DQN's loss in torch: double Q, dueling, n-step targets, importance weights, Huber;
with ``num_atoms > 1`` the distributional (C51) cross-entropy.

Mnih et al. 2015 (target network, Huber loss), van Hasselt et al. 2016 (double Q),
Wang et al. 2016 (dueling heads, in the model), Schaul et al. 2016 (importance weights),
Bellemare et al. 2017 (C51), Fortunato et al. 2018 (noisy heads, in the model).
"""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F

from rlstack.models.specs import QModelSpec
from rlstack.models.torch.model import TorchQModel
from rlstack.policies.policy import saved_target_weights, target_state
from rlstack.policies.torch_policy import TorchPolicy, load_model_weights, model_weights
from rlstack.sample_batch import SampleBatch
from rlstack.trainers.dqn.dqn_policy import (Q_TP1_BEST, act_on_q_values, adapt_parameter_noise, check_rainbow_model,
                                            make_exploration, postprocess_q_learning, q_model_kwargs, q_model_spec,
                                            uses_rainbow_heads)


def project_distribution(rewards: torch.Tensor, bootstrap: torch.Tensor, probs: torch.Tensor,
                         support: torch.Tensor) -> torch.Tensor:
    """The categorical projection of C51 (Bellemare et al. 2017, algorithm 1).

    Each atom ``z_j`` of the next state's distribution ``probs [B, N]`` moves to
    ``Tz_j = r + bootstrap * z_j`` (``bootstrap = gamma^k (1 - terminated)``), clipped to
    ``[v_min, v_max]``, and its mass is split between the two support points around it
    in proportion to closeness (all of it to ``z_i`` when ``Tz_j`` lands on ``z_i``).

    Returns:
        The target distribution ``m [B, N]`` on ``support``.
    """
    num_atoms = support.numel()
    v_min, v_max = support[0], support[-1]
    delta_z = (v_max - v_min) / (num_atoms - 1)
    tz = (rewards[:, None] + bootstrap[:, None] * support[None, :]).clamp(v_min, v_max)
    b = (tz - v_min) / delta_z
    lower, upper = b.floor(), b.ceil()
    mass_lower = probs * (upper - b + (lower == upper).float())
    mass_upper = probs * (b - lower)
    # Rounding can put b a hair above N - 1 (ceil N): clamp the index, the mass is right.
    m = torch.zeros_like(probs)
    m.scatter_add_(1, lower.long().clamp(0, num_atoms - 1), mass_lower)
    m.scatter_add_(1, upper.long().clamp(0, num_atoms - 1), mass_upper)
    return m


class DQNTorchPolicy(TorchPolicy):
    """DQN in torch; the loss equals :class:`DQNTFPolicy`'s to float32 rounding.

    ``learn_on_batch`` takes one Adam step per ``train_batch_size`` rows, in order, and
    returns ``td_error`` (one per row, from the step that used the row) for the replay
    priorities.
    """

    model_class = TorchQModel
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
        # The target network: a frozen copy, refreshed by update_target().
        self.target_model = copy.deepcopy(self.model)
        self.target_model.requires_grad_(False)
        # ParameterNoise's perturbed acting copy (made on first use); learning never sees it.
        self.perturbed_model: torch.nn.Module | None = None

    def model_spec(self) -> QModelSpec:
        return q_model_spec(self)

    def custom_model_kwargs(self, model_class: type) -> dict:
        # 1.13's Q-model base (a custom model's forward gives an embedding; the base
        # adds the Q-head) takes the DQN config's head keys.
        from rlstack.trainers.dqn.dqn_torch_model import DQNTorchModel

        return q_model_kwargs(self.config) if issubclass(model_class, DQNTorchModel) else {}

    def bind_worker(self, worker_index: int, num_workers: int) -> None:
        super().bind_worker(worker_index, num_workers)
        self.exploration = make_exploration(self)

    # ----- acting -----------------------------------------------------------------

    def q_values(self, obs_batch: np.ndarray, noise: bool = True) -> np.ndarray:
        """``Q(s, .)`` as ``float32 [B, num_actions]`` (``noise``: draw noisy layers' noise)."""
        with torch.no_grad():
            obs = torch.from_numpy(np.asarray(obs_batch, dtype=np.float32)).to(self.device)
            if uses_rainbow_heads(self.config):
                return self.model.q_values(obs, noise).cpu().numpy()
            return self.model.q_values(obs).cpu().numpy()

    def load_perturbed_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Loads ParameterNoise's perturbed weights into the acting copy of the network."""
        if self.perturbed_model is None:
            self.perturbed_model = copy.deepcopy(self.model)
            self.perturbed_model.requires_grad_(False)
        load_model_weights(self.perturbed_model, weights)

    @torch.no_grad()
    def perturbed_q_values(self, obs_batch: np.ndarray) -> np.ndarray:
        """``Q(s, .)`` of the perturbed copy, ``float32 [B, num_actions]``."""
        obs = torch.from_numpy(np.asarray(obs_batch, dtype=np.float32)).to(self.device)
        return self.perturbed_model.q_values(obs).cpu().numpy()  # type: ignore[union-attr]

    def compute_actions(self, obs_batch: np.ndarray, explore: bool | None = None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        return act_on_q_values(self, obs_batch, explore)

    def compute_values(self, obs_batch: np.ndarray) -> np.ndarray:
        return self.q_values(obs_batch).max(axis=1)

    def q_logits(self, obs_batch: np.ndarray) -> np.ndarray:
        """The built-in heads' outputs ``[B, num_actions, num_atoms]`` (noise drawn)."""
        with torch.no_grad():
            obs = torch.from_numpy(np.asarray(obs_batch, dtype=np.float32)).to(self.device)
            return self.model.q_logits(obs).cpu().numpy()

    def postprocess_trajectory(self, batch: SampleBatch) -> SampleBatch:
        adapt_parameter_noise(self, batch)
        return postprocess_q_learning(batch, self.config, self.q_values, self.q_logits)

    # ----- learning ---------------------------------------------------------------

    def minibatch_plan(self, n: int) -> tuple[int, int]:
        if self._plan_override is not None:  # an execution plan's TrainOneStep arguments
            return super().minibatch_plan(n)
        # The trainer hands over k * train_batch_size replayed rows for k gradient steps
        # at once (training_intensity): one Adam step per train_batch_size rows, in order.
        return min(int(self.config["train_batch_size"]), n), 1

    def prepare_batch(self, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        # The target network stays fixed within learn_on_batch, so without double Q
        # (which needs each step's online network) the targets of all k steps come from
        # one forward pass.
        if not self.config["double_q"] and self.config["num_atoms"] == 1:
            tensors = {**tensors, Q_TP1_BEST: self._q_tp1_best(tensors[SampleBatch.NEXT_OBS])}
        return tensors

    @torch.no_grad()
    def _q_tp1_best(self, next_obs: torch.Tensor) -> torch.Tensor:
        """``Q'(s', a*)``: the target network's value of the best next action."""
        q_tp1_target = self.target_model.q_values(next_obs)
        if self.config["double_q"]:
            # Double Q: the online network picks a*, the target network rates it.
            best_actions = self.model.q_values(next_obs).argmax(dim=1)
        else:
            best_actions = q_tp1_target.argmax(dim=1)
        return q_tp1_target.gather(1, best_actions[:, None]).squeeze(1)

    @torch.no_grad()
    def _probs_tp1_best(self, next_obs: torch.Tensor) -> torch.Tensor:
        """``p'(s', a*)`` ``[B, N]``: the target network's distribution at the best next action."""
        logits_tp1_target = self.target_model.q_logits(next_obs)
        support = torch.as_tensor(self.model.spec.support, device=next_obs.device)
        if self.config["double_q"]:
            # Double Q: the online network picks a*, the target network's distribution rates it.
            best_actions = self.model.q_values(next_obs).argmax(dim=1)
        else:
            best_actions = (torch.softmax(logits_tp1_target, dim=2) * support).sum(dim=2).argmax(dim=1)
        return torch.softmax(logits_tp1_target[torch.arange(len(best_actions)), best_actions], dim=1)

    def distributional_loss(self, train_batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """C51: the cross-entropy between the projected target distribution and
        ``p(s, a)``, weighted by the importance weights; the per-row cross-entropy is the
        TD error for the replay priorities (as 1.13)."""
        support = torch.as_tensor(self.model.spec.support, device=self.device)
        logits_t = self.model.q_logits(train_batch[SampleBatch.OBS])
        actions = train_batch[SampleBatch.ACTIONS].long()
        logits_t_selected = logits_t[torch.arange(len(actions)), actions]
        with torch.no_grad():
            not_done = 1.0 - train_batch[SampleBatch.TERMINATEDS].float()
            # m = Phi(R^(n) + gamma^k (1 - terminated) z) under p'(s_{t+k}, a*)
            bootstrap = train_batch[SampleBatch.DISCOUNTS] * not_done
            target = project_distribution(train_batch[SampleBatch.REWARDS], bootstrap,
                                          self._probs_tp1_best(train_batch[SampleBatch.NEXT_OBS]), support)
        cross_entropy = -(target * F.log_softmax(logits_t_selected, dim=1)).sum(dim=1)
        loss = (train_batch[SampleBatch.WEIGHTS] * cross_entropy).mean()
        cross_entropy = cross_entropy.detach()
        q_t_selected = (torch.softmax(logits_t_selected.detach(), dim=1) * support).sum(dim=1)
        min_q, max_q = torch.aminmax(q_t_selected)
        return loss, {"loss": loss, "mean_q": q_t_selected.mean(), "min_q": min_q, "max_q": max_q,
                      "mean_td_error": cross_entropy.mean(), "td_error": cross_entropy}

    def loss(self, train_batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        if self.config["num_atoms"] > 1:
            return self.distributional_loss(train_batch)
        q_t = self.model.q_values(train_batch[SampleBatch.OBS])
        actions = train_batch[SampleBatch.ACTIONS].long()
        q_t_selected = q_t.gather(1, actions[:, None]).squeeze(1)
        with torch.no_grad():
            q_tp1_best = train_batch.get(Q_TP1_BEST)  # from prepare_batch, when it could
            if q_tp1_best is None:
                q_tp1_best = self._q_tp1_best(train_batch[SampleBatch.NEXT_OBS])
            # y = R^(n) + gamma^k * (1 - terminated) * Q'(s_{t+k}, a*)
            not_done = 1.0 - train_batch[SampleBatch.TERMINATEDS].float()
            target = train_batch[SampleBatch.REWARDS] + train_batch[SampleBatch.DISCOUNTS] * not_done * q_tp1_best
        td_error = q_t_selected - target
        loss = (train_batch[SampleBatch.WEIGHTS] * F.huber_loss(q_t_selected, target, reduction="none", delta=1.0)).mean()
        # Statistics of detached tensors: no autograd bookkeeping for them on every step.
        q_t_selected, td_error = q_t_selected.detach(), td_error.detach()
        min_q, max_q = torch.aminmax(q_t_selected)
        stats = {
            "loss": loss,
            "mean_q": q_t_selected.mean(),
            "min_q": min_q,
            "max_q": max_q,
            "mean_td_error": td_error.mean(),
            "td_error": td_error,
        }
        return loss, stats

    def update_target(self) -> None:
        """Copies the online network's weights into the target network."""
        self.target_model.load_state_dict(self.model.state_dict())

    # ----- state ------------------------------------------------------------------

    def get_state(self) -> dict[str, np.ndarray]:
        state = super().get_state()
        target = model_weights(self.target_model)
        state.update(target_state(target))
        return state

    def set_state(self, state: dict[str, np.ndarray]) -> None:
        super().set_state(state)
        target = saved_target_weights(state)
        if not target:
            self.update_target()
        else:
            load_model_weights(self.target_model, target)
