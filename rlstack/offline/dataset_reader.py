"""DatasetReader: experience read through Ray Data (``input: "dataset"``, with
``input_config: {"format": "json" | "parquet", "path": ...}``; 1.13's
``ray.rllib.offline.DatasetReader``).

Ray Data reads the files in parallel tasks on the cluster and streams them to the
worker, so a data set larger than one machine's memory, on storage every node can reach,
is read without copying it first. A row of a JSON file is one batch (one line, as
:class:`~rlstack.offline.json_writer.JsonWriter` writes it); a row of a Parquet file is
one step (a column per batch column). With several rollout workers, worker ``i`` of
``N`` reads files ``i``, ``i + N``, ... (every worker reads all when there are fewer
files than workers).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlstack.offline.input_reader import InputReader
from rlstack.offline.io_context import IOContext
from rlstack.offline.json_format import _batch_from_columns
from rlstack.offline.json_reader import expand_paths
from rlstack.sample_batch import SampleBatch

FORMATS = ("json", "parquet")


class DatasetReader(InputReader):
    """Streams batches from a Ray Data ``Dataset`` over the input files, again from the
    start when it runs out.

    Args:
        ioctx: The worker's :class:`IOContext` (``input_config`` says the format and path).
        ds: A ready ``ray.data.Dataset`` to read instead of ``input_config``'s files.

    Raises:
        ValueError: A missing or unknown ``format`` or ``path``.
    """

    def __init__(self, ioctx: IOContext, ds: Any = None) -> None:
        self.ioctx = ioctx
        cfg = ioctx.input_config
        self.format = cfg.get("format", "json")
        self.batch_size = int(cfg.get("batch_size") or ioctx.config.get("rollout_fragment_length") or 1)
        self.shapes: dict = {}  # Parquet: each array column's step shape (parquet_writer.py)
        if ds is None:
            ds = self._read(cfg)
        self.ds = ds
        self._rows: Any = None

    def _read(self, cfg: dict) -> Any:
        import ray.data

        if self.format not in FORMATS:
            raise ValueError(f"input_config['format'] must be one of {FORMATS}, got {self.format!r}")
        if not cfg.get("path"):
            raise ValueError("input: 'dataset' needs input_config={'format': 'json', 'path': FILE | DIR | GLOB | "
                             "[...]} naming the experience files")
        suffixes = (".json", ".jsonl") if self.format == "json" else (".parquet",)
        files = expand_paths(cfg["path"], suffixes) if not _remote(cfg["path"]) else cfg["path"]
        n, i = self.ioctx.config.get("num_workers", 0), self.ioctx.worker_index
        if isinstance(files, list) and n > 0 and i > 0 and len(files) >= n:
            files = files[i - 1::n]
        if self.format == "parquet" and isinstance(files, list):
            import json

            import pyarrow.parquet as pq

            from rlstack.offline.parquet_writer import SHAPES_KEY

            metadata = pq.read_schema(files[0]).metadata or {}
            self.shapes = json.loads(metadata.get(SHAPES_KEY, b"{}"))
        # A worker reads the stream over and over: no progress bar on each pass.
        ray.data.DataContext.get_current().enable_progress_bars = False
        reader = ray.data.read_json if self.format == "json" else ray.data.read_parquet
        return reader(files)

    def _next_row(self) -> dict:
        for _ in range(2):
            if self._rows is None:
                self._rows = (row for row in self.ds.iter_rows())
            try:
                return next(self._rows)
            except StopIteration:
                self._rows = None
        raise ValueError(f"the dataset of input_config {self.ioctx.input_config} holds no rows")

    def close(self) -> None:
        """Ends the stream (while Ray is still up, so that Ray Data closes it quietly)."""
        rows, self._rows = self._rows, None
        if rows is not None and hasattr(rows, "close"):
            rows.close()

    def next(self) -> SampleBatch:
        if self.format == "json":
            row = dict(self._next_row())
            row.pop("type", None)
            return _batch_from_columns({k: _list(v) for k, v in row.items() if v is not None})
        from rlstack.offline.parquet_writer import unflatten

        rows = [self._next_row() for _ in range(self.batch_size)]
        return _batch_from_columns({key: unflatten(key, np.stack([np.asarray(row[key]) for row in rows]), self.shapes)
                                    for key in rows[0]})


def _remote(path: Any) -> bool:
    return isinstance(path, str) and "://" in path and not path.startswith("file://")


def _list(value: Any) -> Any:
    # Arrow hands nested lists back as arrays of arrays: one numpy array per column.
    if isinstance(value, np.ndarray) and value.dtype == object:
        return [_list(v) for v in value]
    return value
