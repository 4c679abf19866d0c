"""IOContext: what an input reader or output writer knows of the worker it serves (1.13's
``ray.rllib.offline.IOContext``)."""

from __future__ import annotations

import os
from typing import Any


class IOContext:
    """Where a reader or writer runs.

    Args:
        log_dir: The trial's log directory (``output: "logdir"`` writes there).
        config: The trainer's config.
        worker_index: 0 for the driver's worker, 1..N for remote workers.
        worker: The :class:`~rlstack.evaluation.rollout_worker.RolloutWorker`, if any.
    """

    def __init__(self, log_dir: str | None = None, config: dict | None = None, worker_index: int = 0,
                 worker: Any = None) -> None:
        self.log_dir = log_dir or os.getcwd()
        self.config = config or {}
        self.worker_index = worker_index
        self.worker = worker

    @property
    def input_config(self) -> dict:
        """``config["input_config"]`` (empty when unset)."""
        return self.config.get("input_config") or {}

    @property
    def output_config(self) -> dict:
        """``config["output_config"]`` (empty when unset)."""
        return self.config.get("output_config") or {}

    def default_sampler_input(self) -> Any:
        """The worker's own sampler, as an input reader (``input: "sampler"`` in a mix)."""
        from rlstack.offline.input_reader import SamplerInput

        if self.worker is None:
            raise ValueError("'sampler' as an input needs a rollout worker with an env")
        return SamplerInput(self.worker)
