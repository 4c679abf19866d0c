"""TorchLearner: the one learner loop of every torch algorithm, the learning half of
:class:`~rlstack.policies.torch_policy.TorchPolicy`.

:meth:`TorchLearner.learn_on_batch` runs it, and :meth:`~TorchLearner.compute_gradients`
/ :meth:`~TorchLearner.apply_gradients` split one step of it for A3C. An algorithm adds
``loss()`` and, where it needs them, the loop's hooks:

* :meth:`~TorchLearner.make_optimizers`: several optimizers, one per loss that ``loss()``
  returns (actor, critic, entropy coefficient);
* :meth:`~TorchLearner.optimizer_step_mask`: which optimizers step at a gradient step
  (TD3's ``policy_delay``);
* :meth:`~TorchLearner.after_gradient_step`: after every step (soft target updates);
* :meth:`~rlstack.policies.policy.Policy.minibatch_plan`, ``shuffle_minibatches`` and
  ``per_row_stats``: how the batch is cut, and statistics returned per row (TD errors);
* :meth:`~TorchLearner.prepare_batch`: once per batch, before its steps;
* :meth:`~TorchLearner.make_grad_fn`: a closed-form gradient in place of autograd;
* ``after_learn`` and ``on_global_var_update``: once per batch, and on schedules.

A model's ``custom_loss`` is added through :meth:`TorchLearner.model_loss`.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from rlstack.errors import NonFiniteError
from rlstack.models.modelv2 import ModelV2
from rlstack.policies.learner_loop import as_losses, combine_microbatch_stats, grad_norm_key
from rlstack.policies.policy import Policy
from rlstack.policies.torch_optimizers import Adam, RMSProp, check_finite_update, clip_grad_norm
from rlstack.sample_batch import SampleBatch
from rlstack.utils.schedules import make_schedule

# ``grads(index, with_stats=True) -> (loss, stats)``: see TorchLearner.make_grad_fn.
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


class TorchLearner(Policy):
    """The learner loop of torch policies; :class:`~rlstack.policies.torch_policy.TorchPolicy`
    adds the model, the device and acting, and calls :meth:`_init_learner` once its model
    is built. Algorithms subclass TorchPolicy, not this class.
    """

    # Actor-critic losses: an ``entropy_coeff`` (float) that follows ``entropy_coeff_schedule``.
    schedules_entropy_coeff: bool = False

    # True where each loss of several depends on its own optimizer's parameters only
    # (another network enters it detached, as SAC's and DDPG's actor losses read the
    # critics through frozen weights): backward() then takes one pass over their sum
    # instead of one pass per loss.
    losses_are_separate: bool = False

    # Batch columns the loss reads; only these are moved to the device.
    loss_columns: tuple[str, ...] = ()

    # Set by TorchPolicy before _init_learner.
    model: ModelV2
    device: torch.device
    builtin_model: bool

    def _init_learner(self, config: dict) -> None:
        # The learner's own state, once the model is on its device.

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
            optimizers = list(self.make_optimizers())
            if not optimizers:
                raise TypeError(f"{type(self).__name__}.make_optimizers() returned no optimizer; return at least "
                                "one (the default: one over all the model's parameters).")
            owner: dict[int, int] = {}
            for i, optimizer in enumerate(optimizers):
                for param in optimizer.params:
                    if owner.setdefault(id(param), i) != i:
                        raise TypeError(
                            f"{type(self).__name__}.make_optimizers(): a parameter of shape {list(param.shape)} is "
                            f"in optimizers {owner[id(param)]} and {i}; give each parameter to one optimizer (it "
                            "steps on the gradient of its own loss only).")
            self._optimizers = optimizers
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
        if type(self).optimizer_step_mask is TorchLearner.optimizer_step_mask:
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
