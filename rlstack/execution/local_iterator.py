"""The iterators RLlib 1.x's execution plans are chains of (1.x's ``ray.util.iter`` and
``ray.util.iter_metrics``), rewritten small and synchronous.

An execution plan (``Trainer.execution_plan(workers, config)``) returns a
:class:`LocalIterator` whose every ``next()`` is one training iteration: the operators of
``rlstack/execution/*_ops.py`` are plain callables chained with :meth:`~LocalIterator.for_each`,
:meth:`~LocalIterator.combine`, :meth:`~LocalIterator.filter` and
:meth:`~LocalIterator.union`. Everything runs in the driver, one item at a time, pulled
by the trainer; only sampling reaches the rollout workers (:class:`ParallelIterator`).
1.x's iterators could be read from other processes and ran ``for_each(max_concurrency=n)``
as Ray tasks; these cannot.

An operator finds the iteration's counters, timers and learner info with
:meth:`LocalIterator.get_metrics` (1.x's ``_get_shared_metrics()``): the
:class:`MetricsContext` of the trainer running the plan, whose counters are the
trainer's own (``rlstack/execution/common.py`` maps 1.x's counter names onto them).
A source that has nothing yet (replay before ``learning_starts``) yields
:data:`NOT_READY`; :meth:`~LocalIterator.union` then moves on to the next source.
"""

from __future__ import annotations

import collections
import math
import random
import threading
from collections.abc import Callable, Iterable, Iterator, MutableMapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from rlstack.utils.timers import TimerStat

if TYPE_CHECKING:
    from rlstack.evaluation.worker_set import WorkerSet

__all__ = ["LocalIterator", "MetricsContext", "NOT_READY", "ParallelIterator", "SharedMetrics"]

T = TypeVar("T")


class _NextValueNotReady(Exception):
    """What a source yields when it has no item yet (1.x's name; an item, never raised)."""


# The one not-ready marker; 1.x code compares with isinstance(item, _NextValueNotReady).
NOT_READY = _NextValueNotReady()


class MetricsContext:
    """The state the operators of one execution plan share (1.x's ``MetricsContext``).

    Args:
        counters: Step counters by name (a trainer passes its own, under 1.x's names too).
        timers: ``TimerStat`` by name; a new name gets a new timer.
        trainer: The trainer running the plan (None for operators used on their own).

    Attributes:
        counters: As given (a ``defaultdict(int)`` by default).
        timers: As given (a ``defaultdict(TimerStat)`` by default).
        info: Anything else; ``info["learner"]`` holds the last learner info by policy id.
        current_actor: The worker that sampled the item being processed (set by
            :meth:`ParallelIterator.gather_async`), read by
            :meth:`LocalIterator.zip_with_source_actor`.
        trainer: As given.
    """

    def __init__(self, counters: MutableMapping[str, int] | None = None,
                 timers: MutableMapping[str, TimerStat] | None = None, trainer: Any = None) -> None:
        self.counters: MutableMapping[str, int] = collections.defaultdict(int) if counters is None else counters
        self.timers: MutableMapping[str, TimerStat] = collections.defaultdict(TimerStat) if timers is None else timers
        self.info: dict[str, Any] = {}
        self.current_actor: Any = None
        self.trainer = trainer
        # The result dict the plan's metrics reporting built last (the trainer returns it).
        self.last_result: dict[str, Any] | None = None

    def save(self) -> dict[str, Any]:
        """A copy of the counters and info (1.x's ``save``)."""
        return {"counters": dict(self.counters), "info": dict(self.info)}

    def restore(self, values: dict[str, Any]) -> None:
        """Loads what :meth:`save` returned."""
        self.counters.update(values.get("counters", {}))
        self.info = dict(values.get("info", {}))


class SharedMetrics:
    """Points iterators at one :class:`MetricsContext` (1.x's ``SharedMetrics``): a union
    of iterator chains makes all of theirs the same.

    Args:
        metrics: The context (None: the one active now, see :meth:`LocalIterator.get_metrics`,
            or a new one).
        parents: Holders to point at the same context.
    """

    def __init__(self, metrics: MetricsContext | None = None, parents: list["SharedMetrics"] | None = None) -> None:
        self.parents = parents or []
        self.set(metrics or _active_context() or MetricsContext())

    def set(self, metrics: MetricsContext) -> None:
        """Points this holder and its parents at ``metrics``."""
        self.metrics = metrics
        for parent in self.parents:
            parent.set(metrics)

    def get(self) -> MetricsContext:
        """The context."""
        return self.metrics


