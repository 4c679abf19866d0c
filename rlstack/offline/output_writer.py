"""OutputWriter: where a worker's sampled batches are written (1.13's
``ray.rllib.offline.OutputWriter`` and ``NoopOutput``)."""

from __future__ import annotations

from rlstack.sample_batch import MultiAgentBatch, SampleBatch


class OutputWriter:
    """Subclasses write each batch a worker samples."""

    def write(self, sample_batch: SampleBatch | MultiAgentBatch) -> None:
        """Saves one batch."""
        raise NotImplementedError

    def close(self) -> None:
        """Flushes and closes what the writer holds open."""


class NoopOutput(OutputWriter):
    """Writes nothing (``output: None``)."""

    def write(self, sample_batch: SampleBatch | MultiAgentBatch) -> None:
        return None
