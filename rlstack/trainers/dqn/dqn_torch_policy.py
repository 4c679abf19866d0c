"""DQN's loss in torch: double Q, dueling, n-step targets, importance weights, Huber.

Mnih et al. 2015 (target network, Huber loss), van Hasselt et al. 2016 (double Q),
Wang et al. 2016 (dueling heads, in the model), Schaul et al. 2016 (importance weights).
"""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F

from rlstack.models.catalog import QModelSpec
from rlstack.models.torch.model import TorchQModel
from rlstack.policies.torch_policy import TorchPolicy, load_model_weights, model_weights
from rlstack.sample_batch import SampleBatch
from rlstack.trainers.dqn.q_learning import (Q_TP1_BEST, act_on_q_values, make_exploration, postprocess_q_learning,
                                            q_model_spec)


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
        self.exploration = make_exploration(self)
        # The target network: a frozen copy, refreshed by update_target().
        self.target_model = copy.deepcopy(self.model)
        self.target_model.requires_grad_(False)

    def model_spec(self) -> QModelSpec:
        return q_model_spec(self)

    def bind_worker(self, worker_index: int, num_workers: int) -> None:
        super().bind_worker(worker_index, num_workers)
        self.exploration = make_exploration(self)

    # ----- acting -----------------------------------------------------------------

    def q_values(self, obs_batch: np.ndarray) -> np.ndarray:
        """``Q(s, .)`` as ``float32 [B, num_actions]``."""
        with torch.no_grad():
            obs = torch.from_numpy(np.asarray(obs_batch, dtype=np.float32)).to(self.device)
            return self.model.q_values(obs).cpu().numpy()

    def compute_actions(self, obs_batch: np.ndarray, explore: bool | None = None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        return act_on_q_values(self, self.exploration, self.q_values(obs_batch), explore)

    def compute_values(self, obs_batch: np.ndarray) -> np.ndarray:
        return self.q_values(obs_batch).max(axis=1)

    def postprocess_trajectory(self, batch: SampleBatch) -> SampleBatch:
        return postprocess_q_learning(batch, self.config, self.q_values)

    # ----- learning ---------------------------------------------------------------

    def minibatch_plan(self, n: int) -> tuple[int, int]:
        # The trainer hands over k * train_batch_size replayed rows for k gradient steps
        # at once (training_intensity): one Adam step per train_batch_size rows, in order.
        return min(int(self.config["train_batch_size"]), n), 1

    def prepare_batch(self, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        # The target network stays fixed within learn_on_batch, so without double Q
        # (which needs each step's online network) the targets of all k steps come from
        # one forward pass.
        if not self.config["double_q"]:
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

    def loss(self, train_batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
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
        state.update({f"target/{name}": value for name, value in target.items()})
        return state

    def set_state(self, state: dict[str, np.ndarray]) -> None:
        super().set_state(state)
        target = {key[len("target/"):]: value for key, value in state.items() if key.startswith("target/")}
        if not target:
            self.update_target()
        else:
            load_model_weights(self.target_model, target)
