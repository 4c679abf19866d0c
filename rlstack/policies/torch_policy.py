"""TorchPolicy: the torch base of every algorithm's torch policy, and its learner loop.

It owns the model, the action distribution, device placement, acting, weights and
state, and the one learner loop of every torch algorithm: the optimizers (Adam, IMPALA's
RMSProp, written here on torch's kernels), :meth:`TorchPolicy.learn_on_batch`, and
:meth:`~TorchPolicy.compute_gradients` / :meth:`~TorchPolicy.apply_gradients`, which split
one step of it for A3C. An algorithm adds ``loss()`` and, where it needs them, the loop's
hooks:

* :meth:`~TorchPolicy.make_optimizers`: several optimizers, one per loss that ``loss()``
  returns (actor, critic, entropy coefficient);
* :meth:`~TorchPolicy.optimizer_step_mask`: which optimizers step at a gradient step
  (TD3's ``policy_delay``);
* :meth:`~TorchPolicy.after_gradient_step`: after every step (soft target updates);
* :meth:`~rlstack.policies.policy.Policy.minibatch_plan`, ``shuffle_minibatches`` and
  ``per_row_stats``: how the batch is cut, and statistics returned per row (TD errors);
* :meth:`~TorchPolicy.prepare_batch`: once per batch, before its steps;
* :meth:`~TorchPolicy.make_grad_fn`: a closed-form gradient in place of autograd (PPO's,
  ``models/torch/closed_form.py``);
* ``after_learn`` and ``on_global_var_update``: once per batch, and on schedules.

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
import math
from abc import abstractmethod
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rlstack.errors import NonFiniteError
from rlstack.models.modelv2 import ModelV2, model_obs_space
from rlstack.models.specs import initial_weights
from rlstack.models.torch.distributions import DISTRIBUTIONS
from rlstack.models.torch.model import TorchModel
from rlstack.models.torch.torch_action_dist import TorchDistributionWrapper
from rlstack.models.torch.torch_modelv2 import ShortcutTorchModel
from rlstack.policies.learner_loop import (
    as_losses, checked_optimizers, combine_microbatch_stats, grad_norm_key, load_optimizers_state, optimizers_state,
)
from rlstack.policies.policy import Policy, PolicyState, decode_json, encode_json
from rlstack.policies.rnn_sequencing import SEQ_MASK, SEQ_START, is_per_sequence, state_in_key, state_out_key
from rlstack.sample_batch import SampleBatch
from rlstack.utils.schedules import make_schedule
from rlstack.utils.threads import flush_denormals

# Subnormal floats flushed to zero before torch starts its intra-op threads, which copy
# their creator's mode (rlstack/utils/threads.py: why, and what trainer.stop() puts back).
flush_denormals()


def check_finite_update(optimizer: "Adam | RMSProp", loss: torch.Tensor | None = None,
                        grad_norm: torch.Tensor | None = None) -> None:
    """Raises before an update from a NaN or inf loss or gradient.

    With ``loss`` (and ``grad_norm``, where clipping computed it) only those scalars are
    read: one device sync on a GPU. Without either, the gradients themselves are checked
    (a norm per parameter), for callers that apply gradients computed elsewhere. A norm that
    overflows float32 (entries beyond ~1e19) counts as non-finite: such an update would
    wreck the weights just the same.

    Raises:
        NonFiniteError: Naming what was not finite; no parameter has been touched.
    """
    if loss is None and grad_norm is None:
        grads = [p.grad for p in optimizer.params if p.grad is not None]
        if not grads or bool(torch.isfinite(torch.stack(torch._foreach_norm(grads))).all()):
            return
        bad = [f"#{i} {list(g.shape)}" for i, g in enumerate(grads) if not bool(torch.isfinite(g).all())]
        what = f"gradients of parameters {', '.join(bad)}" if bad else "gradient norm (overflow)"
    else:
        values = {name: value for name, value in (("loss", loss), ("gradient norm", grad_norm)) if value is not None}
        # One read of the device for both scalars (one sync on a GPU): a NaN or inf in
        # either makes their sum NaN or inf.
        total = loss + grad_norm if loss is not None and grad_norm is not None else next(iter(values.values()))
        if bool(torch.isfinite(total).all()):
            return
        what = (" and ".join(f"{name} ({value.item()})" for name, value in values.items()
                             if not math.isfinite(value.item()))
                or " + ".join(values) + " (overflow)")
    raise NonFiniteError.in_update(what, f"a torch {type(optimizer).__name__} step", optimizer.lr)


class _ParamsOptimizer:
    """What the two optimizers share: the parameters they update, and dropping their
    gradients."""

    def __init__(self, params: list[torch.nn.Parameter]) -> None:
        self.params = list(params)

    def zero_grad(self) -> None:
        """Drops the parameters' gradients."""
        for p in self.params:
            p.grad = None


