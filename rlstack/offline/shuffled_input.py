"""ShuffledInput: batches of another reader handed out in a random order
(``shuffle_buffer_size``; 1.13's ``ray.rllib.offline.ShuffledInput``)."""

from __future__ import annotations

import random

from rlstack.offline.input_reader import InputReader
from rlstack.sample_batch import MultiAgentBatch, SampleBatch


class ShuffledInput(InputReader):
    """Keeps ``n`` batches of ``child``; each :meth:`next` returns one of them at random
    and puts the child's next batch in its place.

    Args:
        child: The reader to shuffle.
        n: Batches kept (0 or 1: no shuffling).
        seed: Seeds the choice.
    """

    def __init__(self, child: InputReader, n: int = 0, seed: int | None = None) -> None:
        self.child = child
        self.n = int(n)
        self.buffer: list[SampleBatch | MultiAgentBatch] = []
        self._rng = random.Random(seed)

    def next(self) -> SampleBatch | MultiAgentBatch:
        if self.n <= 1:
            return self.child.next()
        while len(self.buffer) < self.n:
            self.buffer.append(self.child.next())
        index = self._rng.randrange(self.n)
        batch, self.buffer[index] = self.buffer[index], self.child.next()
        return batch

    def close(self) -> None:
        if hasattr(self.child, "close"):
            self.child.close()
