"""TorchPolicy: the torch base of every algorithm's torch policy.

It owns the model, the action distribution, the optimizer, device placement and the
minibatch-SGD loop; an algorithm adds ``loss()`` (and, if it needs them, the hooks
``after_learn`` and ``on_global_var_update``).

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
from rlstack.models.catalog import initial_weights
from rlstack.models.modelv2 import ModelV2, model_obs_space
from rlstack.models.torch.distributions import DISTRIBUTIONS
from rlstack.models.torch.model import TorchModel
from rlstack.models.torch.torch_action_dist import TorchDistributionWrapper
from rlstack.models.torch.torch_modelv2 import ShortcutTorchModel
from rlstack.policies.policy import Policy, PolicyState, decode_json, encode_json
from rlstack.sample_batch import SampleBatch
from rlstack.utils.schedules import make_schedule

logger = logging.getLogger(__name__)

# ``grads(index, with_stats=True) -> (loss, stats)``: see TorchPolicy.make_grad_fn.
GradFn = Callable[..., tuple[torch.Tensor, dict[str, torch.Tensor]]]


def check_finite_update(optimizer: "Adam | RMSProp", loss: torch.Tensor | None = None,
                        grad_norm: torch.Tensor | None = None) -> None:
    """Raises before an update from a NaN or inf loss or gradient.

    With ``loss`` (and ``grad_norm``, where clipping computed it) only those scalars are
    read: well under a microsecond on the CPU, one device sync on a GPU. Without either,
    the gradients themselves are checked (a norm per parameter, ~30 us for a 256x256
    MLP on the CPU), for callers that apply gradients computed elsewhere. A norm that
    overflows float32 (entries beyond ~1e19) counts as non-finite: such an update would
    wreck the weights just the same.

    Raises:
        NonFiniteError: Naming what was not finite; no parameter has been touched.
    """
    if loss is None and grad_norm is None:
        grads = [p.grad for p in optimizer.params if p.grad is not None]
        if bool(torch.isfinite(torch.stack(torch._foreach_norm(grads))).all()):
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


class Adam:
    """Adam (Kingma & Ba 2015) over a list of parameters, the twin of tf_policy.Adam.

    ``torch.optim.Adam`` would do, but constructing any ``torch.optim`` optimizer imports
    torch's compiler stack (``torch._dynamo``, 1-2 s of start-up on these machines). This
    one calls the same fused kernel (``torch._fused_adam_``) directly, falling back to a
    plain implementation where the kernel is missing, and keeps its state in the same
    three slots per parameter: ``step``, ``exp_avg``, ``exp_avg_sq``.
    """

    def __init__(self, params: list[torch.nn.Parameter], lr: float, eps: float = 1e-8,
                 beta1: float = 0.9, beta2: float = 0.999) -> None:
        self.params = list(params)
        self.lr, self.eps, self.beta1, self.beta2 = float(lr), float(eps), beta1, beta2
        self.exp_avgs = [torch.zeros_like(p) for p in self.params]
        self.exp_avg_sqs = [torch.zeros_like(p) for p in self.params]
        # Each parameter's step count is a view into one vector, so that a step where every
        # parameter has a gradient counts them all with one op (not one per parameter).
        device = self.params[0].device if self.params else None
        self._all_steps = torch.zeros(len(self.params), dtype=torch.float32, device=device)
        self.steps = list(self._all_steps.unbind())
        self._fused = hasattr(torch, "_fused_adam_")

    def zero_grad(self) -> None:
        """Drops the parameters' gradients."""
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self, loss: torch.Tensor | None = None, grad_norm: torch.Tensor | None = None) -> None:
        """Applies one update from the parameters' ``.grad``.

        Args:
            loss: The loss the gradients come from; checked instead of the gradients.
            grad_norm: Their global norm, if clipping computed it; checked too.

        Raises:
            NonFiniteError: If what is checked (see :func:`check_finite_update`) is NaN
                or inf; nothing is updated.
        """
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


