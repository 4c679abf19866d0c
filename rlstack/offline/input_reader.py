"""InputReader: where a worker's experience comes from when it is not its own sampler
(1.13's ``ray.rllib.offline.InputReader``)."""

from __future__ import annotations

from typing import Any

from rlstack.sample_batch import MultiAgentBatch, SampleBatch


class InputReader:
    """Subclasses return one batch per :meth:`next` call, forever (files are read again
    from the start when they run out)."""

    def next(self) -> SampleBatch | MultiAgentBatch:
        """The next batch of experience."""
        raise NotImplementedError

    def close(self) -> None:
        """Releases open files or streams (the worker calls it when it stops)."""

    def __iter__(self):
        while True:
            yield self.next()


class SamplerInput(InputReader):
    """The worker's env sampler as a reader: ``"sampler"`` in an ``input`` mix."""

    def __init__(self, worker: Any) -> None:
        self.worker = worker

    def next(self) -> SampleBatch | MultiAgentBatch:
        return self.worker.sample_from_env()
