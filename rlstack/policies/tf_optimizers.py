"""Optimizers of the TF policies, written on plain ``tf.Variable``\\ s with TF's fused
resource kernels (so they match torch's step for step and need no Keras), gradient
clipping, and the guard that turns non-finite gradients into :class:`NonFiniteError`.

Keras 3 variables of users' models are handed over as the ``tf.Variable`` they wrap
(:mod:`rlstack.models.tf.tf_modelv2`), so these update them in place too.
"""

from __future__ import annotations

import contextlib

import numpy as np

from rlstack.errors import NonFiniteError
from rlstack.models.tf.framework import tf

__all__ = ["Adam", "RMSProp", "clip_by_global_norm", "finite_guard", "lr_value", "non_finite_as_error"]


def _grads_finite(grads: list[tf.Tensor]) -> tf.Tensor:
    # One scalar: the sum of every gradient entry is NaN or inf iff some entry is (inf - inf
    # is NaN), or the sum overflows float32, which no sane update does. Summing costs a
    # few percent of a small DQN step; an is_finite per tensor cost ~15%.
    return tf.math.is_finite(tf.add_n([tf.reduce_sum(g) for g in grads if g is not None]))


_NON_FINITE_MARK = "rlstack: non-finite gradients"


def lr_value(lr: tf.Variable | float) -> float:
    """An optimizer's learning rate (a variable or a float) as a float."""
    return float(lr.numpy()) if hasattr(lr, "numpy") else float(lr)


@contextlib.contextmanager
def non_finite_as_error(where: str, lr: tf.Variable | float):
    """Turns the assertion :func:`finite_guard` puts in a graph (TF raises it as an
    ``InvalidArgumentError``) into the :class:`NonFiniteError` torch policies raise, so
    callers catch one error whatever the framework. ``where`` names the step."""
    try:
        yield
    except tf.errors.InvalidArgumentError as err:
        if _NON_FINITE_MARK not in str(err):
            raise
        raise NonFiniteError.in_update("gradients (NaN or inf)", where, lr_value(lr)) from None


def finite_guard(grads: list[tf.Tensor], check_finite: bool, name: str) -> list:
    """Control inputs for an update (inside a tf.function): an assertion that fails
    (``InvalidArgumentError``, which :func:`non_finite_as_error` turns into
    :class:`NonFiniteError`) before any variable is touched when a gradient is NaN or
    inf; none without ``check_finite``. ``name`` names the step in the message."""
    if not check_finite:
        return []
    return [tf.debugging.Assert(_grads_finite(grads), [
        f"{_NON_FINITE_MARK} (NaN or inf) in a TF {name} step; the update was not applied. Usual causes: "
        "a learning rate too high (lower lr or set grad_clip), NaN/inf or very large rewards, observations on a "
        "large scale (observation_filter='MeanStdFilter'), or a log(0) / division by zero in a custom loss."])]


class Adam:
    """Adam (Kingma & Ba 2015) with torch's update order, on plain ``tf.Variable``\\ s.

    ``m = b1 m + (1 - b1) g``; ``v = b2 v + (1 - b2) g^2``;
    ``w -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)``.

    Args:
        variables: The variables it updates (kept as :attr:`variables`).
        lr: Its learning rate: a ``tf.Variable`` to change it later without retracing
            (a policy's ``self.lr``, or one of its own), or a float.
    """

    def __init__(self, variables: list[tf.Variable], lr: tf.Variable | float, eps: float = 1e-8,
                 beta1: float = 0.9, beta2: float = 0.999) -> None:
        self.variables = list(variables)
        self.lr, self.eps, self.beta1, self.beta2 = lr, eps, beta1, beta2
        self.step = tf.Variable(0.0, trainable=False, name="adam_step")
        self.m = [tf.Variable(tf.zeros_like(v), trainable=False) for v in variables]
        self.v = [tf.Variable(tf.zeros_like(v), trainable=False) for v in variables]

    def apply(self, grads: list[tf.Tensor], variables: list[tf.Variable] | None = None,
              check_finite: bool = True) -> None:
        """Applies one update (inside a tf.function).

        Args:
            grads: One gradient (or None: left alone) per variable.
            variables: The variables, in ``grads`` order (default: :attr:`variables`).
            check_finite: Fail (``InvalidArgumentError``) before touching any variable
                if a gradient is NaN or inf; False where the caller has checked.
        """
        variables = self.variables if variables is None else variables
        with tf.control_dependencies(finite_guard(grads, check_finite, "Adam")):
            step = self.step.assign_add(1.0)
            beta1_power = tf.pow(self.beta1, step)
            beta2_power = tf.pow(self.beta2, step)
            # TF's fused kernel (one op per variable instead of ~16: most of a small
            # network's step) computes w -= lr sqrt(1 - b2^t) / (1 - b1^t) m / (sqrt(v) + e);
            # with e = eps sqrt(1 - b2^t) that is exactly the update above.
            epsilon = self.eps * tf.sqrt(1.0 - beta2_power)
            for grad, var, m, v in zip(grads, variables, self.m, self.v):
                if grad is None:  # not in the loss (value layers without a critic): left alone, as torch does
                    continue
                tf.raw_ops.ResourceApplyAdam(
                    var=var.handle, m=m.handle, v=v.handle, beta1_power=beta1_power, beta2_power=beta2_power,
                    lr=self.lr, beta1=self.beta1, beta2=self.beta2, epsilon=epsilon, grad=grad)

    def get_state(self) -> dict[str, np.ndarray]:
        """The step count and both moments per variable."""
        state = {"step": self.step.numpy()}
        for i, (m, v) in enumerate(zip(self.m, self.v)):
            state[f"{i}/exp_avg"] = m.numpy()
            state[f"{i}/exp_avg_sq"] = v.numpy()
        return state

    def set_state(self, state: dict[str, np.ndarray]) -> None:
        """Restores :meth:`get_state`."""
        self.step.assign(float(state["step"]))
        for i, (m, v) in enumerate(zip(self.m, self.v)):
            m.assign(state[f"{i}/exp_avg"])
            v.assign(state[f"{i}/exp_avg_sq"])


class RMSProp:
    """RMSProp in the IMPALA paper's (TF1) momentum form, the twin of
    torch_policy.RMSProp: ``ms = decay ms + (1 - decay) g^2``; ``mom = momentum mom +
    lr g / sqrt(ms + eps)``; ``w -= mom``; ``ms`` starts at 1."""

    def __init__(self, variables: list[tf.Variable], lr: tf.Variable | float, decay: float = 0.99,
                 momentum: float = 0.0, eps: float = 0.1) -> None:
        self.variables = list(variables)
        self.lr, self.decay, self.momentum, self.eps = lr, float(decay), float(momentum), float(eps)
        self.mean_squares = [tf.Variable(tf.ones_like(v), trainable=False) for v in variables]
        self.moments = [tf.Variable(tf.zeros_like(v), trainable=False) for v in variables]

    def apply(self, grads: list[tf.Tensor], variables: list[tf.Variable] | None = None,
              check_finite: bool = True) -> None:
        """Applies one update (inside a tf.function); arguments as in :meth:`Adam.apply`."""
        variables = self.variables if variables is None else variables
        with tf.control_dependencies(finite_guard(grads, check_finite, "RMSProp")):
            for grad, var, ms, mom in zip(grads, variables, self.mean_squares, self.moments):
                if grad is None:
                    continue
                # TF's fused kernel computes exactly these three lines, in one op.
                tf.raw_ops.ResourceApplyRMSProp(
                    var=var.handle, ms=ms.handle, mom=mom.handle, lr=self.lr, rho=self.decay,
                    momentum=self.momentum, epsilon=self.eps, grad=grad)

    def get_state(self) -> dict[str, np.ndarray]:
        """Mean squares and momentum buffers per variable."""
        state = {}
        for i, (ms, mom) in enumerate(zip(self.mean_squares, self.moments)):
            state[f"{i}/mean_square"] = ms.numpy()
            state[f"{i}/momentum"] = mom.numpy()
        return state

    def set_state(self, state: dict[str, np.ndarray]) -> None:
        """Restores :meth:`get_state`."""
        for i, (ms, mom) in enumerate(zip(self.mean_squares, self.moments)):
            ms.assign(state[f"{i}/mean_square"])
            mom.assign(state[f"{i}/momentum"])


def clip_by_global_norm(grads: list[tf.Tensor], max_norm: float) -> tuple[list[tf.Tensor], tf.Tensor]:
    """Scales gradients so their global norm is at most ``max_norm`` (torch's formula)."""
    norm = tf.linalg.global_norm(grads)  # None (a variable outside the loss) counts as zero
    coef = tf.minimum(1.0, max_norm / (norm + 1e-6))
    return [None if g is None else g * coef for g in grads], norm
