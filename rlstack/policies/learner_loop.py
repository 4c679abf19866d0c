"""What the torch and TF learner loops share, framework-free: one loss per optimizer,
the optimizers' state under ``optimizer/...`` keys, gradient-norm statistic names, and
the statistics of a gradient summed over microbatches.

The loops themselves are :meth:`TorchPolicy.learn_on_batch
<rlstack.policies.torch_policy.TorchPolicy.learn_on_batch>` and :meth:`TFPolicy.learn_on_batch
<rlstack.policies.tf_policy.TFPolicy.learn_on_batch>`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rlstack.errors import CheckpointError
from rlstack.policies.policy import PolicyState


def checked_optimizers(policy: Any, optimizers: list[Any], members: str, describe: Callable[[Any], str]) -> list[Any]:
    """``optimizers`` (``make_optimizers()``'s result) once checked: at least one, and no
    parameter in two of them (each steps on the gradient of its own loss only).

    Args:
        policy: The policy, named in the messages.
        optimizers: The optimizers.
        members: The optimizers' attribute listing what they update (``"params"``,
            ``"variables"``), and the word for one of them in the messages.
        describe: How the message names one of them (its shape, its name).

    Raises:
        TypeError: If there is no optimizer, or a parameter is in two.
    """
    name = type(policy).__name__
    if not optimizers:
        raise TypeError(f"{name}.make_optimizers() returned no optimizer; return at least one (the default: one "
                        f"over all the model's {members}).")
    owner: dict[int, int] = {}
    for i, optimizer in enumerate(optimizers):
        for member in getattr(optimizer, members):
            if owner.setdefault(id(member), i) != i:
                raise TypeError(
                    f"{name}.make_optimizers(): {describe(member)} is in optimizers {owner[id(member)]} and {i}; give "
                    f"each one to one optimizer (it steps on the gradient of its own loss only).")
    return optimizers


def optimizer_state_key(index: int, key: str) -> str:
    """The state key of entry ``key`` of optimizer ``index``: ``optimizer/<key>`` for the
    first (the key every checkpoint from before several optimizers has) and
    ``optimizer/<index>/<key>`` for the others."""
    return f"optimizer/{key}" if index == 0 else f"optimizer/{index}/{key}"


def optimizers_state(optimizers: list[Any]) -> PolicyState:
    """Every optimizer's ``get_state()`` under :func:`optimizer_state_key` names."""
    return {optimizer_state_key(i, key): value
            for i, optimizer in enumerate(optimizers) for key, value in optimizer.get_state().items()}


def load_optimizers_state(optimizers: list[Any], state: PolicyState) -> None:
    """Restores :func:`optimizers_state` output; an optimizer with no entry in ``state``
    (a state saved without optimizers, or before the policy had that one) keeps its own.

    Raises:
        CheckpointError: If ``state`` holds some but not all entries of an optimizer.
    """
    for i, optimizer in enumerate(optimizers):
        # Each optimizer's own key set: entry names alone cannot tell optimizer 0's
        # "1/exp_avg" (its second parameter) from optimizer 1's entries.
        names = {key: optimizer_state_key(i, key) for key in optimizer.get_state()}
        present = {key: state[name] for key, name in names.items() if name in state}
        if not present:
            continue
        if len(present) < len(names):
            missing = sorted(name for name in names.values() if name not in state)
            raise CheckpointError(
                f"The policy state holds {len(present)} of optimizer {i}'s {len(names)} entries (missing "
                f"{', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}); was it saved by a policy with "
                "other parameters or optimizers? Restore it into the same algorithm and model config.")
        optimizer.set_state(present)


def grad_norm_key(index: int) -> str:
    """The learner statistic of optimizer ``index``'s gradient norm before clipping:
    ``grad_gnorm`` for the first, ``grad_gnorm_<index>`` for the others (1.13's names)."""
    return "grad_gnorm" if index == 0 else f"grad_gnorm_{index}"


def combine_microbatch_stats(parts: list[tuple[int, dict[str, Any]]], row_mean_stats: tuple[str, ...],
                             per_row_stats: tuple[str, ...]) -> dict[str, Any]:
    """The statistics of one batch whose gradient was summed over microbatches.

    Args:
        parts: ``(rows, stats)`` per microbatch, in row order, stats as numbers/arrays.
        row_mean_stats: Statistics that are means over rows: weighted by rows. So are
            a model's metrics (``model/<name>``).
        per_row_stats: Statistics with one value per row: concatenated.

    Returns:
        Every other statistic added up, as the loss whose gradients were summed.
    """
    total_rows = sum(rows for rows, _ in parts) or 1
    combined: dict[str, Any] = {}
    for key in dict.fromkeys(key for _, stats in parts for key in stats):
        values = [(rows, stats[key]) for rows, stats in parts if key in stats]
        if key in per_row_stats:
            combined[key] = np.concatenate([np.reshape(value, -1) for _, value in values])
        elif key in row_mean_stats or key.startswith("model/"):
            combined[key] = float(sum(float(np.mean(value)) * rows for rows, value in values) / total_rows)
        else:
            # (A statistic that is not a scalar counts by its mean.)
            combined[key] = float(sum(float(np.mean(value)) for _, value in values))
    return combined


def as_losses(loss: Any, num_optimizers: int, policy_name: str) -> list[Any]:
    """``loss()``'s first result as one loss per optimizer.

    Args:
        loss: One scalar tensor, or a tuple/list of them in optimizer order.
        num_optimizers: ``len(policy.optimizers)``.
        policy_name: Names the policy in the error.

    Raises:
        TypeError: If the number of losses is not the number of optimizers.
    """
    losses = list(loss) if isinstance(loss, (list, tuple)) else [loss]
    if len(losses) != num_optimizers:
        raise TypeError(
            f"{policy_name}.loss() returned {len(losses)} loss(es) but the policy has {num_optimizers} "
            "optimizer(s) (make_optimizers()); return one scalar loss per optimizer, in the same order.")
    return losses
