"""TFLearner: the one learner loop of every TensorFlow algorithm, the learning half of
:class:`~rlstack.policies.tf_policy.TFPolicy`.

:meth:`TFLearner.learn_on_batch` runs every minibatch step of every epoch in one compiled
graph; :meth:`~TFLearner.compute_gradients` / :meth:`~TFLearner.apply_gradients` split
one step of it for A3C. An algorithm adds ``loss()`` and, where it needs them, the
loop's hooks (the torch learner's, with TF ops where they run inside the compiled loop):

* :meth:`~TFLearner.make_optimizers`: several optimizers, one per loss of ``loss()``;
* :meth:`~TFLearner.optimizer_step_mask`: which optimizers step (gets a step tensor);
* :meth:`~TFLearner.after_gradient_step`: after every step, in the graph (TF ops);
* :meth:`~rlstack.policies.policy.Policy.minibatch_plan`, ``shuffle_minibatches`` and
  ``per_row_stats``; :meth:`~TFLearner.prepare_batch` (in the graph);
* ``after_learn`` and ``on_global_var_update``, in Python, once per batch.

The optimizers are :mod:`rlstack.policies.tf_optimizers`'.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from typing import Any

import numpy as np

from rlstack.errors import NonFiniteError
from rlstack.models.modelv2 import ModelV2
from rlstack.models.tf.framework import tf
from rlstack.policies.learner_loop import as_losses, combine_microbatch_stats, grad_norm_key
from rlstack.policies.policy import Policy
from rlstack.policies.tf_optimizers import (Adam, RMSProp, clip_by_global_norm, finite_guard, lr_value,
                                            non_finite_as_error)
from rlstack.sample_batch import SampleBatch
from rlstack.utils.schedules import make_schedule

Optimizer = Adam | RMSProp


def _scalar(value: tf.Tensor) -> tf.Tensor:
    # A statistic as one float32 in the stats row (its mean, if it is not a scalar and
    # not one of the per-row statistics).
    value = tf.cast(value, tf.float32)
    return value if value.shape.rank == 0 else tf.reduce_mean(value)


def nest_model_stats(stats: dict[str, Any]) -> dict[str, Any]:
    """Moves the ``"model/<name>"`` entries of learner stats to ``stats["model"][name]``,
    where classic RLlib reported a model's ``metrics()``."""
    model = {key[len("model/"):]: stats.pop(key) for key in [k for k in stats if k.startswith("model/")]}
    if model:
        stats["model"] = model
    return stats


