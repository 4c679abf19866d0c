"""Advantage estimation on trajectory pieces, in numpy.

A trajectory piece is consecutive steps of one episode from one sub-env. Its last row
either ended the episode by termination (the future is worth 0), or did not: the episode
was truncated by a time limit or the piece was cut at ``rollout_fragment_length``. Then
the future is worth V(s_last), which the worker stored in the ``bootstrap_value`` column
of the last row. Only termination zeroes the bootstrap (ARCHITECTURE.md, "Episodes").
"""

from __future__ import annotations

import numpy as np

from rlstack.sample_batch import SampleBatch
from rlstack.utils.sgd import standardized


def discount_cumsum(values: np.ndarray, gamma: float) -> np.ndarray:
    """``out[t] = sum_k gamma^k * values[t + k]``, computed backwards in O(T)."""
    out = np.empty(len(values), dtype=np.float64)
    running = 0.0
    for t in range(len(values) - 1, -1, -1):
        running = values[t] + gamma * running
        out[t] = running
    return out


def compute_gae(
    rewards: np.ndarray, vf_preds: np.ndarray, last_value: float, gamma: float, lambda_: float
) -> tuple[np.ndarray, np.ndarray]:
    """Generalised advantage estimation (Schulman et al. 2016, eq. 16).

    ``delta_t = r_t + gamma * V(s_{t+1}) - V(s_t)`` with ``V(s_T) = last_value``, and
    ``A_t = sum_k (gamma * lambda)^k * delta_{t+k}``; value targets are ``A_t + V(s_t)``.

    Args:
        rewards: ``[T]`` rewards of one trajectory piece.
        vf_preds: ``[T]`` value predictions V(s_t).
        last_value: V(s_T) after the last step; 0.0 if the episode terminated.
        gamma: Discount factor.
        lambda_: GAE lambda.

    Returns:
        ``(advantages, value_targets)``, float32 ``[T]`` each.
    """
    values = np.append(np.asarray(vf_preds, dtype=np.float64), last_value)
    deltas = np.asarray(rewards, dtype=np.float64) + gamma * values[1:] - values[:-1]
    advantages = discount_cumsum(deltas, gamma * lambda_)
    value_targets = advantages + values[:-1]
    return advantages.astype(np.float32), value_targets.astype(np.float32)


def last_value_of(batch: SampleBatch) -> float:
    """V(s_last) to bootstrap from: 0.0 if the piece ends in termination."""
    if batch[SampleBatch.TERMINATEDS][-1]:
        return 0.0
    return float(batch[SampleBatch.BOOTSTRAP_VALUE][-1])


def compute_advantages(
    batch: SampleBatch, gamma: float, lambda_: float, use_gae: bool = True, use_critic: bool = True
) -> SampleBatch:
    """Adds ``advantages`` and ``value_targets`` to one trajectory piece.

    Args:
        batch: One trajectory piece with rewards, vf_preds, terminateds and
            bootstrap_value columns.
        gamma: Discount factor.
        lambda_: GAE lambda (used when ``use_gae``).
        use_gae: GAE if True; otherwise plain discounted returns (with bootstrap).
        use_critic: If False, advantages are the discounted returns themselves
            (REINFORCE); the value targets are still filled for logging.

    Returns:
        The same batch with the two new columns.
    """
    last_value = last_value_of(batch)
    rewards = batch[SampleBatch.REWARDS]
    vf_preds = batch[SampleBatch.VF_PREDS] if use_critic else np.zeros(len(rewards), np.float32)
    if use_gae and use_critic:
        advantages, value_targets = compute_gae(rewards, vf_preds, last_value, gamma, lambda_)
    else:
        returns = discount_cumsum(np.append(rewards, last_value), gamma)[:-1].astype(np.float32)
        advantages, value_targets = returns - vf_preds, returns
    batch[SampleBatch.ADVANTAGES] = advantages
    batch[SampleBatch.VALUE_TARGETS] = value_targets
    return batch


def adapt_kl_coeff(kl_coeff: float, kl: float, kl_target: float) -> float:
    """PPO's adaptive KL penalty (Schulman et al. 2017, sec. 4).

    The coefficient grows by half when the measured KL overshoots twice the target and
    halves when it stays under half the target.
    """
    if kl > 2.0 * kl_target:
        return kl_coeff * 1.5
    if kl < 0.5 * kl_target:
        return kl_coeff * 0.5
    return kl_coeff


def postprocess_advantages(batch: SampleBatch, config: dict) -> SampleBatch:
    """Policy-gradient postprocessing from a config (``gamma``, ``lambda``, ``use_gae``,
    ``use_critic``): the one function PPO's torch, TF and numpy policies share."""
    return compute_advantages(batch, config["gamma"], config["lambda"], config.get("use_gae", True),
                              config.get("use_critic", True))


def standardize(batch: SampleBatch, column: str) -> SampleBatch:
    """Rescales ``column`` to zero mean and unit standard deviation (in place).

    A batch without the column is returned as it is, as 1.13's ``standardize_fields``
    did: a policy class of the user's own that writes no advantages still trains under
    PPO.
    """
    if column in batch:
        batch[column] = standardized(batch[column]).astype(np.float32)
    return batch


def compute_n_step(batch: SampleBatch, n_step: int, gamma: float) -> SampleBatch:
    """n-step returns for Q-learning on one trajectory piece (Sutton & Barto 2018, 7.1).

    Row ``t`` becomes ``R_t = sum_{j<k} gamma^j r_{t+j}`` with ``k = min(n_step, T - t)``,
    its ``new_obs`` the observation after step ``t + k - 1`` and its ``terminateds`` that
    step's flag; ``discounts`` holds ``gamma ** k``, so the TD target
    ``R_t + discounts_t * (1 - terminated_t) * max_a Q(new_obs_t, a)`` stays exact where the
    piece ends before ``n_step`` more steps (episode end or fragment cut).

    Args:
        batch: One piece with ``rewards``, ``new_obs`` and ``terminateds``.
        n_step: Steps to look ahead (1: plain one-step TD).
        gamma: Discount factor.

    Returns:
        The batch with the three columns replaced and ``discounts`` added.
    """
    T = batch.count
    rewards = batch[SampleBatch.REWARDS].astype(np.float64)
    k = np.minimum(n_step, T - np.arange(T))
    returns = np.zeros(T, dtype=np.float64)
    for j in range(min(n_step, T)):
        # Row t adds gamma^j r_{t+j} while j < k_t, i.e. for t < T - j.
        returns[: T - j] += gamma**j * rewards[j:]
    last = np.arange(T) + k - 1
    batch[SampleBatch.REWARDS] = returns.astype(np.float32)
    batch[SampleBatch.NEXT_OBS] = batch[SampleBatch.NEXT_OBS][last]
    batch[SampleBatch.TERMINATEDS] = batch[SampleBatch.TERMINATEDS][last]
    batch[SampleBatch.DISCOUNTS] = np.power(gamma, k).astype(np.float32)
    return batch


def postprocess_n_step(batch: SampleBatch, config: dict) -> SampleBatch:
    """Q-learning postprocessing from a config (``n_step``, ``gamma``): the function the
    DQN family's torch, TF and numpy policies share."""
    return compute_n_step(batch, int(config["n_step"]), float(config["gamma"]))