_LOCAL = threading.local()


def _active_context() -> MetricsContext | None:
    return getattr(_LOCAL, "metrics", None)


class _Activated:
    # Makes a context the active one for a `with` block (nested blocks restore the outer one).
    def __init__(self, metrics: MetricsContext) -> None:
        self.metrics = metrics

    def __enter__(self) -> MetricsContext:
        self.outer = _active_context()
        _LOCAL.metrics = self.metrics
        return self.metrics

    def __exit__(self, *exc: object) -> None:
        _LOCAL.metrics = self.outer


def activate(metrics: MetricsContext) -> _Activated:
    """``with activate(context):`` makes ``context`` what :meth:`LocalIterator.get_metrics`
    returns inside the block (the trainer wraps building its plan and each ``next()``)."""
    return _Activated(metrics)


def _weighted_count(weight: float | str) -> int:
    # A weight of 1.5 pulls 1 or 2 items, 2 on average every other round; "*" pulls what
    # is ready, at most 100 items (1.x's bound).
    if weight == "*":
        return 100
    whole = math.floor(float(weight))
    return whole + (1 if random.random() < float(weight) - whole else 0)


class LocalIterator(Generic[T]):
    """An iterator built of transformations, pulled by ``next()`` (1.x's ``LocalIterator``).

    Args:
        base_iterator: A function ``f(timeout)`` returning the source iterable (1.x's
            form), or an iterable.
        shared_metrics: The metrics holder (None: the active context's).
        name: For ``repr``.
    """

    def __init__(self, base_iterator: Callable[[Any], Iterable[T]] | Iterable[T],
                 shared_metrics: SharedMetrics | None = None, name: str = "LocalIterator") -> None:
        self._base = base_iterator
        self._built: Iterator[Any] | None = None
        self.shared_metrics = shared_metrics or SharedMetrics()
        self.name = name

    @staticmethod
    def get_metrics() -> MetricsContext:
        """The context of the plan that is running (1.x's ``_get_shared_metrics()``).

        Raises:
            ValueError: Outside a plan's iteration or construction.
        """
        metrics = _active_context()
        if metrics is None:
            raise ValueError("No execution plan is running: LocalIterator.get_metrics() (_get_shared_metrics()) "
                             "works inside an operator while a trainer pulls its execution plan, or while "
                             "execution_plan(workers, config) builds it.")
        return metrics

    # ----- iterating -------------------------------------------------------------------

    def _iterator(self) -> Iterator[Any]:
        if self._built is None:
            base = self._base(None) if callable(self._base) else self._base
            self._built = iter(base)
        return self._built

    def __iter__(self) -> Iterator[T]:
        return self

    def __next__(self) -> T:
        with activate(self.shared_metrics.get()):
            return next(self._iterator())

    def __repr__(self) -> str:
        return f"LocalIterator[{self.name}]"

    def _chain(self, transform: Callable[[Iterator[Any]], Iterator[Any]], suffix: str) -> "LocalIterator[Any]":
        # A new iterator over this one's items passed through `transform` (lazy: nothing is
        # pulled until the new one is).
        return LocalIterator(lambda _timeout: transform(self._iterator()), self.shared_metrics, self.name + suffix)

    # ----- transformations ---------------------------------------------------------------

    def for_each(self, fn: Callable[[T], Any], max_concurrency: int = 1, resources: Any = None) -> "LocalIterator[Any]":
        """Each item mapped through ``fn`` (not-ready markers pass through; an ``fn`` that
        returns the marker is called again with the same item on the next pull).

        Raises:
            ValueError: For ``max_concurrency`` other than 1 (1.x ran ``fn`` as Ray tasks).
        """
        if max_concurrency != 1:
            raise ValueError(f"for_each(max_concurrency={max_concurrency}) is not supported by rlstack's "
                             "LocalIterator, which runs each function in the driver, one item at a time; "
                             "drop max_concurrency (and resources).")

        def apply(items: Iterator[Any]) -> Iterator[Any]:
            for item in items:
                if isinstance(item, _NextValueNotReady):
                    yield item
                    continue
                while True:
                    result = fn(item)
                    yield result
                    if not isinstance(result, _NextValueNotReady):
                        break

        return self._chain(apply, ".for_each()")

    def filter(self, fn: Callable[[T], bool]) -> "LocalIterator[T]":
        """The items for which ``fn(item)`` is true (not-ready markers pass through)."""
        def apply(items: Iterator[Any]) -> Iterator[Any]:
            for item in items:
                if isinstance(item, _NextValueNotReady) or fn(item):
                    yield item

        return self._chain(apply, ".filter()")

    def batch(self, n: int) -> "LocalIterator[list[T]]":
        """Lists of ``n`` consecutive items."""
        def apply(items: Iterator[Any]) -> Iterator[Any]:
            group: list[Any] = []
            for item in items:
                if isinstance(item, _NextValueNotReady):
                    yield item
                    continue
                group.append(item)
                if len(group) >= n:
                    yield group
                    group = []
            if group:
                yield group

        return self._chain(apply, f".batch({n})")

    def flatten(self) -> "LocalIterator[Any]":
        """The elements of each (iterable) item, one by one."""
        def apply(items: Iterator[Any]) -> Iterator[Any]:
            for item in items:
                if isinstance(item, _NextValueNotReady):
                    yield item
                else:
                    yield from item

        return self._chain(apply, ".flatten()")

    def combine(self, fn: Callable[[T], list[Any]]) -> "LocalIterator[Any]":
        """``fn(item)`` returns a list (maybe empty) of output items: ``ConcatBatches`` holds
        batches back until it has enough rows."""
        combined = self.for_each(fn).flatten()
        combined.name = self.name + ".combine()"
        return combined

    def zip_with_source_actor(self) -> "LocalIterator[tuple[Any, T]]":
        """``(worker that produced the item, item)`` pairs, after
        :meth:`ParallelIterator.gather_async` (which records the worker).

        Raises:
            ValueError: When pulled, if the items' source is not known.
        """
        def zip_item(item: Any) -> tuple[Any, Any]:
            actor = LocalIterator.get_metrics().current_actor
            if actor is None:
                raise ValueError("zip_with_source_actor() needs items from ParallelRollouts(workers, mode='async') "
                                 "or ParallelIterator.gather_async(), which record the worker of each item.")
            return actor, item

        zipped = self.for_each(zip_item)
        zipped.name = self.name + ".zip_with_source_actor()"
        return zipped

    def duplicate(self, n: int) -> list["LocalIterator[T]"]:
        """``n`` iterators that each see every item; one that is ahead of the others
        yields not-ready markers until they catch up.

        Raises:
            ValueError: For ``n < 2``.
        """
        if n < 2:
            raise ValueError(f"duplicate(n={n}): the number of copies must be at least 2.")
        queues: list[collections.deque] = [collections.deque() for _ in range(n)]

        def copy(i: int) -> Iterator[Any]:
            while True:
                if len(queues[i]) < max(len(q) for q in queues):
                    yield NOT_READY  # the others are behind: let them pull first
                    continue
                if not queues[i]:
                    try:
                        item = next(self._iterator())
                    except StopIteration:
                        return
                    for q in queues:
                        q.append(item)
                yield queues[i].popleft()

        return [LocalIterator(lambda _timeout, i=i: copy(i), self.shared_metrics, f"{self.name}.duplicate[{i}]")
                for i in range(n)]

    def union(self, *others: "LocalIterator[T]", deterministic: bool = False,
              round_robin_weights: list[float | str] | None = None) -> "LocalIterator[T]":
        """Items of this iterator and ``others`` in turn: ``round_robin_weights[i]`` items
        of the i-th per round (``"*"``: as many as it has ready, at most 100); a source
        with nothing ready gives its turn to the next. ``deterministic`` is accepted for
        1.x's sake: the order is always this round robin (everything runs in the driver).

        Raises:
            ValueError: If an argument is not a LocalIterator, or the weights do not match
                the iterators.
        """
        for other in others:
            if not isinstance(other, LocalIterator):
                raise ValueError(f"union() takes LocalIterators, got {type(other).__name__}.")
        sources = [self, *others]
        weights = list(round_robin_weights) if round_robin_weights else [1] * len(sources)
        if len(weights) != len(sources):
            raise ValueError(f"round_robin_weights has {len(weights)} entries for {len(sources)} iterators; give one "
                             "weight per iterator.")
        shared = SharedMetrics(self.shared_metrics.get(), parents=[s.shared_metrics for s in sources])

        def rounds(_timeout: Any) -> Iterator[Any]:
            active = list(zip(weights, sources))
            while active:
                for weight, source in list(active):
                    try:
                        for _ in range(_weighted_count(weight)):
                            item = next(source._iterator())
                            if isinstance(item, _NextValueNotReady):
                                break  # nothing ready there: the next source's turn
                            yield item
                    except StopIteration:
                        active.remove((weight, source))

        return LocalIterator(rounds, shared, f"Union[{', '.join(s.name for s in sources)}]")

    def take(self, n: int) -> list[T]:
        """The next ``n`` items (fewer if the iterator ends)."""
        items = []
        for item in self:
            items.append(item)
            if len(items) >= n:
                break
        return items

    def show(self, n: int = 20) -> None:
        """Prints the next ``n`` items."""
        for item in self.take(n):
            print(item)


