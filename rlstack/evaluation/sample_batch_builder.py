"""SampleBatchBuilder: a batch built one step at a time (1.13's
``ray.rllib.evaluation.sample_batch_builder``), for scripts that record experience
themselves and write it with :class:`~rlstack.offline.json_writer.JsonWriter`.

Examples:
    >>> builder = SampleBatchBuilder()
    >>> for t in range(3):
    ...     builder.add_values(t=t, eps_id=0, obs=[0.0, 1.0], actions=t % 2, rewards=1.0, dones=t == 2)
    >>> batch = builder.build_and_reset()
    >>> batch.count, batch["actions"].tolist(), builder.count
    (3, [0, 1, 0], 0)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlstack.sample_batch import SampleBatch


class SampleBatchBuilder:
    """Collects one row per :meth:`add_values` call; :meth:`build_and_reset` turns them
    into a :class:`SampleBatch` (one column per key, in the order first added)."""

    def __init__(self) -> None:
        self.buffers: dict[str, list[Any]] = {}
        self.count = 0

    def add_values(self, **values: Any) -> None:
        """Adds one row; every row must name the same columns.

        Raises:
            ValueError: A row whose columns differ from the rows before it.
        """
        if self.count and set(values) != set(self.buffers):
            missing, extra = sorted(set(self.buffers) - set(values)), sorted(set(values) - set(self.buffers))
            raise ValueError(f"row {self.count} has other columns than the rows before it: missing {missing}, "
                             f"new {extra}")
        for key, value in values.items():
            self.buffers.setdefault(key, []).append(value)
        self.count += 1

    def add_batch(self, batch: SampleBatch) -> None:
        """Adds every row of ``batch``."""
        for row in range(batch.count):
            self.add_values(**{key: value[row] for key, value in batch.items()})

    def build_and_reset(self) -> SampleBatch:
        """The rows so far as a batch; the builder starts empty again."""
        columns = {}
        for key, rows in self.buffers.items():
            if key == "infos" or any(isinstance(row, dict) for row in rows):
                array = np.empty(len(rows), dtype=object)
                array[:] = rows
                columns[key] = array
            else:
                columns[key] = np.asarray(rows)
        batch = SampleBatch(columns)
        self.buffers, self.count = {}, 0
        return batch