class Adam(_ParamsOptimizer):
    """Adam (Kingma & Ba 2015) over a list of parameters, the twin of tf_policy.Adam.

    ``torch.optim.Adam`` would do, but constructing any ``torch.optim`` optimizer imports
    torch's compiler stack (``torch._dynamo``, a second or more of start-up). This
    one calls the same fused kernel (``torch._fused_adam_``) directly, falling back to a
    plain implementation where the kernel is missing, and keeps its state in the same
    three slots per parameter: ``step``, ``exp_avg``, ``exp_avg_sq``.
    """

    def __init__(self, params: list[torch.nn.Parameter], lr: float, eps: float = 1e-8,
                 beta1: float = 0.9, beta2: float = 0.999) -> None:
        super().__init__(params)
        self.lr, self.eps, self.beta1, self.beta2 = float(lr), float(eps), beta1, beta2
        self.exp_avgs = [torch.zeros_like(p) for p in self.params]
        self.exp_avg_sqs = [torch.zeros_like(p) for p in self.params]
        # Each parameter's step count is a view into one vector, so that a step where every
        # parameter has a gradient counts them all with one op (not one per parameter).
        device = self.params[0].device if self.params else None
        self._all_steps = torch.zeros(len(self.params), dtype=torch.float32, device=device)
        self.steps = list(self._all_steps.unbind())
        self._fused = hasattr(torch, "_fused_adam_")

    @torch.no_grad()
    def step(self, loss: torch.Tensor | None = None, grad_norm: torch.Tensor | None = None,
             check_finite: bool = True) -> None:
        """Applies one update from the parameters' ``.grad``.

        Args:
            loss: The loss the gradients come from; checked instead of the gradients.
            grad_norm: Their global norm, if clipping computed it; checked too.
            check_finite: False where the caller has checked already (the learner loop
                checks every optimizer's loss before it steps any).

        Raises:
            NonFiniteError: If what is checked (see :func:`check_finite_update`) is NaN
                or inf; nothing is updated.
        """
        if check_finite:
            check_finite_update(self, loss, grad_norm)
        params, exp_avgs, exp_avg_sqs, steps = self.params, self.exp_avgs, self.exp_avg_sqs, self.steps
        every_grad = all(p.grad is not None for p in params)
        if not every_grad:
            # As torch.optim: a parameter the loss does not use (say, the value layers of
            # PPO with use_critic=False) keeps its weights and its moments.
            used = [i for i, p in enumerate(params) if p.grad is not None]
            params, exp_avgs, exp_avg_sqs, steps = ([values[i] for i in used]
                                                    for values in (params, exp_avgs, exp_avg_sqs, steps))
            if not params:
                return
        grads = [p.grad for p in params]
        if every_grad:
            self._all_steps.add_(1.0)
        else:
            torch._foreach_add_(steps, 1.0)
        if self._fused:
            torch._fused_adam_(params, grads, exp_avgs, exp_avg_sqs, [], steps, lr=self.lr,
                               beta1=self.beta1, beta2=self.beta2, weight_decay=0.0, eps=self.eps, amsgrad=False,
                               maximize=False)
            return
        for p, g, m, v, step in zip(params, grads, exp_avgs, exp_avg_sqs, steps):
            m.mul_(self.beta1).add_(g, alpha=1.0 - self.beta1)
            v.mul_(self.beta2).addcmul_(g, g, value=1.0 - self.beta2)
            correction1 = 1.0 - self.beta1 ** float(step)
            correction2 = 1.0 - self.beta2 ** float(step)
            denom = (v.sqrt() / correction2**0.5).add_(self.eps)
            p.addcdiv_(m, denom, value=-self.lr / correction1)

    def get_state(self) -> dict[str, np.ndarray]:
        """The step count and both moments per parameter, as numpy copies."""
        state = {}
        for i, (step, m, v) in enumerate(zip(self.steps, self.exp_avgs, self.exp_avg_sqs)):
            state[f"{i}/step"] = step.detach().cpu().numpy().copy()
            state[f"{i}/exp_avg"] = m.detach().cpu().numpy().copy()
            state[f"{i}/exp_avg_sq"] = v.detach().cpu().numpy().copy()
        return state

    @torch.no_grad()
    def set_state(self, state: dict[str, np.ndarray]) -> None:
        """Restores :meth:`get_state`."""
        for i, (step, m, v) in enumerate(zip(self.steps, self.exp_avgs, self.exp_avg_sqs)):
            step.copy_(torch.from_numpy(np.array(state[f"{i}/step"], dtype=np.float32)))
            m.copy_(torch.from_numpy(np.array(state[f"{i}/exp_avg"], dtype=np.float32)))
            v.copy_(torch.from_numpy(np.array(state[f"{i}/exp_avg_sq"], dtype=np.float32)))