class TFLearner(Policy):
    """The learner loop of TensorFlow policies; :class:`~rlstack.policies.tf_policy.TFPolicy`
    adds the model, the device and acting, and calls :meth:`_init_learner` once its model
    is built. Algorithms subclass TFPolicy, not this class.
    """

    # Actor-critic losses: an ``entropy_coeff`` (tf.Variable) that follows ``entropy_coeff_schedule``.
    schedules_entropy_coeff: bool = False

    # Batch columns the loss reads.
    loss_columns: tuple[str, ...] = ()

    # Set by TFPolicy before _init_learner.
    model: ModelV2
    device: str
    builtin_model: bool
    train_variables: list[tf.Variable]
    # TFPolicy.graph_function: tf.function with AutoGraph for custom models only.
    graph_function: Callable[..., Callable]

    def _init_learner(self, config: dict) -> None:
        # The learner's own state, once the model is built.
        with tf.device(self.device):
            self.lr_schedule = make_schedule(config["lr"], config.get("lr_schedule"), "lr_schedule")
            self.lr = tf.Variable(self.lr_schedule.value(0), trainable=False, dtype=tf.float32, name="lr")
            if self.schedules_entropy_coeff:
                self.entropy_coeff_schedule = make_schedule(
                    config["entropy_coeff"], config.get("entropy_coeff_schedule"), "entropy_coeff_schedule")
                self.entropy_coeff = tf.Variable(self.entropy_coeff_schedule.value(0), trainable=False, dtype=tf.float32)
            # Gradient steps taken over the policy's life (saved with its state); the
            # step mask reads it inside the compiled loop.
            self.num_grad_steps = tf.Variable(0, trainable=False, dtype=tf.int64, name="num_grad_steps")
        self._rng = np.random.default_rng(config.get("seed"))
        # Built on first use (see the optimizers property).
        self._optimizers: list[Optimizer] | None = None
        # The compiled graphs of learn_on_batch, compute_gradients and apply_gradients,
        # traced on first use; the names of the train graph's statistics rows.
        self._train_fn = None
        self._grad_fn = None
        self._apply_fns: dict[tuple[bool, ...], Callable] = {}
        self._stat_keys: list[str] = []

    # ----- optimizers -------------------------------------------------------------

    def make_optimizer(self, variables: list[tf.Variable], lr: tf.Variable | float) -> Optimizer:
        """Adam with ``adam_epsilon`` (algorithms with ``opt_type`` override this)."""
        return Adam(variables, lr, eps=self.config.get("adam_epsilon", 1e-8))

    def make_optimizers(self) -> list[Optimizer]:
        """The policy's optimizers, one per loss that :meth:`loss` returns, in that order.

        The default is one :meth:`make_optimizer` over :attr:`train_variables` with the
        policy's ``self.lr`` variable. A policy with several losses returns one
        optimizer per variable list, e.g. ``[self.make_optimizer(actor_vars, self.lr),
        self.make_optimizer(critic_vars, self.critic_lr)]``. Each optimizer takes its
        learning rate as a constructor argument: a ``tf.Variable`` (to change it later
        without retracing) or a float. ``lr`` / ``lr_schedule`` move ``self.lr`` only
        (optimizer 0's in the default). A variable belongs to at most one optimizer.
        Called once, on first use of :attr:`optimizers` (outside any ``tf.function``,
        under the policy's device), so a subclass's ``__init__`` may first create the
        variables its optimizers take.
        """
        return [self.make_optimizer(self.train_variables, self.lr)]

    @property
    def optimizers(self) -> list[Optimizer]:
        """The optimizers from :meth:`make_optimizers`, built on first use.

        Raises:
            TypeError: If ``make_optimizers`` returns none, or a variable twice.
        """
        if self._optimizers is None:
            with tf.device(self.device):
                optimizers = list(self.make_optimizers())
            if not optimizers:
                raise TypeError(f"{type(self).__name__}.make_optimizers() returned no optimizer; return at least "
                                "one (the default: one over all the model's variables).")
            owner: dict[int, int] = {}
            for i, optimizer in enumerate(optimizers):
                for var in optimizer.variables:
                    if owner.setdefault(id(var), i) != i:
                        raise TypeError(
                            f"{type(self).__name__}.make_optimizers(): variable {var.name} is in optimizers "
                            f"{owner[id(var)]} and {i}; give each variable to one optimizer (it steps on the gradient "
                            "of its own loss only).")
            self._optimizers = optimizers
        return self._optimizers

    @property
    def optimizer(self) -> Optimizer:
        """The first optimizer (the only one of most policies)."""
        return self.optimizers[0]

    # ----- the loop and its hooks ---------------------------------------------------

    @abstractmethod
    def loss(self, train_batch: dict[str, tf.Tensor]) -> tuple[Any, dict[str, tf.Tensor]]:
        """Returns ``(loss, stats)`` on a minibatch of tensors keyed by column name.

        ``loss`` is one scalar tensor, or with several :attr:`optimizers` a tuple (or
        list) of scalar tensors, one per optimizer in their order: optimizer ``i`` steps
        on d ``loss[i]`` / d (its own variables) only. ``stats`` are scalar tensors,
        averaged over the last epoch's minibatches, except :attr:`per_row_stats` (one
        value per row).
        """

    def after_learn(self, stats: dict[str, Any]) -> dict[str, Any]:
        """Called once per ``learn_on_batch`` with the mean stats; returns extra stats."""
        return {}

    def optimizer_step_mask(self, step: tf.Tensor) -> tuple[Any, ...]:
        """Which optimizers apply their update at gradient step ``step``.

        Runs inside the compiled loop: ``step`` is an int64 scalar tensor (the step's
        number over the policy's life, :attr:`num_grad_steps` before the step: 0 for
        the first, saved with the policy's state), and each flag a Python bool or a bool
        tensor computed from it with TF ops, e.g. ``(True, tf.equal(step % 2, 0))`` for
        TD3's ``policy_delay`` 2. All True by default.
        """
        return (True,) * len(self.optimizers)

    def after_gradient_step(self) -> None:
        """Called after each gradient step, inside the compiled loop (so TF ops only, e.g.
        ``var.assign(...)``), once the optimizers the mask chose have stepped: soft
        target-network updates with ``tau``. Not called for a step that was not applied
        (NaN/inf). No-op by default."""

    def prepare_batch(self, tensors: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """Called once per batch inside the compiled loop, before the first gradient
        step, on the whole batch's tensors (``compute_gradients``: on each microbatch);
        returns them, with per-row columns added that every step's :meth:`loss` would
        otherwise compute again. Only what no gradient step changes may be computed
        here (DQN's targets from its fixed target network). The default returns them."""
        return tensors

    def loss_with_model(self, train_batch: dict[str, tf.Tensor]) -> tuple[Any, dict[str, tf.Tensor]]:
        """:meth:`loss`, changed by the model's ``custom_loss`` when it has one (called
        with the loss, or with the list of losses when there are several, and returning
        the same), with the model's ``metrics()`` added to the stats as
        ``"model/<name>"`` (see :func:`nest_model_stats`). The model sees
        ``input_dict["is_training"]`` True here (a constant of the traced train graph;
        acting graphs see False)."""
        self.model.training = True
        try:
            loss, stats = self.loss(train_batch)
        finally:
            self.model.training = False
        if type(self.model).custom_loss is not ModelV2.custom_loss:
            several = isinstance(loss, (list, tuple))
            changed = self.model.custom_loss(list(loss) if several else loss, train_batch)
            if several and len(as_losses(changed, len(loss), type(self.model).__name__ + ".custom_loss")) != len(loss):
                raise TypeError(f"{type(self.model).__name__}.custom_loss must return one loss per optimizer.")
            loss = changed
        for name, value in self.model.metrics().items():
            stats[f"model/{name}"] = tf.reduce_mean(tf.cast(value, tf.float32))
        return loss, stats

    def _losses_and_grads(self, minibatch: dict[str, tf.Tensor]) -> tuple[list, dict, list[list]]:
        """``(losses, stats, grads)`` on a minibatch, inside the train graph:
        :meth:`loss_with_model` through a GradientTape (persistent with several losses),
        one loss and one gradient list per optimizer (d loss_i / d optimizer i's variables)."""
        optimizers = self.optimizers
        with tf.GradientTape(persistent=len(optimizers) > 1) as tape:
            loss, stats = self.loss_with_model(minibatch)
        losses = as_losses(loss, len(optimizers), type(self).__name__)
        grads = [tape.gradient(loss_i, optimizer.variables) for loss_i, optimizer in zip(losses, optimizers)]
        del tape  # a persistent tape holds its graph until dropped
        return losses, stats, grads

    def _step_mask(self) -> list[Any]:
        if type(self).optimizer_step_mask is TFLearner.optimizer_step_mask:
            return [True] * len(self.optimizers)  # the default: no read of the step count in the graph
        mask = list(self.optimizer_step_mask(self.num_grad_steps.read_value()))
        if len(mask) != len(self.optimizers):
            raise TypeError(f"{type(self).__name__}.optimizer_step_mask() returned {len(mask)} flags for "
                            f"{len(self.optimizers)} optimizers; return one per optimizer.")
        return mask

    def _apply_step(self, grads: list[list], mask: list[Any]) -> tf.Tensor:
        # Every optimizer the mask chooses steps (after all gradients were taken, so that
        # each loss saw the same weights), then the step count and after_gradient_step.
        for optimizer, grads_i, on in zip(self.optimizers, grads, mask):
            if on is True:
                optimizer.apply(grads_i, check_finite=False)
            elif on is not False:
                def apply_i(optimizer=optimizer, grads_i=grads_i) -> tf.Tensor:
                    optimizer.apply(grads_i, check_finite=False)
                    return tf.constant(True)

                tf.cond(tf.convert_to_tensor(on), apply_i, lambda: tf.constant(False))
        self.num_grad_steps.assign_add(1)
        self.after_gradient_step()
        return tf.constant(True)

    def _train_step(self, minibatch: dict[str, tf.Tensor],
                    enabled: tf.Tensor) -> tuple[dict[str, tf.Tensor], dict[str, tf.Tensor], tf.Tensor]:
        mask = self._step_mask()
        losses, stats, grads = self._losses_and_grads(minibatch)
        per_row = {key: stats.pop(key) for key in self.per_row_stats if key in stats}
        grad_clip = self.config.get("grad_clip")
        # A NaN or inf loss (or gradient norm) skips the update; learn_on_batch then raises.
        # The loss and the norm are one scalar each: far cheaper than a pass over every
        # gradient, which the optimizer does for callers that bring no loss.
        finite = tf.reduce_all(tf.math.is_finite(losses[0]))
        for loss in losses[1:]:
            finite = tf.logical_and(finite, tf.reduce_all(tf.math.is_finite(loss)))
        if grad_clip is not None:
            for i, on in enumerate(mask):
                # Each optimizer's gradients clipped on their own (1.13's multi-optimizer
                # policies); a skipped optimizer's norm is NaN here, left out of the mean.
                grads[i], norm = clip_by_global_norm(grads[i], float(grad_clip))
                if on is True:
                    stats[grad_norm_key(i)] = norm
                    finite = tf.logical_and(finite, tf.math.is_finite(norm))
                else:
                    stats[grad_norm_key(i)] = tf.where(tf.convert_to_tensor(on), norm, float("nan"))
                    finite = tf.logical_and(finite, tf.logical_or(tf.logical_not(on), tf.math.is_finite(norm)))
        else:
            # Unclipped gradients are checked too (their norm only, for the check): a
            # finite loss can still have a NaN gradient (sqrt or log at 0 in a custom loss).
            for i, on in enumerate(mask):
                norm = tf.linalg.global_norm([g for g in grads[i] if g is not None])
                ok = tf.math.is_finite(norm)
                finite = tf.logical_and(finite, ok if on is True else tf.logical_or(tf.logical_not(on), ok))
        tf.cond(tf.logical_and(finite, enabled), lambda: self._apply_step(grads, mask), lambda: tf.constant(False))
        return stats, per_row, finite

    def _train_loop(self, tensors: dict[str, tf.Tensor], order: tf.Tensor, starts: tf.Tensor,
                    ends: tf.Tensor) -> tuple[tf.Tensor, dict[str, tf.Tensor], tf.Tensor]:
        # Every minibatch step of every epoch in one graph: a Python-driven loop would pay
        # one tf.function call per minibatch, which costs more than a small network's step.
        # Returns the stats rows, the per-row statistics of every step in order, and the
        # first step whose loss or gradients were not finite (-1: none); no update is
        # applied from that step on.
        tensors = self.prepare_batch(tensors)
        num_minibatches = tf.shape(starts)[0]

        def step(i, rows, per_row, first_bad):
            if self.shuffle_minibatches:
                index = order[starts[i] : ends[i]]
                minibatch = {key: tf.gather(value, index) for key, value in tensors.items()}
            else:  # starts / ends are rows: slices, no gather
                minibatch = {key: value[starts[i] : ends[i]] for key, value in tensors.items()}
            stats, step_per_row, finite = self._train_step(minibatch, first_bad < 0)
            # The statistics' names are known once the step is traced (the trace runs
            # this Python once); learn_on_batch reads them to label the rows.
            self._stat_keys = sorted(stats)
            rows = rows.write(i, tf.stack([_scalar(stats[key]) for key in self._stat_keys]))
            per_row = {key: per_row[key].write(i, tf.reshape(tf.cast(step_per_row[key], tf.float32), [-1]))
                       for key in per_row}
            first_bad = tf.where(tf.logical_and(first_bad < 0, tf.logical_not(finite)), i, first_bad)
            return i + 1, rows, per_row, first_bad

        per_row = {key: tf.TensorArray(tf.float32, size=num_minibatches, infer_shape=False)
                   for key in self.per_row_stats}
        start = (tf.constant(0), tf.TensorArray(tf.float32, size=num_minibatches), per_row, tf.constant(-1, tf.int32))
        _, rows, per_row, first_bad = tf.while_loop(lambda i, *_: i < num_minibatches, step, start)
        return rows.stack(), {key: value.concat() for key, value in per_row.items()}, first_bad

    def _compiled_train_loop(self, tensors: dict[str, tf.Tensor]):
        if self._train_fn is None:
            index_spec = tf.TensorSpec([None], tf.int64)
            signature = (
                {key: tf.TensorSpec([None, *value.shape[1:]], value.dtype) for key, value in tensors.items()},
                index_spec, index_spec, index_spec,
            )
            self._train_fn = self.graph_function(self._train_loop, signature)
        return self._train_fn

    def learn_on_batch(self, batch: SampleBatch) -> dict[str, Any]:
        """The learner loop: ``num_epochs`` passes over ``batch`` in minibatches (see
        :meth:`minibatch_plan`), one gradient step each, all in one compiled graph.

        A step differentiates each optimizer's loss w.r.t. that optimizer's variables,
        clips each optimizer's gradients to ``grad_clip`` on their own, checks every loss
        and norm for NaN/inf, applies the optimizers :meth:`optimizer_step_mask`
        chooses, then runs :meth:`after_gradient_step`.

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
        columns = self.learner_columns(batch)
        n = batch.count
        minibatch_size, num_epochs = self.minibatch_plan(n)
        minibatch_size = max(1, min(int(minibatch_size), n))
        epoch_starts = np.arange(0, n, minibatch_size, dtype=np.int64)
        per_epoch = len(epoch_starts)
        if self.shuffle_minibatches:
            # The same minibatch order as the torch policy draws from the same generator;
            # starts / ends index the concatenated epochs' order.
            order = np.concatenate([self._rng.permutation(n) for _ in range(num_epochs)]).astype(np.int64)
            starts = (np.arange(num_epochs, dtype=np.int64)[:, None] * n + epoch_starts[None, :]).reshape(-1)
            ends = np.minimum(starts + minibatch_size,
                              np.repeat(np.arange(1, num_epochs + 1, dtype=np.int64) * n, per_epoch))
        else:
            order = np.zeros(0, np.int64)  # unused: starts / ends are rows
            starts = np.tile(epoch_starts, num_epochs)
            ends = np.minimum(starts + minibatch_size, n)
        optimizers = self.optimizers  # built (their variables made) before the trace
        with tf.device(self.device):
            tensors = {key: tf.convert_to_tensor(batch[key]) for key in columns}
            rows, per_row, first_bad = self._compiled_train_loop(tensors)(
                tensors, tf.constant(order), tf.constant(starts), tf.constant(ends))
            rows, first_bad = rows.numpy(), int(first_bad.numpy())
        if first_bad >= 0:
            # A skipped optimizer's norm is NaN by design: not a culprit to name.
            terms = [key for key, value in zip(self._stat_keys, rows[first_bad])
                     if not np.isfinite(value) and not key.startswith("grad_gnorm")]
            what = f"loss terms {', '.join(terms)}" if terms else "gradients (the loss terms are finite)"
            raise NonFiniteError.in_update(
                what, f"{type(self).__name__}.learn_on_batch (epoch {first_bad // per_epoch}, minibatch "
                      f"{first_bad % per_epoch})", lr_value(optimizers[0].lr))
        mean_stats: dict[str, Any] = {}
        for key, column in zip(self._stat_keys, rows[-per_epoch:].T):
            if key.startswith("grad_gnorm"):
                column = column[~np.isnan(column)]  # the steps that optimizer took
                if not column.size:
                    continue
            mean_stats[key] = float(column.mean())
        for key, values in per_row.items():
            mean_stats[key] = values.numpy()[-n:]  # the last epoch's, in row order
        mean_stats.update(self._learner_info())
        mean_stats.update(self.after_learn(mean_stats))
        return nest_model_stats(mean_stats)

    def _learner_info(self) -> dict[str, float]:
        info = {"cur_lr": lr_value(self.optimizer.lr)}
        if self.schedules_entropy_coeff:
            info["entropy_coeff"] = float(self.entropy_coeff.numpy())
        return info

    def _gradients(self, tensors: dict[str, tf.Tensor]) -> tuple[list, dict[str, tf.Tensor]]:
        # compute_gradients' graph: every optimizer's gradients on one microbatch.
        _, stats, grads = self._losses_and_grads(self.prepare_batch(tensors))
        return [grad for grads_i in grads for grad in grads_i], stats

    def compute_gradients(self, batch: SampleBatch) -> tuple[list[np.ndarray | None], dict[str, Any]]:
        """The gradients of one step on the whole ``batch``, for :meth:`apply_gradients`
        on another copy of the policy (A3C: workers compute, the driver applies).

        Each optimizer's loss is differentiated w.r.t. its own variables, summed over
        ``microbatch_size`` rows at a time when the config sets it (bounded memory; equal
        to the full-batch gradient for a loss that sums over rows, as A3C's), and clipped
        to ``grad_clip`` per optimizer.

        Returns:
            ``(grads, stats)``: numpy arrays in optimizer, then variable order (None for
            a variable outside the loss), and the statistics (added up over microbatches
            like the loss, except ``row_mean_stats`` and model metrics, weighted by rows,
            and ``per_row_stats``, concatenated) with the gradient norms and ``cur_lr``.
        """
        batch = self.learner_batch(batch)  # recurrent models: one row per padded sequence
        n = batch.count
        size = self.microbatch_rows(n)
        optimizers = self.optimizers
        with tf.device(self.device):
            tensors = {key: tf.convert_to_tensor(batch[key]) for key in self.learner_columns(batch)}
            if self._grad_fn is None:
                signature = ({key: tf.TensorSpec([None, *value.shape[1:]], value.dtype)
                              for key, value in tensors.items()},)
                self._grad_fn = self.graph_function(self._gradients, signature)
            total: list | None = None
            parts: list[tuple[int, dict[str, Any]]] = []
            for start in range(0, n, size):
                grads, stats = self._grad_fn({key: value[start : start + size] for key, value in tensors.items()})
                total = grads if total is None else [a if b is None else (b if a is None else a + b)
                                                     for a, b in zip(total, grads)]
                parts.append((min(size, n - start), {key: value.numpy() for key, value in stats.items()}))
            stats = combine_microbatch_stats(parts, self.row_mean_stats, self.per_row_stats)
            grad_clip = self.config.get("grad_clip")
            offset = 0
            for i, optimizer in enumerate(optimizers):
                count = len(optimizer.variables)
                if grad_clip is not None:
                    total[offset : offset + count], norm = clip_by_global_norm(total[offset : offset + count],
                                                                               float(grad_clip))
                    stats[grad_norm_key(i)] = float(norm)
                offset += count
        stats.update(self._learner_info())
        return [None if grad is None else grad.numpy() for grad in total], nest_model_stats(stats)

    def _apply(self, grads: list) -> None:
        # apply_gradients' graph: every chosen optimizer's gradients are checked before
        # any variable changes.
        optimizers, mask = self.optimizers, self._step_mask()
        per_optimizer, offset = [], 0
        for optimizer in optimizers:
            per_optimizer.append(grads[offset : offset + len(optimizer.variables)])
            offset += len(optimizer.variables)
        checked = [grad for grads_i, on in zip(per_optimizer, mask) if on is not False for grad in grads_i]
        with tf.control_dependencies(finite_guard(checked, bool(checked) and any(g is not None for g in checked),
                                                  "apply_gradients")):
            self._apply_step(per_optimizer, mask)

    def apply_gradients(self, grads: list[np.ndarray | None]) -> None:
        """One gradient step with gradients from :meth:`compute_gradients` (of this
        policy or a copy of it): the optimizers :meth:`optimizer_step_mask` chooses step,
        then :meth:`after_gradient_step` runs, as in :meth:`learn_on_batch`.

        Raises:
            ValueError: If ``grads`` does not hold one entry per variable.
            NonFiniteError: If a gradient is NaN or inf; nothing is updated.
        """
        optimizers = self.optimizers
        variables = [var for optimizer in optimizers for var in optimizer.variables]
        if len(grads) != len(variables):
            raise ValueError(f"apply_gradients got {len(grads)} gradients for {type(self).__name__}'s "
                             f"{len(variables)} variables; pass what compute_gradients of the same policy class and "
                             "config returned.")
        # One graph per pattern of missing gradients (in practice one per policy): the
        # present ones are its fixed-signature inputs.
        present = tuple(grad is not None for grad in grads)
        apply_fn = self._apply_fns.get(present)
        if apply_fn is None:
            def apply_present(given: list[tf.Tensor]) -> None:
                given = iter(given)
                self._apply([next(given) if is_present else None for is_present in present])

            signature = [[tf.TensorSpec(var.shape, var.dtype) for var, is_present in zip(variables, present)
                          if is_present]]
            apply_fn = self._apply_fns[present] = self.graph_function(apply_present, signature)
        with tf.device(self.device), non_finite_as_error(f"{type(self).__name__}.apply_gradients",
                                                         optimizers[0].lr):
            apply_fn([tf.convert_to_tensor(grad, dtype=var.dtype) for grad, var in zip(grads, variables)
                      if grad is not None])

    def on_global_var_update(self, global_timestep: int) -> None:
        super().on_global_var_update(global_timestep)
        self.lr.assign(self.lr_schedule.value(global_timestep))
        if self.schedules_entropy_coeff:
            self.entropy_coeff.assign(self.entropy_coeff_schedule.value(global_timestep))
