"""The checkpoint format: a directory of plain data, nothing executable.

::

    checkpoint_000010/
        policy_state.npz         weights, optimizer slots, coefficients (numpy arrays)
        filters.npz              observation-filter statistics
        rlstack_checkpoint.json  format version, versions, algorithm, framework,
                                 counters, the JSON-able config, and a SHA-256 of
                                 each file above; written last

Arrays are loaded with ``allow_pickle=False`` and the metadata with ``json``, so loading
a checkpoint never runs code. The metadata file is written last: a directory without
it is an incomplete checkpoint. :func:`save_atomic` builds a checkpoint in a temporary
sibling directory and renames it into place, so a crash never leaves half a checkpoint
under the final name.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from rlstack.errors import CheckpointError

FORMAT_VERSION = 1
METADATA_FILE = "rlstack_checkpoint.json"


def to_jsonable(value: Any) -> Any:
    """A JSON-able copy of ``value``; objects JSON cannot hold become ``{"__repr__": ...}``."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return {"__repr__": repr(value)}


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _fsync_file(path: Path) -> None:
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def write_checkpoint(directory: str | os.PathLike, metadata: dict[str, Any], arrays: dict[str, dict[str, np.ndarray]]) -> None:
    """Writes ``arrays`` (file stem -> named arrays) and then the metadata into ``directory``.

    Args:
        directory: An existing (empty) directory.
        metadata: JSON-able metadata; ``format_version`` and file hashes are added.
        arrays: e.g. ``{"policy_state": {...}, "filters": {...}}``.
    """
    directory = Path(directory)
    hashes = {}
    for stem, named in arrays.items():
        path = directory / f"{stem}.npz"
        np.savez(path, **{name: np.asarray(value) for name, value in named.items()})
        _fsync_file(path)
        hashes[path.name] = _sha256(path)
    metadata = {"format_version": FORMAT_VERSION, **metadata, "files": hashes}
    meta_path = directory / METADATA_FILE
    with open(meta_path, "w") as f:
        json.dump(metadata, f, indent=2, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())


def read_checkpoint(directory: str | os.PathLike) -> tuple[dict[str, Any], dict[str, dict[str, np.ndarray]]]:
    """Reads and verifies a checkpoint directory.

    Returns:
        ``(metadata, arrays)``.

    Raises:
        CheckpointError: If the directory is missing, incomplete, corrupt, or of a
            format version this rlstack cannot read.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise CheckpointError(f"Checkpoint {str(directory)!r} does not exist or is not a directory.")
    meta_path = directory / METADATA_FILE
    if not meta_path.exists():
        raise CheckpointError(
            f"{str(directory)!r} is not a complete rlstack checkpoint: {METADATA_FILE} is missing "
            "(the save was interrupted, or the directory holds something else)."
        )
    try:
        metadata = json.loads(meta_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{meta_path} is not valid JSON ({exc}); the checkpoint is corrupt.") from exc
    version = metadata.get("format_version")
    if version != FORMAT_VERSION:
        raise CheckpointError(
            f"Checkpoint {str(directory)!r} has format version {version!r}; this rlstack reads version "
            f"{FORMAT_VERSION}."
        )
    arrays = {}
    for name, expected in metadata.get("files", {}).items():
        path = directory / name
        if not path.exists():
            raise CheckpointError(f"Checkpoint {str(directory)!r} is missing {name}.")
        if _sha256(path) != expected:
            raise CheckpointError(f"{path} does not match its recorded SHA-256; the checkpoint is corrupt or was edited.")
        with np.load(path, allow_pickle=False) as data:
            arrays[Path(name).stem] = {key: data[key] for key in data.files}
    return metadata, arrays


def save_atomic(target: str | os.PathLike, write: Callable[[str], None]) -> str:
    """Runs ``write(tmp_dir)`` in a temporary sibling of ``target``, then renames it into place.

    An existing ``target`` is replaced only after the new checkpoint is complete.

    Returns:
        The absolute path of ``target``.
    """
    target = Path(target).absolute()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        write(str(tmp))
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
            os.rename(target, old / target.name)
            os.rename(tmp, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, target)
        dir_fd = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return str(target)
