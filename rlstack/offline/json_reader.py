"""JsonReader: experience files in 1.13's JSON layout, read back batch by batch
(``input: FILE | GLOB | DIR | [..]``; 1.13's ``ray.rllib.offline.JsonReader``)."""

from __future__ import annotations

import glob
import os
import random
from collections.abc import Iterator
from typing import IO, Any

from rlstack.offline.input_reader import InputReader
from rlstack.offline.io_context import IOContext
from rlstack.offline.json_format import from_json
from rlstack.sample_batch import MultiAgentBatch, SampleBatch

_SUFFIXES = (".json", ".jsonl")


def expand_paths(inputs: Any, suffixes: tuple[str, ...] = _SUFFIXES) -> list[str]:
    """The files ``inputs`` names: a file, a glob, a directory (its writers'
    ``output-*.json`` files, or without those every ``*.json`` / ``*.jsonl``) or a list of
    those, sorted within each entry.

    Raises:
        ValueError: Naming an entry that matches no file.
    """
    entries = [inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
    if not entries:
        raise ValueError("input names no file: give a file, a glob, a directory or a list of them")
    files: list[str] = []
    for entry in entries:
        entry = os.path.expanduser(str(entry).removeprefix("file://"))
        if "://" in entry:
            raise ValueError(f"input {entry!r}: rlstack reads experience from local or mounted shared paths "
                             "(mount the bucket, or read it through Ray Data with input: 'dataset')")
        if os.path.isdir(entry):
            # The writers' files when there are any (a trial's directory, output: "logdir",
            # also holds its params.json and result.json), else every JSON file.
            found = sorted(glob.glob(os.path.join(entry, f"output-*{suffixes[0]}")))
            found = found or sorted(p for p in glob.glob(os.path.join(entry, "*")) if p.endswith(suffixes))
            if not found:
                raise ValueError(f"input directory {entry!r} holds no {suffixes[0]} files of experience")
        elif any(ch in entry for ch in "*?["):
            found = sorted(glob.glob(entry))
            if not found:
                raise ValueError(f"input glob {entry!r} matches no file")
        elif os.path.isfile(entry):
            found = [entry]
        else:
            raise ValueError(f"input {entry!r} is neither a file, a directory nor a glob that matches files")
        files.extend(os.path.abspath(p) for p in found)
    return files


class JsonReader(InputReader):
    """Reads batches from JSON lines files (one batch a line).

    Worker ``i`` starts with file ``i`` (mod the number of files) and then moves to
    files picked at random, reading each from the top, so the workers of a set spread
    over the data; every file is read again once it has been read.

    Args:
        inputs: A file, a glob, a directory or a list of them.
        ioctx: The worker's :class:`IOContext`.

    Raises:
        ValueError: ``inputs`` names no file.
    """

    def __init__(self, inputs: Any, ioctx: IOContext | None = None) -> None:
        self.ioctx = ioctx or IOContext()
        self.files = expand_paths(inputs)
        seed = self.ioctx.config.get("seed")
        self._rng = random.Random(None if seed is None else seed + 7919 * self.ioctx.worker_index)
        self._next_index = self.ioctx.worker_index % len(self.files)
        self.cur_file: IO[str] | None = None
        self._line_no = 0

    def _open_next(self) -> IO[str]:
        if self.cur_file is not None:
            self.cur_file.close()
        if self._next_index is not None:
            path, self._next_index = self.files[self._next_index], None
        else:
            path = self._rng.choice(self.files)
        self.cur_file = open(path, encoding="utf-8")  # noqa: SIM115 - kept open between calls
        self._line_no = 0
        return self.cur_file

    def _next_line(self) -> tuple[str, str]:
        handle = self.cur_file or self._open_next()
        for _ in range(2 * len(self.files) + 1):
            line = handle.readline()
            self._line_no += 1
            if line.strip():
                return line, f"{handle.name}:{self._line_no}"
            if not line:  # the end of this file
                handle = self._open_next()
        raise ValueError(f"the input files {self.files[:3]}{'...' if len(self.files) > 3 else ''} hold no batch")

    def next(self) -> SampleBatch | MultiAgentBatch:
        """The next batch (ValueError: a line that is not a batch, naming its file and line)."""
        line, where = self._next_line()
        return from_json(line, where)

    def read_all_files(self) -> Iterator[SampleBatch | MultiAgentBatch]:
        """Every batch of every file once, in file order."""
        for path in self.files:
            with open(path, encoding="utf-8") as handle:
                for number, line in enumerate(handle, 1):
                    if line.strip():
                        yield from_json(line, f"{path}:{number}")

    def close(self) -> None:
        if self.cur_file is not None:
            self.cur_file.close()
            self.cur_file = None
