"""V-trace off-policy targets (Espeholt et al. 2018, IMPALA, section 4.1), numpy reference.

Inputs are time-major ``[T, B]`` (B sequences of T steps). With importance ratios
``rho_t = pi(a_t|x_t) / mu(a_t|x_t)`` of the learner's policy ``pi`` over the behaviour
policy ``mu``, ``c_t = min(c_bar, rho_t)`` and ``delta_t = min(rho_bar, rho_t) (r_t +
gamma_t V(x_{t+1}) - V(x_t))``, the targets are (eq. 1, written recursively)

    v_s = V(x_s) + delta_s + gamma_s c_s (v_{s+1} - V(x_{s+1})),   v_T = V(x_T) (the bootstrap)

and the policy-gradient advantages ``min(pg_rho_bar, rho_s) (r_s + gamma_s v_{s+1} -
V(x_s))``. Episode ends inside a sequence are ``gamma_t = 0``; a time-limit truncation is
``gamma_t = 0`` with ``gamma V(x_final)`` added to its reward (see :func:`fold_truncation`).
The torch and TF versions (``vtrace_torch.py``, ``vtrace_tf.py``) compute the same.
"""

from __future__ import annotations

import numpy as np


def vtrace(
    log_rhos: np.ndarray,
    discounts: np.ndarray,
    rewards: np.ndarray,
    values: np.ndarray,
    bootstrap_value: np.ndarray,
    clip_rho_threshold: float | None = 1.0,
    clip_pg_rho_threshold: float | None = 1.0,
    clip_c_threshold: float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """V-trace targets and policy-gradient advantages, in float64.

    Args:
        log_rhos: ``log pi(a_t|x_t) - log mu(a_t|x_t)``, ``[T, B]``.
        discounts: ``gamma_t`` (0 where the episode ended at step t), ``[T, B]``.
        rewards: ``[T, B]``.
        values: ``V(x_t)`` under the learner's value function, ``[T, B]``.
        bootstrap_value: ``V(x_T)``, ``[B]``.
        clip_rho_threshold: ``rho_bar`` (None: no clipping).
        clip_pg_rho_threshold: ``pg_rho_bar`` for the advantages (None: no clipping).
        clip_c_threshold: ``c_bar``.

    Returns:
        ``(vs, pg_advantages)``, both ``[T, B]``.
    """
    log_rhos, discounts, rewards, values = (np.asarray(x, dtype=np.float64) for x in
                                            (log_rhos, discounts, rewards, values))
    bootstrap_value = np.asarray(bootstrap_value, dtype=np.float64)
    rhos = np.exp(log_rhos)
    clipped_rhos = rhos if clip_rho_threshold is None else np.minimum(clip_rho_threshold, rhos)
    cs = np.minimum(clip_c_threshold, rhos)
    values_t_plus_1 = np.concatenate([values[1:], bootstrap_value[None]], axis=0)
    deltas = clipped_rhos * (rewards + discounts * values_t_plus_1 - values)
    vs_minus_v = np.zeros_like(values)
    acc = np.zeros_like(bootstrap_value)
    for t in range(len(values) - 1, -1, -1):
        acc = deltas[t] + discounts[t] * cs[t] * acc
        vs_minus_v[t] = acc
    vs = vs_minus_v + values
    vs_t_plus_1 = np.concatenate([vs[1:], bootstrap_value[None]], axis=0)
    pg_rhos = rhos if clip_pg_rho_threshold is None else np.minimum(clip_pg_rho_threshold, rhos)
    pg_advantages = pg_rhos * (rewards + discounts * vs_t_plus_1 - values)
    return vs, pg_advantages


def fold_truncation(rewards: np.ndarray, discounts: np.ndarray, truncateds: np.ndarray,
                    final_values: np.ndarray, gamma: float) -> tuple[np.ndarray, np.ndarray]:
    """Turns time-limit truncations into V-trace's terms: ``r_t + gamma V(x_final)`` with
    ``gamma_t = 0``, so the episode after the reset is not bootstrapped from."""
    truncateds = np.asarray(truncateds, dtype=bool)
    rewards = np.where(truncateds, rewards + gamma * final_values, rewards)
    discounts = np.where(truncateds, 0.0, discounts)
    return rewards, discounts
