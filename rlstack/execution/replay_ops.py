"""RLlib 1.13's ``ray.rllib.execution.replay_ops``: replay in an execution plan.

``StoreToReplayBuffer`` (for ``.for_each()`` on the rollouts) adds each batch to a replay
buffer; ``Replay`` is a source that replays from it, and is not ready until the buffer
gives batches (``learning_starts``). The two run together under
``Concurrently([store_op, replay_op], mode="round_robin")``. A local buffer is
rlstack's ``MultiAgentReplayBuffer`` (``rlstack.execution.buffers``) or any object with
its ``add_batch(batch)`` / ``replay()``; rlstack's plain ``ReplayBuffer`` and
``PrioritizedReplayBuffer`` (``add(batch)`` / ``sample(n)``) work too. Replay actors are
Ray actors of such a class (``ray.remote(MultiAgentReplayBuffer).remote(...)``).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from typing import Any

from rlstack.execution.local_iterator import NOT_READY, LocalIterator, ParallelIterator
from rlstack.sample_batch import DEFAULT_POLICY_ID, MultiAgentBatch, SampleBatch

__all__ = ["Replay", "StoreToReplayBuffer"]


def __getattr__(name: str) -> Any:
    from rlstack.execution.common import missing_operator

    # MixInReplay / SimpleReplayBuffer: 1.x's IMPALA / APPO replay proportion.
    raise missing_operator(__name__, name, "rlstack's replay operators are StoreToReplayBuffer and Replay (a "
                           "MultiAgentReplayBuffer under Concurrently); IMPALA's replay_proportion is not offered")


def _one_of(local_buffer: Any, actors: Sequence[Any] | None, what: str) -> None:
    if (local_buffer is None) == (actors is None):
        raise ValueError(f"{what} takes exactly one of local_buffer=... (a replay buffer in the driver) and "
                         f"actors=[...] (replay buffer actors), got {'both' if local_buffer is not None else 'neither'}.")
    if actors is not None and not actors:
        raise ValueError(f"{what}(actors=[]): give at least one replay actor, or local_buffer=... instead.")


class StoreToReplayBuffer:
    """For ``.for_each()``: adds each batch to the replay buffer (or to one of the replay
    actors, chosen at random) and passes it on (1.x's operator).

    Args:
        local_buffer: A buffer in the driver.
        actors: Or replay buffer actors.

    Raises:
        ValueError: Unless exactly one of them is given.
    """

    def __init__(self, *, local_buffer: Any = None, actors: Sequence[Any] | None = None) -> None:
        _one_of(local_buffer, actors, "StoreToReplayBuffer")
        self.local_actor = local_buffer
        self.replay_actors = list(actors) if actors is not None else None

    def __call__(self, batch: SampleBatch | MultiAgentBatch) -> SampleBatch | MultiAgentBatch:
        """Stores ``batch``; returns it."""
        if self.replay_actors is not None:
            random.choice(self.replay_actors).add_batch.remote(batch)
        elif hasattr(self.local_actor, "add_batch"):
            self.local_actor.add_batch(batch)
        else:  # rlstack's ReplayBuffer: one policy's rows
            self.local_actor.add(batch.policy_batches[DEFAULT_POLICY_ID] if isinstance(batch, MultiAgentBatch)
                                 else batch)
        return batch


def Replay(*, local_buffer: Any = None, actors: Sequence[Any] | None = None,  # noqa: N802 - 1.x's name
           num_async: int = 4, num_items_to_replay: int = 1) -> LocalIterator[SampleBatch | MultiAgentBatch]:
    """A source of replayed batches (1.x's operator): each ``next()`` is one
    ``local_buffer.replay()`` (``replay_batch_size`` rows per policy), or the not-ready
    marker while the buffer gives None (before ``learning_starts``).

    Args:
        local_buffer: A buffer in the driver.
        actors: Or replay buffer actors, asked in the order they answer (``num_async``
            requests in flight per actor); their None answers are dropped.
        num_async: Requests in flight per actor.
        num_items_to_replay: Rows per replay from a plain ``ReplayBuffer`` (one with
            ``sample(n)`` and no ``replay()``; Ray 2.0's argument).

    Raises:
        ValueError: Unless exactly one of ``local_buffer`` and ``actors`` is given.
    """
    _one_of(local_buffer, actors, "Replay")
    if actors is not None:
        return _ReplayActors(list(actors)).gather_async(num_async=num_async).filter(lambda item: item is not None)

    def replays(_timeout: Any) -> Iterator[Any]:
        while True:
            if hasattr(local_buffer, "replay"):
                item = local_buffer.replay()
            else:
                item = local_buffer.sample(num_items_to_replay) if len(local_buffer) else None
            yield NOT_READY if item is None else item

    return LocalIterator(replays, name="Replay")


class _ReplayActors(ParallelIterator):
    # The replay actors as the shards of a ParallelIterator: each item is one replay().
    def __init__(self, actors: list[Any]) -> None:
        super().__init__(_ActorSet(actors))

    def _request(self, handle: Any) -> Any:
        return handle.replay.remote()


class _ActorSet:
    # What ParallelIterator.gather_async needs of a WorkerSet, for plain actors (a failed
    # replay actor raises: there is nothing to recreate it from).
    def __init__(self, actors: list[Any]) -> None:
        self._actors = actors
        self.num_remote_workers = len(actors)

    def remote_workers(self) -> list[Any]:
        return list(self._actors)

    def healthy_positions(self) -> list[int]:
        return list(range(len(self._actors)))

    def fetch(self, ref: Any, position: int) -> tuple[bool, Any]:
        import ray

        return True, ray.get(ref)
