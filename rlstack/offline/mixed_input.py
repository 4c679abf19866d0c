"""MixedInput: several experience sources drawn with given probabilities
(``input: {"sampler": 0.4, "/data/logs": 0.6}``; 1.13's ``ray.rllib.offline.MixedInput``)."""

from __future__ import annotations

import random
from typing import Any

from rlstack.offline.input_reader import InputReader
from rlstack.offline.io_context import IOContext
from rlstack.sample_batch import MultiAgentBatch, SampleBatch


class MixedInput(InputReader):
    """Each :meth:`next` draws a source by its probability and returns its next batch.

    Args:
        dist: ``{source: probability}``; a source is ``"sampler"`` (the worker's env), a
            path, glob or directory of JSON files, or an :class:`InputReader`.
            Probabilities must sum to 1.
        ioctx: The worker's :class:`IOContext`.

    Raises:
        ValueError: Probabilities that are negative or do not sum to 1, or a path that
            names no file.
    """

    def __init__(self, dist: dict[Any, float], ioctx: IOContext | None = None) -> None:
        from rlstack.offline.json_reader import JsonReader

        self.ioctx = ioctx or IOContext()
        if not dist:
            raise ValueError("input as a dict needs at least one source: {'sampler': 0.5, '/path': 0.5}")
        bad = {k: p for k, p in dist.items() if not isinstance(p, (int, float)) or isinstance(p, bool) or p < 0}
        if bad:
            raise ValueError(f"input: each source's probability must be a number >= 0, got {bad}")
        total = float(sum(dist.values()))
        if abs(total - 1.0) > 1e-6:
            raise ValueError(f"input: the probabilities of {list(dist)} sum to {total:g}, not 1; rescale them")
        self.sources: list[InputReader] = []
        self.weights: list[float] = []
        for source, probability in dist.items():
            if isinstance(source, InputReader):
                reader = source
            elif source == "sampler":
                reader = self.ioctx.default_sampler_input()
            else:
                reader = JsonReader(source, self.ioctx)
            self.sources.append(reader)
            self.weights.append(float(probability))
        seed = self.ioctx.config.get("seed")
        self._rng = random.Random(None if seed is None else seed + 104729 * self.ioctx.worker_index)

    def next(self) -> SampleBatch | MultiAgentBatch:
        return self._rng.choices(self.sources, weights=self.weights)[0].next()

    def close(self) -> None:
        for source in self.sources:
            if hasattr(source, "close"):
                source.close()
