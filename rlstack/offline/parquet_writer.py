"""ParquetWriter: sampled batches as Parquet files, one row per step
(``output_config: {"format": "parquet"}``), for data sets that Ray Data, pandas or any
columnar engine reads; ``input: "dataset"`` with ``input_config: {"format": "parquet",
"path": DIR}`` reads them back through Ray Data.

A column of a batch is a column of the file: numbers as they are, arrays per step (an
observation vector) as fixed-size lists of their flattened values with the step shape in
the file's metadata. Each ``write`` adds one file (``output-<time>_worker-<i>_<n>.parquet``):
a run that crashes keeps every file it finished.
"""

from __future__ import annotations

import json
import os
import time

import numpy as np

from rlstack.offline.io_context import IOContext
from rlstack.offline.output_writer import OutputWriter
from rlstack.sample_batch import MultiAgentBatch, SampleBatch

SHAPES_KEY = b"rlstack.shapes"


class ParquetWriter(OutputWriter):
    """Writes each single-agent batch as a Parquet file in ``path``.

    Args:
        path: The directory (created if missing).
        ioctx: The worker's :class:`IOContext` (its index names the files).
    """

    def __init__(self, path: str, ioctx: IOContext | None = None) -> None:
        self.ioctx = ioctx or IOContext()
        self.path = os.path.abspath(os.path.expanduser(path))
        os.makedirs(self.path, exist_ok=True)
        self._stamp = time.strftime("%Y-%m-%d_%H-%M-%S")
        self._index = 0

    def write(self, sample_batch: SampleBatch | MultiAgentBatch) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        if isinstance(sample_batch, MultiAgentBatch):
            raise ValueError("output_config format 'parquet' writes single-agent batches; write multi-agent "
                             "experience as JSON (the default format)")
        columns, shapes = {}, {}
        for key, value in sample_batch.items():
            if value.dtype == object:
                columns[key] = pa.array([json.dumps(item, default=repr) for item in value])
            elif value.ndim > 1:
                shapes[key] = list(value.shape[1:])
                flat = value.reshape(len(value), -1)
                columns[key] = pa.FixedSizeListArray.from_arrays(pa.array(flat.ravel()), flat.shape[1])
            else:
                columns[key] = pa.array(value)
        table = pa.table(columns).replace_schema_metadata({SHAPES_KEY: json.dumps(shapes).encode()})
        name = f"output-{self._stamp}_worker-{self.ioctx.worker_index}_{self._index}.parquet"
        tmp = os.path.join(self.path, f".{name}.tmp")
        pq.write_table(table, tmp)
        os.replace(tmp, os.path.join(self.path, name))  # readers never see half a file
        self._index += 1


def unflatten(key: str, values: np.ndarray, shapes: dict) -> np.ndarray:
    """A column read back from Parquet rows in its recorded step shape."""
    if key in shapes:
        return np.asarray(values).reshape(len(values), *shapes[key])
    return np.asarray(values)
