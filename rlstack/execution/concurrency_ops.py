"""RLlib 1.13's ``ray.rllib.execution.concurrency_ops``: ``Concurrently``, which runs
several branches of an execution plan in turn (rollouts stored to replay, and learning
from replay)."""

from __future__ import annotations

from typing import Any

from rlstack.execution.local_iterator import LocalIterator

__all__ = ["Concurrently"]

MODES = ("round_robin", "async")


def __getattr__(name: str) -> Any:
    from rlstack.execution.common import missing_operator

    # Enqueue / Dequeue: 1.x's hand-off to a learner thread inside a plan.
    raise missing_operator(__name__, name, "rlstack's plans run in the driver, one item at a time; asynchronous "
                           "learning from a queue is IMPALA's and APEX's training_step (rlstack.execution."
                           "learner_thread.LearnerThread)")


def Concurrently(ops: list[LocalIterator[Any]], *, mode: str = "round_robin",  # noqa: N802 - 1.x's name
                 output_indexes: list[int] | None = None,
                 round_robin_weights: list[float | str] | None = None) -> LocalIterator[Any]:
    """The items of ``ops`` in turn (1.x's operator, on ``LocalIterator.union``).

    Args:
        ops: Two or more iterators.
        mode: ``"round_robin"``: ``round_robin_weights[i]`` items of the i-th op per round
            (1 each by default; ``"*"``: what it has ready), an op with nothing ready
            giving its turn to the next. ``"async"``: 1.x pulled whichever was ready; in
            rlstack everything runs in the driver, so this is the round robin too.
        output_indexes: Only these ops' items come out (the others still run), e.g.
            ``[1]`` for the learning branch of ``[store_op, replay_op]``.
        round_robin_weights: As above; round-robin mode only.

    Returns:
        One iterator over the chosen ops' items.

    Raises:
        ValueError: For fewer than two ops, another mode, weights in async mode, all
            weights ``"*"``, or an output index out of range.
    """
    if len(ops) < 2:
        raise ValueError(f"Concurrently needs at least 2 ops, got {len(ops)}.")
    if mode not in MODES:
        raise ValueError(f"Concurrently(mode={mode!r}): mode must be 'round_robin' or 'async'.")
    if round_robin_weights:
        if mode == "async":
            raise ValueError("Concurrently(mode='async') takes no round_robin_weights; use mode='round_robin'.")
        if all(weight == "*" for weight in round_robin_weights):
            raise ValueError("Concurrently: not every round_robin_weights entry can be '*'; give at least one a "
                             "number of items per round.")
    if output_indexes:
        for index in output_indexes:
            if index not in range(len(ops)):
                raise ValueError(f"Concurrently(output_indexes={output_indexes}): {index} is not the index of one "
                                 f"of the {len(ops)} ops.")
        ops = [op.for_each(lambda item, i=i: (i, item)) for i, op in enumerate(ops)]
    union = ops[0].union(*ops[1:], deterministic=mode == "round_robin", round_robin_weights=round_robin_weights)
    if output_indexes:
        chosen = set(output_indexes)
        union = union.filter(lambda tagged: tagged[0] in chosen).for_each(lambda tagged: tagged[1])
    return union