class RMSProp:
    """RMSProp as in the IMPALA paper's TF implementation (momentum form), the twin of
    tf_policy.RMSProp: ``ms = decay ms + (1 - decay) g^2``; ``mom = momentum mom +
    lr g / sqrt(ms + eps)``; ``w -= mom``. ``ms`` starts at 1 (TF1's RMSPropOptimizer).
    """

    def __init__(self, params: list[torch.nn.Parameter], lr: float, decay: float = 0.99, momentum: float = 0.0,
                 eps: float = 0.1) -> None:
        self.params = list(params)
        self.lr, self.decay, self.momentum, self.eps = float(lr), float(decay), float(momentum), float(eps)
        self.mean_squares = [torch.ones_like(p) for p in self.params]
        self.moments = [torch.zeros_like(p) for p in self.params]

    def zero_grad(self) -> None:
        """Drops the parameters' gradients."""
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self, loss: torch.Tensor | None = None, grad_norm: torch.Tensor | None = None) -> None:
        """Applies one update from the parameters' ``.grad``; ``loss`` and ``grad_norm``
        as in :meth:`Adam.step`.

        Raises:
            NonFiniteError: See :meth:`Adam.step`; nothing is updated.
        """
        if any(p.grad is None for p in self.params):
            raise RuntimeError("Every parameter needs a gradient before RMSProp.step(); is one unused by the loss?")
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
    norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))  # one call for all norms
    torch._foreach_mul_(grads, torch.clamp(max_norm / (norm + 1e-6), max=1.0))
    return norm


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


def _single_loss(out: Any, model_name: str) -> torch.Tensor:
    losses = list(out) if isinstance(out, (list, tuple)) else [out]
    if len(losses) != 1 or not isinstance(losses[0], torch.Tensor):
        raise TypeError(
            f"{model_name}.custom_loss must return the loss as a tensor or a one-element list of tensors (this "
            f"policy has one optimizer); got {type(out).__name__} of {len(losses)}.")
    return losses[0]


