"""JsonWriter: sampled batches as JSON lines in 1.13's layout (``output: DIR``).

Examples:
    >>> import tempfile, numpy as np
    >>> from rlstack.offline.json_reader import JsonReader
    >>> from rlstack.sample_batch import SampleBatch
    >>> path = tempfile.mkdtemp()
    >>> writer = JsonWriter(path)
    >>> writer.write(SampleBatch(obs=np.zeros((3, 2), np.float32), actions=[0, 1, 0], rewards=[1.0, 1.0, 1.0]))
    >>> writer.close()
    >>> JsonReader(path).next()["actions"].tolist()
    [0, 1, 0]
"""

from __future__ import annotations

import os
import time
from typing import IO, Any

from rlstack.offline.io_context import IOContext
from rlstack.offline.json_format import to_json
from rlstack.offline.output_writer import OutputWriter
from rlstack.sample_batch import MultiAgentBatch, SampleBatch

DEFAULT_MAX_FILE_SIZE = 64 * 1024 * 1024


class JsonWriter(OutputWriter):
    """Writes batches into ``path`` as ``output-<time>_worker-<index>_<n>.json`` files,
    one batch a line, a new file once one holds ``max_file_size`` bytes. Each batch is
    flushed as it is written: a run that crashes keeps every batch written before.

    Args:
        path: The directory (created if missing); ``"logdir"``: the trial's log directory.
        ioctx: The worker's :class:`IOContext` (its index names the files).
        max_file_size: Bytes per file before the next one starts.
        compress_columns: Columns written packed (LZ4 + base64, as 1.13).
    """

    def __init__(self, path: str, ioctx: IOContext | None = None, max_file_size: int = DEFAULT_MAX_FILE_SIZE,
                 compress_columns: Any = ("obs", "new_obs")) -> None:
        self.ioctx = ioctx or IOContext()
        if path == "logdir":
            path = self.ioctx.log_dir
        if "://" in str(path) and not str(path).startswith("file://"):
            raise ValueError(f"output {path!r}: rlstack writes experience to local or mounted shared directories; "
                             "write to a mounted path (NFS, a FUSE-mounted bucket) and copy it to object storage")
        self.path = os.path.abspath(os.path.expanduser(str(path).removeprefix("file://")))
        try:
            os.makedirs(self.path, exist_ok=True)
        except OSError as err:
            raise ValueError(f"output {path!r}: cannot create the directory ({err})") from err
        if int(max_file_size) <= 0:
            raise ValueError(f"output_max_file_size must be > 0 bytes, got {max_file_size!r}")
        self.max_file_size = int(max_file_size)
        self.compress_columns = list(compress_columns or ())
        self._stamp = time.strftime("%Y-%m-%d_%H-%M-%S")
        self._file_index = 0
        self._file: IO[str] | None = None
        self._bytes = 0

    def _open(self) -> IO[str]:
        if self._file is None or self._bytes >= self.max_file_size:
            if self._file is not None:
                self._file.close()
                self._file_index += 1
            name = f"output-{self._stamp}_worker-{self.ioctx.worker_index}_{self._file_index}.json"
            self._file = open(os.path.join(self.path, name), "w", encoding="utf-8")  # noqa: SIM115 - kept open
            self._bytes = 0
        return self._file

    def write(self, sample_batch: SampleBatch | MultiAgentBatch) -> None:
        line = to_json(sample_batch, self.compress_columns) + "\n"
        handle = self._open()
        handle.write(line)
        handle.flush()
        self._bytes += len(line)

    @property
    def cur_file(self) -> str | None:
        """The file being written."""
        return None if self._file is None else self._file.name

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass
