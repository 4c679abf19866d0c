"""V-trace in TensorFlow: the same computation as
:func:`rlstack.trainers.impala.vtrace.vtrace` (see there for the formulas), on time-major
``[T, B]`` tensors, without gradients; the backward recursion is a reversed ``tf.scan`` so
that T may vary between calls of one traced function."""

from __future__ import annotations

from rlstack.models.tf.framework import tf


def vtrace(
    log_rhos: tf.Tensor,
    discounts: tf.Tensor,
    rewards: tf.Tensor,
    values: tf.Tensor,
    bootstrap_value: tf.Tensor,
    clip_rho_threshold: float | None = 1.0,
    clip_pg_rho_threshold: float | None = 1.0,
    clip_c_threshold: float = 1.0,
) -> tuple[tf.Tensor, tf.Tensor]:
    """Returns ``(vs, pg_advantages)``, both ``[T, B]`` (see the numpy reference)."""
    log_rhos, discounts, rewards, values, bootstrap_value = (
        tf.stop_gradient(x) for x in (log_rhos, discounts, rewards, values, bootstrap_value))
    rhos = tf.exp(log_rhos)
    clipped_rhos = rhos if clip_rho_threshold is None else tf.minimum(clip_rho_threshold, rhos)
    cs = tf.minimum(clip_c_threshold, rhos)
    values_t_plus_1 = tf.concat([values[1:], bootstrap_value[None]], axis=0)
    deltas = clipped_rhos * (rewards + discounts * values_t_plus_1 - values)
    # acc_t = delta_t + gamma_t c_t acc_{t+1}, scanned from the last step backwards.
    vs_minus_v = tf.scan(lambda acc, x: x[0] + x[1] * acc, (deltas, discounts * cs),
                         initializer=tf.zeros_like(bootstrap_value), reverse=True)
    vs = vs_minus_v + values
    vs_t_plus_1 = tf.concat([vs[1:], bootstrap_value[None]], axis=0)
    pg_rhos = rhos if clip_pg_rho_threshold is None else tf.minimum(clip_pg_rho_threshold, rhos)
    return vs, pg_rhos * (rewards + discounts * vs_t_plus_1 - values)