def _to_number(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        return float(value) if value.numel() == 1 else value.numpy()
    return value


def _writable(array: np.ndarray) -> np.ndarray:
    # Arrays fetched from Ray's object store are read-only views; torch wants to own
    # writable memory.
    array = np.ascontiguousarray(array)
    return array if array.flags.writeable else array.copy()


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


class TorchPolicy(Policy):
    """Base class of torch policies.

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
    model_class: type[TorchModel] = TorchModel
    # Shuffle rows before each SGD epoch; sequence losses (V-trace) keep the batch order.
    shuffle_minibatches: bool = True
    # Actor-critic losses: an ``entropy_coeff`` (float) that follows ``entropy_coeff_schedule``.
    schedules_entropy_coeff: bool = False

    # Batch columns the loss reads; only these are moved to the device.
    loss_columns: tuple[str, ...] = ()

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
            self.model = self.model_class(spec, model_obs_space(observation_space), action_space)
            self.model.set_canonical_weights(initial_weights(spec, config.get("seed")))
            self.builtin_model = True
        self.model.to(self.device)
        # Built-in distributions take the catalog's spec; a custom one (classic RLlib's
        # interface) takes the model.
        if self.dist_spec.custom_class is not None:
            self.dist_class, self._dist_arg = self.dist_spec.custom_class, self.model
        else:
            self.dist_class, self._dist_arg = DISTRIBUTIONS[self.dist_spec.kind], self.dist_spec
        self._has_custom_loss = type(self.model).custom_loss is not ModelV2.custom_loss
        self.lr_schedule = make_schedule(config["lr"], config.get("lr_schedule"), "lr_schedule")
        self.optimizer = self.make_optimizer(list(self.model.parameters()), self.lr_schedule.value(0))
        if self.schedules_entropy_coeff:
            self.entropy_coeff_schedule = make_schedule(
                config["entropy_coeff"], config.get("entropy_coeff_schedule"), "entropy_coeff_schedule")
            self.entropy_coeff = self.entropy_coeff_schedule.value(0)
        self._rng = np.random.default_rng(config.get("seed"))

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

    def _sample(self, dist: TorchDistributionWrapper) -> torch.Tensor:
        # Built-in distributions draw from this policy's own generator; a custom one
        # (classic RLlib's sample() takes no argument) from torch's global generator.
        if self.dist_spec.custom_class is None:
            return dist.sample(self.sampling_generator)
        return dist.sample()

    def model_metrics(self) -> dict[str, Any]:
        """The model's ``metrics()`` as numbers (tensors read out), for the results'
        ``info/learner/<policy>/model``."""
        return {key: _to_number(value) for key, value in self.model.metrics().items()}

    def make_optimizer(self, params: list[torch.nn.Parameter], lr: float) -> Adam | RMSProp:
        """Adam with ``adam_epsilon`` (algorithms with ``opt_type`` override this)."""
        return Adam(params, lr=lr, eps=self.config.get("adam_epsilon", 1e-8))

    # ----- acting -----------------------------------------------------------------

    def _explore(self, explore: bool | None) -> bool:
        return self.config.get("explore", True) if explore is None else bool(explore)

    def compute_actions(self, obs_batch: np.ndarray, explore: bool | None = None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        with torch.no_grad():
            obs = torch.from_numpy(np.asarray(obs_batch, dtype=np.float32)).to(self.device)
            dist_inputs, values = self.model.policy_and_value(obs)
            dist = self.action_dist(dist_inputs)
            actions = self._sample(dist) if self._explore(explore) else dist.deterministic_sample()
            logp = dist.logp(actions)
        return actions.cpu().numpy(), {
            SampleBatch.ACTION_LOGP: logp.cpu().numpy(),
            SampleBatch.ACTION_DIST_INPUTS: dist_inputs.cpu().numpy(),
            SampleBatch.VF_PREDS: values.cpu().numpy(),
        }

    def compute_values(self, obs_batch: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            obs = torch.from_numpy(np.asarray(obs_batch, dtype=np.float32)).to(self.device)
            return self.model.value(obs).cpu().numpy()

    # ----- learning ---------------------------------------------------------------

    @abstractmethod
    def loss(self, train_batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Returns ``(loss, stats)`` on a minibatch of tensors keyed by column name."""

    def model_loss(self, train_batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """:meth:`loss`, changed by the model's ``custom_loss`` when it defines one (classic
        RLlib's torch call: ``custom_loss([loss], train_batch)``; a list or a tensor back)."""
        loss, stats = self.loss(train_batch)
        if self._has_custom_loss:
            loss = self.model_custom_loss(loss, train_batch)
        return loss, stats

    def model_custom_loss(self, loss: torch.Tensor, train_batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """``loss`` through the model's ``custom_loss`` (a list or a tensor back)."""
        return _single_loss(self.model.custom_loss([loss], train_batch), type(self.model).__name__)

    def after_learn(self, stats: dict[str, float]) -> dict[str, float]:
        """Called once per ``learn_on_batch`` with the mean stats; returns extra stats."""
        return {}

    def _to_tensors(self, batch: SampleBatch) -> dict[str, torch.Tensor]:
        columns = self.loss_columns or tuple(batch.keys())
        return {key: torch.from_numpy(_writable(batch[key])).to(self.device) for key in columns}

    def make_grad_fn(self, tensors: dict[str, torch.Tensor]) -> GradFn:
        """Returns ``grads(index, with_stats=True) -> (loss, stats)``, which puts d loss / d
        parameter of the minibatch ``tensors[...][index]`` into every parameter's ``.grad``.

        The default runs :meth:`loss` and autograd; a policy whose loss gradient is
        known in closed form may return a faster function with the same result, and may
        leave the statistics out (``{}``) when ``with_stats`` is False.
        """
        def grads(index: torch.Tensor, with_stats: bool = True) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
            loss, stats = self.model_loss({key: value[index] for key, value in tensors.items()})
            self.optimizer.zero_grad()
            loss.backward()
            return loss, stats

        return grads

    def learn_on_batch(self, batch: SampleBatch) -> dict[str, float]:
        """Runs ``num_sgd_iter`` epochs of minibatch SGD (one full-batch step by default).

        Returns:
            The loss statistics averaged over the last epoch's minibatches, plus the
            current learning rate and whatever :meth:`after_learn` adds.
        """
        n = batch.count
        minibatch_size = min(int(self.config.get("sgd_minibatch_size") or n), n)
        num_epochs = int(self.config.get("num_sgd_iter", 1))
        grad_clip = self.config.get("grad_clip")
        self.model.train()
        grads = self.make_grad_fn(self._to_tensors(batch))
        last_epoch_stats: list[dict[str, torch.Tensor]] = []
        for epoch in range(num_epochs):
            order = torch.from_numpy(self._rng.permutation(n) if self.shuffle_minibatches else np.arange(n))
            order = order.to(self.device)
            # Only the last epoch's statistics are reported.
            last_epoch = epoch == num_epochs - 1
            for start in range(0, n, minibatch_size):
                index = order[start : start + minibatch_size]
                loss, stats = grads(index, with_stats=last_epoch)
                grad_norm = clip_grad_norm(self.optimizer.params, grad_clip) if grad_clip is not None else None
                try:
                    # Checks the loss (and the gradient norm) first: one device sync per step.
                    self.optimizer.step(loss, grad_norm)
                except NonFiniteError:
                    self.model.eval()
                    # Nothing was updated: the same minibatch gives the statistics to name.
                    stats = stats or grads(index)[1]
                    raise self._non_finite_error(stats, epoch, start // minibatch_size) from None
                if last_epoch:
                    if grad_norm is not None:
                        stats["grad_gnorm"] = grad_norm
                    last_epoch_stats.append({key: value.detach() for key, value in stats.items()})
        self.model.eval()
        mean_stats = {key: float(torch.stack([s[key] for s in last_epoch_stats]).float().mean())
                      for key in last_epoch_stats[0]}
        mean_stats["cur_lr"] = self.optimizer.lr
        mean_stats.update(self.after_learn(mean_stats))
        return mean_stats

    def _non_finite_error(self, stats: dict[str, torch.Tensor], epoch: int, minibatch: int) -> NonFiniteError:
        # Only on the error path: which loss statistics are NaN or inf.
        terms = [key for key, value in stats.items() if not bool(torch.isfinite(value.detach()).all())]
        what = f"loss terms {', '.join(terms)}" if terms else "gradients (the loss terms are finite)"
        return NonFiniteError.in_update(what, f"{type(self).__name__}.learn_on_batch (epoch {epoch}, minibatch "
                                              f"{minibatch})", self.optimizer.lr)

    def on_global_var_update(self, global_timestep: int) -> None:
        super().on_global_var_update(global_timestep)
        self.optimizer.lr = float(self.lr_schedule.value(global_timestep))
        if self.schedules_entropy_coeff:
            self.entropy_coeff = self.entropy_coeff_schedule.value(global_timestep)

    # ----- weights and state ------------------------------------------------------

    def get_weights(self) -> dict[str, np.ndarray]:
        return model_weights(self.model)

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        load_model_weights(self.model, weights)

    def get_state(self) -> PolicyState:
        state = super().get_state()
        state.update({f"optimizer/{key}": value for key, value in self.optimizer.get_state().items()})
        state["minibatch_rng"] = encode_json(self._rng.bit_generator.state)
        state["sampling_rng"] = self.sampling_generator.get_state().numpy()
        return state

    def set_state(self, state: PolicyState) -> None:
        super().set_state(state)
        prefix = "optimizer/"
        optimizer_state = {key[len(prefix):]: value for key, value in state.items() if key.startswith(prefix)}
        if optimizer_state:
            self.optimizer.set_state(optimizer_state)
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
