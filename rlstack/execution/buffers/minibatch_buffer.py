"""RLlib 1.13's ``MinibatchBuffer`` (``ray.rllib.execution.buffers.minibatch_buffer``): a
ring of recent train batches, each handed out several times before a new one takes its slot.

IMPALA's and APPO's learner thread reads its queue through one (``minibatch_buffer_size``
slots, ``num_sgd_iter`` passes): slot after slot in turn, so with 16 slots and 10 passes the
learner steps on batches 1..16, then 1..16 again, ten times in all, before batch 17 is
taken from the queue. A slot whose item has had all its passes is refilled from the queue
when the ring comes back to it.
"""

from __future__ import annotations

import collections
import queue
from typing import Any

__all__ = ["MinibatchBuffer"]


class MinibatchBuffer:
    """A ring of ``size`` slots over ``inqueue``; each item is handed out ``num_passes`` times.

    Args:
        inqueue: Where new items come from.
        size: Slots in the ring (items held at once).
        timeout: Seconds :meth:`get` waits for a new item (0: it does not wait).
        num_passes: How many times each item is handed out, once the ramp is over.
        init_num_passes: Passes of the first item; each new item gets one more, up to
            ``num_passes`` (1.13's ramp; pass ``num_passes`` for none, as its learner
            thread did).

    Raises:
        ValueError: If ``size``, ``num_passes`` or ``init_num_passes`` is below 1.

    Examples:
        >>> import queue
        >>> q = queue.Queue()
        >>> for item in "ab":
        ...     q.put(item)
        >>> ring = MinibatchBuffer(q, size=2, timeout=0, num_passes=2, init_num_passes=2)
        >>> [ring.get() for _ in range(4)]
        [('a', False), ('b', False), ('a', True), ('b', True)]
    """

    def __init__(self, inqueue: queue.Queue, size: int, timeout: float, num_passes: int,
                 init_num_passes: int = 1) -> None:
        for name, value in (("size", size), ("num_passes", num_passes), ("init_num_passes", init_num_passes)):
            if int(value) < 1:
                raise ValueError(f"MinibatchBuffer {name} must be >= 1, got {value!r}.")
        self.inqueue = inqueue
        self.size = int(size)
        self.timeout = float(timeout)
        self.num_passes = int(num_passes)
        self._passes_of_next = min(int(init_num_passes), self.num_passes)
        # The slot to serve is always at the left: [item, passes left], or None once spent.
        self._ring: collections.deque[list[Any] | None] = collections.deque([None] * self.size)

    def get(self) -> tuple[Any, bool]:
        """The next item of the ring, taking a new one from ``inqueue`` into a spent slot.

        Returns:
            ``(item, released)``: ``released`` is True on the item's last pass (its slot
            is free again).

        Raises:
            queue.Empty: If the slot needs a new item and none came within ``timeout``;
                the ring stays where it was, so the next call tries the same slot.
        """
        entry = self._ring[0]
        if entry is None:
            # Taken before anything changes, so an empty queue leaves the ring as it was.
            fresh = self.inqueue.get(timeout=self.timeout) if self.timeout > 0 else self.inqueue.get_nowait()
            entry = [fresh, self._passes_of_next]
            self._passes_of_next = min(self._passes_of_next + 1, self.num_passes)
        entry[1] -= 1
        released = entry[1] == 0
        # A spent slot drops its item (no reference kept to a used batch); then the ring turns.
        self._ring[0] = None if released else entry
        self._ring.rotate(-1)
        return entry[0], released
