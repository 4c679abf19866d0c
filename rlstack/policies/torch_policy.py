"""TorchPolicy: the torch base of every algorithm's torch policy.

It owns the model, the action distribution, device placement, acting, weights and
state. The learner loop it inherits from :class:`~rlstack.policies.torch_learner.TorchLearner`
(``torch_learner.py``): the optimizers, ``learn_on_batch``, ``compute_gradients`` /
``apply_gradients`` and the hooks an algorithm overrides besides ``loss()``.

``self.model`` is always a ModelV2 (``models/modelv2.py``): the built-in
:class:`TorchModel`, a user's 1.13-style ``TorchModelV2``, or a shortcut module wrapped
in :class:`ShortcutTorchModel`. Policies call it through ``policy_and_value(obs)`` /
``value(obs)`` / ``q_values(obs)`` on flat observations; a model's ``custom_loss`` is
added through :meth:`TorchPolicy.model_loss` and its ``metrics()`` are reported beside
the learner stats.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rlstack.models.specs import initial_weights
from rlstack.models.modelv2 import ModelV2, model_obs_space
from rlstack.models.torch.distributions import DISTRIBUTIONS
from rlstack.models.torch.model import TorchModel
from rlstack.models.torch.torch_action_dist import TorchDistributionWrapper
from rlstack.models.torch.torch_modelv2 import ShortcutTorchModel
from rlstack.policies.learner_loop import load_optimizers_state, optimizers_state
from rlstack.policies.policy import PolicyState, decode_json, encode_json
from rlstack.policies.rnn_sequencing import SEQ_MASK, SEQ_START, is_per_sequence, state_in_key, state_out_key
# Re-exported: the algorithm policies import these from here, as before the learner loop
# moved to torch_learner.py.
from rlstack.policies.torch_learner import GradFn, Optimizer, StepRecord, TorchLearner  # noqa: F401
from rlstack.policies.torch_optimizers import Adam, RMSProp, check_finite_update, clip_grad_norm  # noqa: F401
from rlstack.sample_batch import SampleBatch

logger = logging.getLogger(__name__)


def model_weights(model: ModelV2) -> dict[str, np.ndarray]:
    """A model's weights as numpy copies: the canonical layout for built-in models, the
    ``state_dict`` otherwise (a shortcut model's own, so its keys are the user's)."""
    if isinstance(model, TorchModel):
        return model.get_canonical_weights()
    module = model.wrapped if isinstance(model, ShortcutTorchModel) else model
    return {name: value.detach().cpu().numpy().copy() for name, value in module.state_dict().items()}


def load_model_weights(model: ModelV2, weights: dict[str, np.ndarray]) -> None:
    """Loads weights from :func:`model_weights` into ``model`` (on its device)."""
    if isinstance(model, TorchModel):
        model.set_canonical_weights(weights)
        return
    module = model.wrapped if isinstance(model, ShortcutTorchModel) else model
    # np.array copies: arrays from Ray's object store are read-only.
    module.load_state_dict({name: torch.from_numpy(np.array(v)) for name, v in weights.items()})


def pick_device(num_gpus: float, fake_gpus: bool = False) -> torch.device:
    """``cuda:0`` when GPUs are asked for and visible, else the CPU (with a warning unless
    ``fake_gpus``, which keeps a GPU config on the CPU on purpose).

    Under Ray, ``cuda:0`` is the GPU Ray assigned to this process (Ray sets
    ``CUDA_VISIBLE_DEVICES``).
    """
    if num_gpus and num_gpus > 0 and not fake_gpus:
        if torch.cuda.is_available():
            return torch.device("cuda:0")
        logger.warning("num_gpus=%s but torch sees no GPU; the policy runs on the CPU.", num_gpus)
    return torch.device("cpu")


class TorchPolicy(TorchLearner):
    """Base class of torch policies: subclass it and implement :meth:`~TorchLearner.loss`.

    Args:
        observation_space: The env's observation space.
        action_space: The env's action space.
        config: The trainer's merged config.
        num_gpus: GPUs this copy may use.
    """

    framework = "torch"

    @staticmethod
    def pin_threads(config: dict) -> None:
        """One intra-op thread in each rollout worker: workers share the machine's cores
        with each other and the learner."""
        torch.set_num_threads(1)

    # The ModelV2 class built from model_spec() for built-in models.
    attention_model_class = "rlstack.models.torch.attention_net:AttentionWrapper"
    model_class: type[TorchModel] = TorchModel

    def __init__(
        self, observation_space: gym.Space, action_space: gym.Space, config: dict, num_gpus: float = 0,
        sampling_seed: int | None = None,
    ) -> None:
        super().__init__(observation_space, action_space, config, num_gpus, sampling_seed)
        self.device = pick_device(num_gpus, bool(config.get("_fake_gpus")))
        self.sampling_generator = torch.Generator(device=self.device)
        if sampling_seed is None:
            self.sampling_generator.seed()
        else:
            self.sampling_generator.manual_seed(int(sampling_seed))
        custom = self.make_custom_model()
        if custom is not None:
            if not isinstance(custom, torch.nn.Module):
                raise TypeError(
                    f"custom_model {type(custom).__name__} is a ModelV2 but not a torch.nn.Module; torch policies "
                    "need class MyModel(TorchModelV2, nn.Module) (or framework='tf' for a TFModelV2).")
            self.model: ModelV2 = custom
            self.builtin_model = False
        else:
            spec = self.model_spec()
            model_class = self.model_class
            if spec.lstm is not None:
                from rlstack.models.torch.recurrent_net import TorchLSTMModel

                model_class = TorchLSTMModel
            self.model = model_class(spec, model_obs_space(observation_space), action_space)
            self.model.set_canonical_weights(initial_weights(spec, config.get("seed")))
            self.builtin_model = True
        self.model.to(self.device)
        # Acting mode (dropout off, is_training False) until learn_on_batch switches it.
        self.model.eval()
        # Built-in distributions take the catalog's spec; a custom one (classic RLlib's
        # interface) takes the model.
        if self.dist_spec.custom_class is not None:
            self.dist_class, self._dist_arg = self.dist_spec.custom_class, self.model
        else:
            self.dist_class, self._dist_arg = DISTRIBUTIONS[self.dist_spec.kind], self.dist_spec
        self._init_learner(config)

    def wrap_in_lstm(self, model: ModelV2, num_outputs: int) -> ModelV2:
        """See :meth:`Policy.wrap_in_lstm`: a :class:`LSTMAroundModel`."""
        from rlstack.models.torch.recurrent_net import LSTMAroundModel

        return LSTMAroundModel(model, model_obs_space(self.observation_space), self.action_space, num_outputs,
                               self.config.get("model", {}), "model")

    def adapt_shortcut_model(self, model: Any) -> ModelV2:
        """Wraps a shortcut custom model (an ``nn.Module`` called on flat observations that
        returns ``(dist_inputs, values)``) in :class:`ShortcutTorchModel`.

        Raises:
            TypeError: If the model is not an ``nn.Module``.
        """
        if not isinstance(model, torch.nn.Module):
            raise TypeError(
                f"custom_model built a {type(model).__name__}; torch policies need a TorchModelV2 (class MyModel("
                "TorchModelV2, nn.Module)) or a torch.nn.Module returning (dist_inputs, values) from flat "
                "observations.")
        return ShortcutTorchModel(model, model_obs_space(self.observation_space), self.action_space,
                                  self.dist_spec.num_outputs, self.config.get("model", {}))

    def action_dist(self, dist_inputs: torch.Tensor) -> TorchDistributionWrapper:
        """The action distribution over ``dist_inputs [B, num_outputs]`` (the built-in one,
        or ``model.custom_action_dist`` constructed as classic RLlib did, with the model)."""
        return self.dist_class(dist_inputs, self._dist_arg)

    def _flat_actions(self, parts: Any) -> torch.Tensor:
        # Nested per-row action tensors as one [B, width] tensor, in the space's leaf order.
        from rlstack.utils.spaces.space_utils import tree_leaves

        layout = self.dist_spec.layout
        leaves = tree_leaves(parts)
        dtype = torch.int64 if layout is not None and layout.discrete else torch.float32
        return torch.cat([leaf.reshape(len(leaf), -1).to(dtype) for leaf in leaves], dim=-1)

    def _sample(self, dist: TorchDistributionWrapper) -> torch.Tensor:
        # Built-in distributions draw from this policy's own generator; a custom one
        # (classic RLlib's sample() takes no argument) from torch's global generator.
        if self.dist_spec.custom_class is None:
            return dist.sample(self.sampling_generator)
        return dist.sample()

    # ----- acting -----------------------------------------------------------------

    def _explore(self, explore: bool | None) -> bool:
        return self.config.get("explore", True) if explore is None else bool(explore)

    def compute_actions(self, obs_batch: np.ndarray, explore: bool | None = None,
                        state_batches: list[np.ndarray] | None = None, prev_action_batch: Any = None,
                        prev_reward_batch: Any = None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        state_out: list[torch.Tensor] = []
        with torch.no_grad():
            obs = torch.from_numpy(np.asarray(obs_batch, dtype=np.float32)).to(self.device)
            if self.is_recurrent:
                dist_inputs, values, state_out = self._step(obs, state_batches, prev_action_batch, prev_reward_batch)
            else:
                dist_inputs, values = self.model.policy_and_value(obs)
            dist = self.action_dist(dist_inputs)
            actions = self._sample(dist) if self._explore(explore) else dist.deterministic_sample()
            if isinstance(actions, (tuple, list, dict)):
                # A custom distribution over a Tuple / Dict space samples its parts
                # (1.13's autoregressive one: (a1, a2)); rlstack keeps them flat.
                actions = self._flat_actions(actions)
            logp = dist.logp(actions)
        extras = {
            SampleBatch.ACTION_LOGP: logp.cpu().numpy(),
            SampleBatch.ACTION_DIST_INPUTS: dist_inputs.cpu().numpy(),
            SampleBatch.VF_PREDS: values.cpu().numpy(),
        }
        extras.update({state_out_key(i): value.cpu().numpy() for i, value in enumerate(state_out)})
        return actions.cpu().numpy(), extras

    def compute_values(self, obs_batch: np.ndarray, state_batches: list[np.ndarray] | None = None,
                       prev_action_batch: Any = None, prev_reward_batch: Any = None) -> np.ndarray:
        with torch.no_grad():
            obs = torch.from_numpy(np.asarray(obs_batch, dtype=np.float32)).to(self.device)
            if self.is_recurrent:
                return self._step(obs, state_batches, prev_action_batch, prev_reward_batch)[1].cpu().numpy()
            return self.model.value(obs).cpu().numpy()

    def _step(self, obs: torch.Tensor, state_batches: list[np.ndarray] | None, prev_action_batch: Any,
              prev_reward_batch: Any) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
        # One step of a recurrent model for a batch of rows (sequences of length 1).
        states = self.initial_state_batch(len(obs)) if state_batches is None else state_batches
        state = [torch.from_numpy(np.asarray(value, dtype=np.float32)).to(self.device) for value in states]
        seq_lens = torch.ones(len(obs), dtype=torch.int32, device=self.device)
        prev = self.prev_input_batches(len(obs), prev_action_batch, prev_reward_batch, trusted=True)
        return self.model.policy_and_value_rnn(obs, state, seq_lens, **{
            key: torch.from_numpy(value).to(self.device) for key, value in prev.items()})

    # ----- what losses read -------------------------------------------------------

    def unroll(self, train_batch: dict[str, torch.Tensor], reduce: str = "mean",
               ) -> tuple[dict[str, torch.Tensor], Callable]:
        """``(rows, reduce)`` for a loss: the minibatch's columns one row per step, and the
        mean (or, with ``reduce="sum"``, the sum) a loss term takes over them. For a
        recurrent model the minibatch holds padded sequences: step columns ``[S, T, ...]``
        become ``[S * T, ...]`` rows and the reduction counts only real steps
        (``seq_mask``); otherwise the batch and ``torch.mean`` / ``torch.sum``."""
        if not self.is_recurrent:
            return train_batch, torch.sum if reduce == "sum" else torch.mean
        rows = {key: value if is_per_sequence(key) else value.reshape(-1, *value.shape[2:])
                for key, value in train_batch.items()}
        mask = rows[SEQ_MASK]
        if reduce == "sum":
            return rows, lambda x: (x * mask).sum()
        count = mask.sum().clamp(min=1.0)
        return rows, lambda x: (x * mask).sum() / count

    def _outputs_in_row_order(self, rows: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        # Rows in their own order with seq_start marks: scatter them into padded
        # sequences [S * T], run the model from each sequence's first state_in, gather back.
        obs, start = rows[SampleBatch.OBS], rows[SEQ_START].bool()
        T = self.max_seq_len()
        seq_id = torch.cumsum(start.long(), 0) - 1
        first = torch.nonzero(start).squeeze(1)
        slot = seq_id * T + (torch.arange(len(obs), device=obs.device) - first[seq_id])
        padded = {key: value.new_zeros((len(first) * T, *value.shape[1:])).index_copy(0, slot, value)
                  for key, value in {SampleBatch.OBS: obs, **self.prev_rows(rows)}.items()}
        state = [rows[state_in_key(i)][first] for i in range(self.num_state_tensors())]
        seq_lens = torch.bincount(seq_id, minlength=len(first)).int()
        dist_inputs, values, _ = self.model.policy_and_value_rnn(padded.pop(SampleBatch.OBS), state, seq_lens,
                                                                 **padded)
        return dist_inputs[slot], values[slot]

    # ----- weights and state ------------------------------------------------------

    def get_weights(self) -> dict[str, np.ndarray]:
        return model_weights(self.model)

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        load_model_weights(self.model, weights)

    def shared_weights(self) -> dict[str, np.ndarray] | None:
        # Numpy views of the parameters: on the CPU, for models that can give them in the
        # canonical layout (the built-in actor-critic); an optimizer step updates them in place.
        views = getattr(self.model, "canonical_weight_views", None)
        return views() if views is not None and self.device.type == "cpu" else None

    def export_model(self, export_dir: str, onnx: int | None = None) -> str:
        self.refuse_recurrent_export()
        from rlstack.models.torch.export import export_torch_model

        return export_torch_model(self.model, self.preprocessor.size, export_dir, onnx)

    def get_state(self) -> PolicyState:
        state = super().get_state()
        state.update(optimizers_state(self.optimizers))
        state["num_grad_steps"] = np.asarray(self.num_grad_steps, dtype=np.int64)
        state["minibatch_rng"] = encode_json(self._rng.bit_generator.state)
        state["sampling_rng"] = self.sampling_generator.get_state().numpy()
        return state

    def set_state(self, state: PolicyState) -> None:
        super().set_state(state)
        load_optimizers_state(self.optimizers, state)
        if "num_grad_steps" in state:
            self.num_grad_steps = int(state["num_grad_steps"])
        if "minibatch_rng" in state:
            self._rng.bit_generator.state = decode_json(state["minibatch_rng"])
        if "sampling_rng" in state:
            saved = np.array(state["sampling_rng"], dtype=np.uint8)
            if saved.size == self.sampling_generator.get_state().numel():
                self.sampling_generator.set_state(torch.from_numpy(saved))
            else:
                # Saved on another device type (a CUDA generator's state is 16 bytes, a
                # CPU one's 5056): continue from a seed derived from it, deterministically.
                self.sampling_generator.manual_seed(int.from_bytes(hashlib.sha256(saved.tobytes()).digest()[:8], "little"))
        self.on_global_var_update(self.global_timestep)