class ParallelIterator:
    """The rollout workers' batches before they are gathered (1.x's ``ParallelIterator``
    over its workers, what ``ParallelRollouts(workers, mode="raw")`` returns): one shard
    per remote worker, or the driver's worker when there are none.

    Args:
        workers: The WorkerSet.
        transforms: Functions applied to each batch in the worker's process (see
            :meth:`for_each`).
    """

    def __init__(self, workers: "WorkerSet", transforms: tuple[Callable[[Any], Any], ...] = ()) -> None:
        self.workers = workers
        self.transforms = transforms
        self.shared_metrics = SharedMetrics()

    def __repr__(self) -> str:
        return f"ParallelIterator[{self.num_shards()} shards]"

    def num_shards(self) -> int:
        """The number of sampling workers."""
        return self.workers.num_remote_workers or 1

    def for_each(self, fn: Callable[[Any], Any]) -> "ParallelIterator":
        """``fn(batch)`` applied where the batch is sampled: in the remote worker's process
        (``fn`` goes there by cloudpickle; the plan's metrics are not there), or in the
        driver without remote workers."""
        return ParallelIterator(self.workers, (*self.transforms, fn))

    def _local_item(self) -> Any:
        return _sample_and_apply(self.workers.local_worker(), self.transforms)

    def _request(self, handle: Any) -> Any:
        return handle.apply.remote(_sample_and_apply, self.transforms)

    def batch_across_shards(self) -> LocalIterator[list[Any]]:
        """One item from every worker per ``next()``, as a list (sampled in parallel; a
        worker that fails is left out, as in ``WorkerSet.sample``)."""
        def rounds(_timeout: Any) -> Iterator[list[Any]]:
            while True:
                if not self.workers.num_remote_workers:
                    yield [self._local_item()]
                else:
                    yield list(self.workers.call_healthy(self._request).values())

        return LocalIterator(rounds, self.shared_metrics, "ParallelIterator.batch_across_shards()")

    def gather_sync(self) -> LocalIterator[Any]:
        """The workers' items one by one, a round from every worker at a time."""
        gathered = self.batch_across_shards().flatten()
        gathered.name = "ParallelIterator.gather_sync()"
        return gathered

    def gather_async(self, batch_ms: int = 0, num_async: int = 1) -> LocalIterator[Any]:
        """Items in the order the workers finish them: ``num_async`` requests stay in
        flight per worker, and each one that finishes is replaced. The item's worker is
        the context's ``current_actor`` while it passes through the chain.

        Raises:
            ValueError: For ``num_async < 1``.
        """
        if num_async < 1:
            raise ValueError(f"gather_async(num_async={num_async}): at least one request per worker must be in flight.")

        def arrivals(_timeout: Any) -> Iterator[Any]:
            if not self.workers.num_remote_workers:
                while True:
                    LocalIterator.get_metrics().current_actor = self.workers.local_worker()
                    yield self._local_item()
            import ray

            workers = self.workers
            in_flight: dict[Any, int] = {}

            def request(position: int) -> None:
                in_flight[self._request(workers.remote_workers()[position])] = position

            for position in workers.healthy_positions():
                for _ in range(num_async):
                    request(position)
            while in_flight:
                ready, _ = ray.wait(list(in_flight), num_returns=1)
                position = in_flight.pop(ready[0])
                ok, item = workers.fetch(ready[0], position)
                if not ok:
                    workers.replace_requests(in_flight, position, request, num_async)
                    continue
                request(position)
                LocalIterator.get_metrics().current_actor = workers.remote_workers()[position]
                yield item

        return LocalIterator(arrivals, self.shared_metrics, "ParallelIterator.gather_async()")


def _sample_and_apply(worker: Any, transforms: tuple[Callable[[Any], Any], ...]) -> Any:
    # Runs in the worker's process (RolloutWorker.apply): one sample, then the transforms.
    item = worker.sample()
    for fn in transforms:
        item = fn(item)
    return item