class RMSProp(_ParamsOptimizer):
    """RMSProp as in the IMPALA paper's TF implementation (momentum form), the twin of
    tf_policy.RMSProp: ``ms = decay ms + (1 - decay) g^2``; ``mom = momentum mom +
    lr g / sqrt(ms + eps)``; ``w -= mom``. ``ms`` starts at 1 (TF1's RMSPropOptimizer).
    """

    def __init__(self, params: list[torch.nn.Parameter], lr: float, decay: float = 0.99, momentum: float = 0.0,
                 eps: float = 0.1) -> None:
        super().__init__(params)
        self.lr, self.decay, self.momentum, self.eps = float(lr), float(decay), float(momentum), float(eps)
        self.mean_squares = [torch.ones_like(p) for p in self.params]
        self.moments = [torch.zeros_like(p) for p in self.params]

    @torch.no_grad()
    def step(self, loss: torch.Tensor | None = None, grad_norm: torch.Tensor | None = None,
             check_finite: bool = True) -> None:
        """Applies one update from the parameters' ``.grad``; ``loss``, ``grad_norm`` and
        ``check_finite`` as in :meth:`Adam.step`.

        Raises:
            NonFiniteError: See :meth:`Adam.step`; nothing is updated.
        """
        if any(p.grad is None for p in self.params):
            raise RuntimeError("Every parameter needs a gradient before RMSProp.step(); is one unused by the loss?")
        if check_finite:
            check_finite_update(self, loss, grad_norm)
        for p, ms, mom in zip(self.params, self.mean_squares, self.moments):
            ms.mul_(self.decay).addcmul_(p.grad, p.grad, value=1.0 - self.decay)
            mom.mul_(self.momentum).add_(p.grad / torch.sqrt(ms + self.eps), alpha=self.lr)
            p.sub_(mom)

    def get_state(self) -> dict[str, np.ndarray]:
        """Mean squares and momentum buffers per parameter, as numpy copies."""
        state = {}
        for i, (ms, mom) in enumerate(zip(self.mean_squares, self.moments)):
            state[f"{i}/mean_square"] = ms.detach().cpu().numpy().copy()
            state[f"{i}/momentum"] = mom.detach().cpu().numpy().copy()
        return state

    @torch.no_grad()
    def set_state(self, state: dict[str, np.ndarray]) -> None:
        """Restores :meth:`get_state`."""
        for i, (ms, mom) in enumerate(zip(self.mean_squares, self.moments)):
            ms.copy_(torch.from_numpy(np.array(state[f"{i}/mean_square"], dtype=np.float32)))
            mom.copy_(torch.from_numpy(np.array(state[f"{i}/momentum"], dtype=np.float32)))


def clip_grad_norm(params: list[torch.nn.Parameter], max_norm: float) -> torch.Tensor:
    """Scales gradients so their global norm is at most ``max_norm``; returns the norm
    before clipping (torch.nn.utils.clip_grad_norm_'s formula)."""
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:  # nothing in the loss (an optimizer whose loss this step skipped)
        return torch.zeros((), device=params[0].device if params else None)
    norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))  # one call for all norms
    torch._foreach_mul_(grads, torch.clamp(max_norm / (norm + 1e-6), max=1.0))
    return norm

# ``grads(index, with_stats=True) -> (loss, stats)``: see TorchPolicy.make_grad_fn.
GradFn = Callable[..., tuple[Any, dict[str, torch.Tensor]]]
Optimizer = Adam | RMSProp
# What one gradient step reports: its statistics, detached (per-row ones included).
StepRecord = dict[str, torch.Tensor]


def _mean_of(values: list[torch.Tensor]) -> torch.Tensor:
    # One statistic's mean over the steps (a statistic that is not a scalar, and not in
    # per_row_stats, counts by its mean).
    try:
        return torch.stack(values).float().mean()
    except RuntimeError:
        return torch.stack([value.float().mean() for value in values]).mean()


def _writable(array: np.ndarray) -> np.ndarray:
    # Arrays fetched from Ray's object store are read-only views; torch wants to own
    # writable memory.
    array = np.ascontiguousarray(array)
    return array if array.flags.writeable else array.copy()

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


def non_finite_gradients(optimizer: Adam | RMSProp) -> torch.Tensor:
    """A finite number (-1) when every gradient of the optimizer is finite, inf when one
    is not: a term for the step's NaN/inf check, which only asks whether the sum of its
    terms is finite. One fused pass over the gradients (the kernel torch's GradScaler
    uses to find overflow, with a scale of 1), half the cost of their norm, which is
    taken every gradient step of a learner without ``grad_clip``."""
    grads = [p.grad for p in optimizer.params if p.grad is not None]
    if not grads:
        return torch.zeros(())
    found = torch.zeros(1, device=grads[0].device)
    torch._amp_foreach_non_finite_check_and_unscale_(grads, found, _unit_scale(grads[0].device))
    return found.sub_(1.0).reciprocal_()  # 1 / (found - 1): 0 -> -1, 1 -> inf


_UNIT_SCALES: dict[torch.device, torch.Tensor] = {}


def _unit_scale(device: torch.device) -> torch.Tensor:
    # The scale of 1 that non_finite_gradients passes, one tensor per device.
    scale = _UNIT_SCALES.get(device)
    if scale is None:
        scale = _UNIT_SCALES[device] = torch.ones(1, device=device)
    return scale


class TorchPolicy(Policy):
    """Base class of torch policies: subclass it and implement :meth:`~TorchPolicy.loss`.

    Args:
        observation_space: The env's observation space.
        action_space: The env's action space.
        config: The trainer's merged config.
        num_gpus: GPUs this copy may use.
    """

    framework = "torch"

    # Actor-critic losses: an ``entropy_coeff`` (float) that follows ``entropy_coeff_schedule``.
    schedules_entropy_coeff: bool = False

    # True where each loss of several depends on its own optimizer's parameters only
    # (another network enters it detached, as SAC's and DDPG's actor losses read the
    # critics through frozen weights): backward() then takes one pass over their sum
    # instead of one pass per loss.
    losses_are_separate: bool = False

    # Batch columns the loss reads; only these are moved to the device.
    loss_columns: tuple[str, ...] = ()

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

    # ----- learning ------------------------------------------------------------------

    def _init_learner(self, config: dict) -> None:
        # The learner's state, once __init__ has the model on its device.

        # Whether learning must switch the model to train mode: a custom model may read
        # self.training anywhere; the built-in ones only through dropout or batch norm.
        self._train_mode_matters = not self.builtin_model or any(
            isinstance(module, (torch.nn.Dropout, torch.nn.modules.batchnorm._BatchNorm))
            for module in self.model.modules())
        self._has_custom_loss = type(self.model).custom_loss is not ModelV2.custom_loss
        self.lr_schedule = make_schedule(config["lr"], config.get("lr_schedule"), "lr_schedule")
        # Built on first use (see the optimizers property).
        self._optimizers: list[Optimizer] | None = None
        # Gradient steps taken over the policy's life (saved with its state); the step
        # mask reads it.
        self.num_grad_steps = 0
        # Which optimizers the current gradient step updates (set by the loop for the
        # gradient function; see optimizer_step_mask).
        self._stepping: tuple[bool, ...] = ()
        if self.schedules_entropy_coeff:
            self.entropy_coeff_schedule = make_schedule(
                config["entropy_coeff"], config.get("entropy_coeff_schedule"), "entropy_coeff_schedule")
            self.entropy_coeff = self.entropy_coeff_schedule.value(0)
        self._rng = np.random.default_rng(config.get("seed"))

    # ----- optimizers -------------------------------------------------------------

    def make_optimizer(self, params: list[torch.nn.Parameter], lr: float) -> Optimizer:
        """Adam with ``adam_epsilon`` (algorithms with ``opt_type`` override this)."""
        return Adam(params, lr=lr, eps=self.config.get("adam_epsilon", 1e-8))

    def make_optimizers(self) -> list[Optimizer]:
        """The policy's optimizers, one per loss that :meth:`loss` returns, in that order.

        The default is one :meth:`make_optimizer` over all the model's parameters at the
        policy's ``lr``. A policy with several losses returns one optimizer per
        parameter group, e.g. ``[self.make_optimizer(self.model.policy_params(), actor_lr),
        self.make_optimizer(self.model.q_params(), critic_lr)]``; each carries its own
        ``lr``, and ``lr`` / ``lr_schedule`` move optimizer 0's only (override
        :meth:`on_global_var_update` to move others). A parameter belongs to at most one
        optimizer. Called once, on first use of :attr:`optimizers`, so a subclass's
        ``__init__`` may create the parameters its optimizers take (a log-alpha) after
        ``super().__init__()``.
        """
        return [self.make_optimizer(list(self.model.parameters()), self.lr_schedule.value(self.global_timestep))]

    @property
    def optimizers(self) -> list[Optimizer]:
        """The optimizers from :meth:`make_optimizers`, built on first use.

        Raises:
            TypeError: If ``make_optimizers`` returns none, or a parameter twice.
        """
        if self._optimizers is None:
            self._optimizers = checked_optimizers(self, list(self.make_optimizers()), "params",
                                                  lambda param: f"a parameter of shape {list(param.shape)}")
        return self._optimizers

    @property
    def optimizer(self) -> Optimizer:
        """The first optimizer (the only one of most policies); ``lr_schedule`` moves its ``lr``."""
        return self.optimizers[0]

    # ----- the loop and its hooks ---------------------------------------------------

    @abstractmethod
    def loss(self, train_batch: dict[str, torch.Tensor]) -> tuple[Any, dict[str, torch.Tensor]]:
        """Returns ``(loss, stats)`` on a minibatch of tensors keyed by column name.

        ``loss`` is one scalar tensor, or with several :attr:`optimizers` a tuple (or
        list) of scalar tensors, one per optimizer in their order: optimizer ``i`` steps
        on d ``loss[i]`` / d (its own parameters) only. ``stats`` are scalar tensors,
        averaged over the last epoch's minibatches, except :attr:`per_row_stats` (one
        value per row).
        """

    def model_loss(self, train_batch: dict[str, torch.Tensor]) -> tuple[Any, dict[str, torch.Tensor]]:
        """:meth:`loss`, changed by the model's ``custom_loss`` when it defines one (classic
        RLlib's torch call: ``custom_loss([loss, ...], train_batch)``; a list or a tensor back)."""
        loss, stats = self.loss(train_batch)
        if self._has_custom_loss:
            loss = self.model_custom_loss(loss, train_batch)
        return loss, stats

    def model_custom_loss(self, loss: Any, train_batch: dict[str, torch.Tensor]) -> Any:
        """``loss`` (one tensor, or one per optimizer) through the model's ``custom_loss``.

        Raises:
            TypeError: If ``custom_loss`` does not return one tensor per loss.
        """
        losses = as_losses(loss, len(self.optimizers), type(self).__name__)
        out = self.model.custom_loss(losses, train_batch)
        changed = list(out) if isinstance(out, (list, tuple)) else [out]
        if len(changed) != len(losses) or not all(isinstance(x, torch.Tensor) for x in changed):
            raise TypeError(
                f"{type(self.model).__name__}.custom_loss must return one loss tensor per optimizer (this policy has "
                f"{len(losses)}), as a list or, for one, a tensor; got {type(out).__name__} of {len(changed)}.")
        return changed if isinstance(loss, (list, tuple)) else changed[0]

    def after_learn(self, stats: dict[str, Any]) -> dict[str, Any]:
        """Called once per ``learn_on_batch`` with the mean stats; returns extra stats."""
        return {}

    def optimizer_step_mask(self, step: int) -> tuple[bool, ...]:
        """Which optimizers apply their update at gradient step ``step``.

        Args:
            step: The step's number over the policy's life (:attr:`num_grad_steps`
                before the step: 0 for the first), saved with the policy's state.

        Returns:
            One bool per optimizer; all True by default. TD3's ``policy_delay`` steps the
            actor only every k-th critic step. An optimizer left out takes no gradient
            at that step (its backward pass is skipped).
        """
        return (True,) * len(self.optimizers)

    def after_gradient_step(self) -> None:
        """Called after each gradient step, once the optimizers the mask chose have
        stepped (soft target-network updates with ``tau``); no-op by default."""

    def prepare_batch(self, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Called once per ``learn_on_batch`` / ``compute_gradients`` on the whole batch's
        tensors, under ``torch.no_grad()``, before the first gradient step; returns the
        tensors, with columns added that every step's :meth:`loss` would otherwise
        compute again. Only what no gradient step changes may be computed here (DQN's
        targets from its fixed target network). The default returns them as they are."""
        return tensors

    def _to_tensors(self, batch: SampleBatch) -> dict[str, torch.Tensor]:
        columns = self.learner_columns(batch)
        return {key: torch.from_numpy(_writable(batch[key])).to(self.device) for key in columns}

    def make_grad_fn(self, tensors: dict[str, torch.Tensor]) -> GradFn:
        """Returns ``grads(index, with_stats=True) -> (loss, stats)``, which puts, for
        each optimizer ``i`` that steps this time (``self._stepping``, from
        :meth:`optimizer_step_mask`), d loss_i / d (optimizer i's parameters) of the
        minibatch ``tensors[...][index]`` into those parameters' ``.grad``.

        ``index`` is a tensor of row positions, or a ``slice`` when minibatches are not
        shuffled. The default runs :meth:`model_loss` and :meth:`backward`; a policy
        whose loss gradient is known in closed form may return a faster function with the
        same result (tested against autograd of :meth:`loss`), and may leave the
        statistics out (``{}``) when ``with_stats`` is False.
        """
        def grads(index: torch.Tensor | slice, with_stats: bool = True) -> tuple[Any, dict[str, torch.Tensor]]:
            loss, stats = self.model_loss({key: value[index] for key, value in tensors.items()})
            self.backward(loss, self._stepping)
            return loss, stats

        return grads

    def backward(self, loss: Any, stepping: tuple[bool, ...] = (), zero_grad: bool = True) -> None:
        """Puts d loss_i / d (optimizer i's parameters) into their ``.grad``.

        Args:
            loss: As :meth:`loss` returns it: one tensor, or one per optimizer.
            stepping: Which optimizers to differentiate for (empty: all).
            zero_grad: Drop the previous gradients first (False adds to them: gradient
                accumulation over microbatches).
        """
        optimizers = self.optimizers
        losses = as_losses(loss, len(optimizers), type(self).__name__)
        stepping = stepping or (True,) * len(optimizers)
        if len(optimizers) == 1:
            if zero_grad:
                optimizers[0].zero_grad()
            if stepping[0]:
                losses[0].backward()
            return
        if self.losses_are_separate:
            # Each loss reaches its own optimizer's parameters only: one backward pass of
            # their sum puts every loss's gradient where it belongs.
            if zero_grad:
                for optimizer in optimizers:
                    optimizer.zero_grad()
            chosen = [(optimizer, loss_i) for optimizer, loss_i, on in zip(optimizers, losses, stepping) if on]
            if chosen:
                total = sum(loss_i for _, loss_i in chosen)
                total.backward(inputs=[param for optimizer, _ in chosen for param in optimizer.params])
            return
        last = max((i for i, on in enumerate(stepping) if on), default=-1)
        for i, (optimizer, loss_i, on) in enumerate(zip(optimizers, losses, stepping)):
            if zero_grad:
                optimizer.zero_grad()
            if on:
                # inputs=: only this optimizer's parameters receive d loss_i, so a later
                # loss does not add to an earlier optimizer's gradients; the graph is kept
                # while later losses still need it.
                loss_i.backward(inputs=optimizer.params, retain_graph=i < last)

    def stepping(self, i: int) -> bool:
        """Whether optimizer ``i`` steps on the gradient being computed (True outside a
        gradient step): a loss may skip the work of a loss whose optimizer rests, as TD3's
        delayed actor does."""
        return not self._stepping or self._stepping[i]

    def _step_mask(self) -> tuple[bool, ...]:
        if type(self).optimizer_step_mask is TorchPolicy.optimizer_step_mask:
            return (True,) * len(self.optimizers)  # the default, without a per-step call
        mask = tuple(bool(on) for on in self.optimizer_step_mask(self.num_grad_steps))
        if len(mask) != len(self.optimizers):
            raise TypeError(f"{type(self).__name__}.optimizer_step_mask() returned {len(mask)} flags for "
                            f"{len(self.optimizers)} optimizers; return one bool per optimizer.")
        return mask

    def _clip(self, stepping: tuple[bool, ...]) -> list[torch.Tensor | None]:
        # Each optimizer's gradients clipped on their own (1.13's multi-optimizer torch
        # policies); the norms before clipping, None where not clipped.
        grad_clip = self.config.get("grad_clip")
        if grad_clip is None:
            return [None] * len(stepping)
        return [clip_grad_norm(optimizer.params, grad_clip) if on else None
                for optimizer, on in zip(self.optimizers, stepping)]

    def _step_optimizers(self, stepping: tuple[bool, ...]) -> None:
        # After every backward pass, so that each loss saw the weights the others saw.
        for optimizer, on in zip(self.optimizers, stepping):
            if on:
                optimizer.step(check_finite=False)
        self.num_grad_steps += 1
        self.after_gradient_step()

    def _gradient_step(self, grads: GradFn, index: torch.Tensor | slice, with_stats: bool,
                       epoch: int, minibatch: int) -> StepRecord | None:
        stepping = self._stepping = self._step_mask()
        loss, stats = grads(index, with_stats=with_stats)
        losses = as_losses(loss, len(stepping), type(self).__name__)
        norms = self._clip(stepping)
        # Every loss (and norm) before any optimizer steps: one read of the device. Without
        # grad_clip the gradients are checked on their own: a finite loss can still have a
        # NaN gradient (sqrt or log at 0 in a custom loss).
        checked = [value.detach() for value in losses] + [norm for norm in norms if norm is not None]
        checked += [non_finite_gradients(optimizer) for optimizer, on, norm in zip(self.optimizers, stepping, norms)
                    if on and norm is None]
        total = checked[0]
        for value in checked[1:]:
            total = total + value
        if not bool(torch.isfinite(total).all()):
            # Nothing was updated: the same minibatch gives the statistics to name.
            stats = stats or grads(index)[1]
            raise self._non_finite_error(stats, epoch, minibatch)
        self._step_optimizers(stepping)
        if not with_stats:
            return None
        # Detached where needed only (a loss tensor would keep its graph alive until the
        # end of learn_on_batch); the means are taken once, at the end.
        record = {key: value.detach() if value.requires_grad else value for key, value in stats.items()}
        for i, norm in enumerate(norms):
            if norm is not None:
                record[grad_norm_key(i)] = norm
        return record

    def _set_train_mode(self, training: bool) -> None:
        # model.train() walks every submodule: skipped where no layer behaves differently.
        if self._train_mode_matters:
            self.model.train(training)

    def learn_on_batch(self, batch: SampleBatch) -> dict[str, Any]:
        """The learner loop: ``num_epochs`` passes over ``batch`` in minibatches (see
        :meth:`minibatch_plan`), one gradient step each.

        A step differentiates each optimizer's loss w.r.t. that optimizer's parameters
        (for the optimizers :meth:`optimizer_step_mask` chooses), clips each optimizer's
        gradients to ``grad_clip`` on their own, checks every loss and norm for NaN/inf,
        steps the optimizers, then calls :meth:`after_gradient_step`.

        Returns:
            The statistics averaged over the last epoch's minibatches (``grad_gnorm``,
            ``grad_gnorm_<i>`` over the steps their optimizer took), each of
            :attr:`per_row_stats` as one numpy array over the batch in row order,
            ``cur_lr`` (optimizer 0's), ``entropy_coeff`` where scheduled, and whatever
            :meth:`after_learn` adds.

        Raises:
            NonFiniteError: Naming the loss terms, if a loss or gradient norm is NaN or
                inf; no update is applied from that step on.
        """
        if self.calls_learn_hook:
            self.run_learn_on_batch_callback(batch)
        batch = self.learner_batch(batch)  # recurrent models: one row per padded sequence
        n = batch.count
        minibatch_size, num_epochs = self.minibatch_plan(n)
        minibatch_size = max(1, min(int(minibatch_size), n))
        self._set_train_mode(True)
        try:
            with torch.no_grad():
                tensors = self.prepare_batch(self._to_tensors(batch))
            grads = self.make_grad_fn(tensors)
            last_epoch_stats: list[StepRecord] = []
            for epoch in range(num_epochs):
                order = None
                if self.shuffle_minibatches:
                    order = torch.from_numpy(self._rng.permutation(n)).to(self.device)
                # Only the last epoch's statistics are reported.
                last_epoch = epoch == num_epochs - 1
                for start in range(0, n, minibatch_size):
                    # In order: a slice (a view, no gather).
                    index = slice(start, start + minibatch_size) if order is None else \
                        order[start : start + minibatch_size]
                    record = self._gradient_step(grads, index, last_epoch, epoch, start // minibatch_size)
                    if record is not None:
                        last_epoch_stats.append(record)
        finally:
            # Also after an error (a user's custom_loss raising): acting must not stay in
            # train mode (dropout, batch-norm updates).
            self._set_train_mode(False)
            self._stepping = ()
        mean_stats = self._mean_stats(last_epoch_stats)
        mean_stats.update(self._learner_info())
        mean_stats.update(self.after_learn(mean_stats))
        return mean_stats

    def _mean_stats(self, steps: list[StepRecord]) -> dict[str, Any]:
        # A statistic some steps leave out (the norm of an optimizer the mask skipped) is
        # averaged over the steps that have it.
        keys = list(dict.fromkeys(key for stats in steps for key in stats))
        scalar_keys = [key for key in keys if key not in self.per_row_stats]
        # One read of the device for all the means.
        means = torch.stack([_mean_of([stats[key] for stats in steps if key in stats])
                             for key in scalar_keys]).tolist() if scalar_keys else []
        mean_stats: dict[str, Any] = dict(zip(scalar_keys, means))
        for key in keys:
            if key in self.per_row_stats:
                mean_stats[key] = torch.cat([stats[key].reshape(-1) for stats in steps]).cpu().numpy()
        return mean_stats

    def _learner_info(self) -> dict[str, float]:
        info = {"cur_lr": float(self.optimizer.lr)}
        if self.schedules_entropy_coeff:
            info["entropy_coeff"] = float(self.entropy_coeff)
        return info

    def compute_gradients(self, batch: SampleBatch) -> tuple[list[np.ndarray | None], dict[str, Any]]:
        """The gradients of one step on the whole ``batch``, for :meth:`apply_gradients`
        on another copy of the policy (A3C: workers compute, the driver applies).

        Each optimizer's loss is differentiated w.r.t. its own parameters, summed over
        ``microbatch_size`` rows at a time when the config sets it (bounded memory; equal
        to the full-batch gradient for a loss that sums over rows, as A3C's), and clipped
        to ``grad_clip`` per optimizer.

        Returns:
            ``(grads, stats)``: numpy arrays in optimizer, then parameter order (None for
            a parameter outside the loss), and the statistics (added up over
            microbatches like the loss, except ``row_mean_stats``, weighted by rows, and
            ``per_row_stats``, concatenated) with the gradient norms and ``cur_lr``.
        """
        batch = self.learner_batch(batch)  # recurrent models: one row per padded sequence
        n = batch.count
        size = self.microbatch_rows(n)
        optimizers = self.optimizers
        every = (True,) * len(optimizers)
        for optimizer in optimizers:
            optimizer.zero_grad()
        parts: list[tuple[int, dict[str, Any]]] = []
        self._set_train_mode(True)
        try:
            with torch.no_grad():
                tensors = self.prepare_batch(self._to_tensors(batch))
            for start in range(0, n, size):
                loss, stats = self.model_loss({key: value[start : start + size] for key, value in tensors.items()})
                self.backward(loss, every, zero_grad=False)  # gradients add up over microbatches
                stats = {key: value.detach().cpu().numpy() for key, value in stats.items()}
                parts.append((min(size, n - start), stats))
        finally:
            self._set_train_mode(False)  # also after an error: acting must not stay in train mode
        stats = combine_microbatch_stats(parts, self.row_mean_stats, self.per_row_stats)
        for i, norm in enumerate(self._clip(every)):
            if norm is not None:
                stats[grad_norm_key(i)] = float(norm)
        grads = [None if param.grad is None else param.grad.detach().cpu().numpy().copy()
                 for optimizer in optimizers for param in optimizer.params]
        stats.update(self._learner_info())
        return grads, stats

    def apply_gradients(self, grads: list[np.ndarray | None]) -> None:
        """One gradient step with gradients from :meth:`compute_gradients` (of this
        policy or a copy of it): the optimizers :meth:`optimizer_step_mask` chooses step,
        then :meth:`after_gradient_step` runs, as in :meth:`learn_on_batch`.

        Raises:
            ValueError: If ``grads`` does not hold one entry per parameter.
            NonFiniteError: If a gradient is NaN or inf; nothing is updated.
        """
        optimizers = self.optimizers
        params = [param for optimizer in optimizers for param in optimizer.params]
        if len(grads) != len(params):
            raise ValueError(f"apply_gradients got {len(grads)} gradients for {type(self).__name__}'s {len(params)} "
                             "parameters; pass what compute_gradients of the same policy class and config returned.")
        for param, grad in zip(params, grads):
            param.grad = None if grad is None else torch.as_tensor(np.array(grad), dtype=param.dtype,
                                                                   device=param.device)
        stepping = self._step_mask()
        # Gradients from elsewhere come without their loss: they are checked themselves,
        # every optimizer's before any steps.
        for optimizer, on in zip(optimizers, stepping):
            if on:
                check_finite_update(optimizer)
        self._step_optimizers(stepping)

    def _non_finite_error(self, stats: dict[str, torch.Tensor], epoch: int, minibatch: int) -> NonFiniteError:
        # Only on the error path: which loss statistics are NaN or inf.
        terms = [key for key, value in stats.items() if not bool(torch.isfinite(value.detach()).all())]
        what = f"loss terms {', '.join(terms)}" if terms else "gradients (the loss terms are finite)"
        return NonFiniteError.in_update(what, f"{type(self).__name__}.learn_on_batch (epoch {epoch}, minibatch "
                                              f"{minibatch})", self.optimizer.lr)

    def on_global_var_update(self, global_timestep: int) -> None:
        super().on_global_var_update(global_timestep)
        self.optimizers[0].lr = float(self.lr_schedule.value(global_timestep))
        if self.schedules_entropy_coeff:
            self.entropy_coeff = self.entropy_coeff_schedule.value(global_timestep)
