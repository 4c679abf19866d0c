"""The checkpoint format: a directory of plain data, nothing executable.

::

    checkpoint_000010/
        policy_state.npz         weights, optimizer slots, coefficients (numpy arrays)
        filters.npz              observation-filter statistics
        rlstack_checkpoint.json  the manifest: format version, rlstack / Ray / framework
                                 versions, algorithm, framework, counters, the JSON-able
                                 config, the size and SHA-256 of each file above, and a
                                 SHA-256 of the manifest itself; written last

Arrays are loaded with ``allow_pickle=False`` and the manifest with ``json``, so loading
a checkpoint never runs code. :func:`read_checkpoint` checks the format version, the
manifest's own hash and every file's size and hash, so a truncated, edited or foreign
checkpoint is refused with a message that says which.

:func:`save_atomic` builds a checkpoint in a temporary sibling directory
(``.<name>.tmp-<host>-<pid>-<random>``), fsyncs its files and the directory, and renames
it into place; an existing checkpoint is swapped out in one atomic ``renameat2`` exchange
where the OS offers it (Linux). A crash therefore never leaves half a checkpoint under
the final name: at worst a temporary sibling remains, which readers never look at and
the next save into the same directory deletes once its writer process is gone.
"""

from __future__ import annotations

import ctypes
import errno
import hashlib
import json
import logging
import os
import re
import shutil
import socket
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from rlstack.errors import CheckpointError, pip_install

FORMAT_VERSION = 1
METADATA_FILE = "rlstack_checkpoint.json"
# The manifest key holding the SHA-256 of the manifest's other keys (canonical JSON).
METADATA_HASH_KEY = "metadata_sha256"
# Import names of the frameworks, for the version recorded in the manifest.
FRAMEWORK_MODULES = {"torch": "torch", "tf": "tensorflow"}
# The former path of each module of rlstack/trainers/common/ -> its path. A checkpoint's
# config keeps an import path as the user gave it (a logger_config "type", a multiagent
# policy_mapping_fn), so it may name one of these modules at its former place. trainer,
# callbacks and registry need no entry: 1.13's paths to them still import.
MOVED_MODULES = {
    **{f"rlstack.trainers.{name}": f"rlstack.trainers.common.{name}"
       for name in ("classic_keys", "config", "distributed_replay", "evolution", "multi_agent", "off_policy",
                    "ray_start", "replay_config", "result_logger")},
    "rlstack.trainers.checkpoint": "rlstack.trainers.common.checkpoint_files",
}

logger = logging.getLogger(__name__)


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


def with_moved_paths(value: Any) -> Any:
    """A copy of a checkpoint's stored config (JSON data) in which each import path that
    names a module of :data:`MOVED_MODULES` (``"module:name"`` or ``"module.name"``) names
    that module where it is now."""
    if isinstance(value, str):
        for old, new in MOVED_MODULES.items():
            if value.startswith((old + ":", old + ".")):
                return new + value[len(old):]
        return value
    if isinstance(value, dict):
        return {key: with_moved_paths(item) for key, item in value.items()}
    if isinstance(value, list):
        return [with_moved_paths(item) for item in value]
    return value


def framework_version(framework: str | None) -> str | None:
    """The installed version of ``framework`` ("torch" or "tf") if it is imported already
    (a checkpoint is written after the policy is built, so it is), else None."""
    module = sys.modules.get(FRAMEWORK_MODULES.get(framework or "", ""))
    return getattr(module, "__version__", None)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _metadata_hash(metadata: dict[str, Any]) -> str:
    body = {k: v for k, v in metadata.items() if k != METADATA_HASH_KEY}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _fsync_file(path: Path) -> None:
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def _fsync_dir(path: Path) -> None:
    # Makes the directory's entries (created, renamed files) durable, not just the data.
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_checkpoint(directory: str | os.PathLike, metadata: dict[str, Any], arrays: dict[str, dict[str, np.ndarray]]) -> None:
    """Writes ``arrays`` (file stem -> named arrays) and then the manifest into ``directory``.

    Each file is fsynced before the next is written; the manifest, written last, records
    every file's size and SHA-256 and its own hash.

    Args:
        directory: An existing (empty) directory.
        metadata: JSON-able metadata; ``format_version``, the file sizes and hashes and
            the manifest hash are added.
        arrays: e.g. ``{"policy_state": {...}, "filters": {...}}``.
    """
    directory = Path(directory)
    hashes, sizes = {}, {}
    for stem, named in arrays.items():
        path = directory / f"{stem}.npz"
        np.savez(path, **{name: np.asarray(value) for name, value in named.items()})
        _fsync_file(path)
        hashes[path.name] = _sha256(path)
        sizes[path.name] = path.stat().st_size
    metadata = {"format_version": FORMAT_VERSION, **metadata, "files": hashes, "file_sizes": sizes}
    metadata[METADATA_HASH_KEY] = _metadata_hash(metadata)
    meta_path = directory / METADATA_FILE
    with open(meta_path, "w") as f:
        json.dump(metadata, f, indent=2, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    _fsync_dir(directory)


def read_checkpoint(directory: str | os.PathLike) -> tuple[dict[str, Any], dict[str, dict[str, np.ndarray]]]:
    """Reads and verifies a checkpoint directory.

    Returns:
        ``(metadata, arrays)``.

    Raises:
        CheckpointError: If the directory is missing or not a checkpoint, incomplete,
            truncated, edited, corrupt, or of a format version this rlstack cannot read;
            the message says which and what to do.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise CheckpointError(_describe_missing(directory))
    meta_path = directory / METADATA_FILE
    if not meta_path.exists():
        raise CheckpointError(_describe_foreign(directory))
    try:
        metadata = json.loads(meta_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(
            f"{meta_path} is not valid JSON ({exc}); the checkpoint is corrupt (truncated or edited). Restore "
            "from another checkpoint."
        ) from exc
    if not isinstance(metadata, dict) or "format_version" not in metadata:
        raise CheckpointError(
            f"{meta_path} is not an rlstack checkpoint manifest (no format_version); the file was replaced or "
            "edited. Restore from another checkpoint."
        )
    _check_version(directory, metadata)
    recorded = metadata.get(METADATA_HASH_KEY)
    # Manifests written before the self-hash existed have none; every new one has it.
    if recorded is not None and recorded != _metadata_hash(metadata):
        raise CheckpointError(
            f"{meta_path} was edited after it was written (its {METADATA_HASH_KEY} does not match its content), "
            "so its counters, config or file hashes cannot be trusted. Restore from an unedited checkpoint; to "
            "change the config of a restored trainer use Trainer.from_checkpoint(path, config_overrides={...})."
        )
    files, sizes = metadata.get("files"), metadata.get("file_sizes") or {}
    if not isinstance(files, dict) or not isinstance(sizes, dict):
        raise CheckpointError(f"{meta_path} has no valid 'files' table; the checkpoint is corrupt.")
    arrays = {}
    for name, expected in files.items():
        if not re.fullmatch(r"[A-Za-z0-9_.-]+\.npz", name):
            raise CheckpointError(
                f"{meta_path} lists {name!r}, which is not a .npz file inside the checkpoint; the manifest is corrupt."
            )
        path = directory / name
        if not path.is_file():
            raise CheckpointError(
                f"Checkpoint {str(directory)!r} is missing {name}, which its manifest lists; the directory was copied "
                "incompletely or the file was deleted. Copy the whole directory again or use another checkpoint."
            )
        size = path.stat().st_size
        if name in sizes and size != sizes[name]:
            raise CheckpointError(
                f"{path} is {size} bytes but the manifest records {sizes[name]}: the file is truncated or was "
                "rewritten (an interrupted copy, or a full disk?). Copy the checkpoint again or use another one."
            )
        if _sha256(path) != expected:
            raise CheckpointError(
                f"{path} does not match its recorded SHA-256; the checkpoint is corrupt or was edited. Copy the "
                "checkpoint again or use another one."
            )
        try:
            with np.load(path, allow_pickle=False) as data:
                arrays[Path(name).stem] = {key: data[key] for key in data.files}
        except (zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
            raise CheckpointError(
                f"{path} matches its hash but cannot be read as plain numpy arrays ({exc}); it was not written by "
                "rlstack (object arrays are never loaded, as that would unpickle)."
            ) from exc
    _warn_on_other_versions(directory, metadata)
    return metadata, arrays


def _check_version(directory: Path, metadata: dict[str, Any]) -> None:
    version = metadata.get("format_version")
    if version == FORMAT_VERSION:
        return
    from rlstack import __version__

    written_by = metadata.get("rlstack_version", "an unknown version")
    if isinstance(version, int) and version > FORMAT_VERSION:
        raise CheckpointError(
            f"Checkpoint {str(directory)!r} has format version {version!r}, written by rlstack {written_by}; this "
            f"rlstack ({__version__}) reads version {FORMAT_VERSION}. Upgrade rlstack to load it: "
            f"{pip_install('torch', '-U')} (or git pull in a checkout)."
        )
    raise CheckpointError(
        f"Checkpoint {str(directory)!r} has format version {version!r} (rlstack {written_by}); this rlstack "
        f"({__version__}) reads version {FORMAT_VERSION} only. Load it with the rlstack that wrote it and save the "
        "weights again, or train anew."
    )


def _warn_on_other_versions(directory: Path, metadata: dict[str, Any]) -> None:
    # Same format, other library versions: loadable, but worth a line in the log when
    # results differ (optimizer-state layouts can change between framework releases).
    framework = metadata.get("framework")
    saved, installed = metadata.get("framework_version"), framework_version(framework)
    if saved and installed and saved != installed:
        logger.warning("Checkpoint %s was written with %s %s; this process runs %s %s.", directory,
                       FRAMEWORK_MODULES.get(framework, framework), saved, FRAMEWORK_MODULES.get(framework, framework),
                       installed)


def _describe_missing(directory: Path) -> str:
    if directory.is_file():
        return (f"Checkpoint {str(directory)!r} is a file, not a checkpoint directory; pass the directory that holds "
                f"{METADATA_FILE} (the path save() returned).")
    backups = []
    if directory.parent.is_dir():
        backups = sorted(directory.parent.glob(f".{directory.name}.old-*/{directory.name}"))
    if backups:
        return (f"Checkpoint {str(directory)!r} does not exist: a save that was replacing it was interrupted (this "
                f"filesystem cannot swap directories atomically). The previous checkpoint is intact at "
                f"{str(backups[-1])!r}; restore from there, or move it back to {str(directory)!r}.")
    return f"Checkpoint {str(directory)!r} does not exist or is not a directory."


def _describe_foreign(directory: Path) -> str:
    names = sorted(os.listdir(directory))
    visible = [n for n in names if not n.startswith(".")]
    prefix = f"{str(directory)!r} is not a complete rlstack checkpoint: {METADATA_FILE} is missing"
    inner = [n for n in visible if (directory / n / METADATA_FILE).is_file()]
    if inner:
        return (f"{prefix}, but it holds checkpoints ({', '.join(inner[-3:])}); pass one of them, e.g. "
                f"{str(directory / inner[-1])!r}.")
    if {"rllib_checkpoint.json", "algorithm_state.pkl", "policy_state.pkl"} & set(names):
        return (f"{prefix}: it is a Ray RLlib checkpoint, which rlstack does not load (its state is pickled). "
                "Restore it with Ray RLlib, or train with rlstack and restore from the path its save() returns.")
    if any(re.fullmatch(r"checkpoint-\d+", n) for n in visible) or any(n.endswith(".tune_metadata") for n in names):
        # RLlib 1.x's Trainer.save(): checkpoint_<i>/checkpoint-<i> (a pickle) and its .tune_metadata.
        return (f"{prefix}: it is an RLlib 1.x checkpoint (checkpoint-N and .tune_metadata, a pickle of the "
                "trainer's state), which rlstack does not load: it unpickles nothing. Retrain with rlstack, or move "
                "the weights yourself (set_weights; the docs' 'Migrating from RLlib 1.x' page says how).")
    if any(n.endswith(".npz") for n in visible):
        return (f"{prefix} (the save was interrupted before the manifest was written, or the manifest was "
                "deleted); use an earlier checkpoint.")
    listing = ", ".join(visible[:5]) + (", ..." if len(visible) > 5 else "") if visible else "nothing"
    return (f"{prefix}; the directory holds {listing}. Pass the path a trainer's save() returned (a directory "
            f"with {METADATA_FILE}).")


# ----- writing a checkpoint directory atomically --------------------------------------------

def _owner_tag() -> str:
    host = re.sub(r"[^A-Za-z0-9]", "", socket.gethostname())[:32] or "host"
    return f"{host}-{os.getpid()}"


def _writer_alive(name: str, kind: str, target_name: str) -> bool:
    # Temporary siblings are named ".<target>.<kind>-<host>-<pid>-<random>"; a sibling whose
    # writer is a process of this host that no longer runs is garbage.
    match = re.fullmatch(rf"\.{re.escape(target_name)}\.{kind}-([A-Za-z0-9]+)-(\d+)-.*", name)
    if not match or match.group(1) != _owner_tag().rsplit("-", 1)[0]:
        return True  # another host's, or an older naming scheme: leave it
    try:
        os.kill(int(match.group(2)), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_temporaries(target: str | os.PathLike) -> list[str]:
    """Deletes the temporary siblings that interrupted saves of ``target`` left behind.

    Only siblings whose writer process (on this host) is gone are removed; a backup of
    the previous checkpoint (``.old-``) only once ``target`` is a complete checkpoint.

    Returns:
        The paths removed.
    """
    target = Path(target).absolute()
    if not target.parent.is_dir():
        return []
    removed = []
    complete = (target / METADATA_FILE).is_file()
    for entry in target.parent.iterdir():
        if not entry.name.startswith(f".{target.name}."):
            continue
        is_tmp = not _writer_alive(entry.name, "tmp", target.name)
        is_old = complete and not _writer_alive(entry.name, "old", target.name)
        if is_tmp or is_old:
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(str(entry))
    return removed


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swaps two directories (Linux renameat2 RENAME_EXCHANGE); False where
    the OS, libc or filesystem does not offer it."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
        return False
    raise OSError(err, os.strerror(err), str(a), None, str(b))


def save_atomic(target: str | os.PathLike, write: Callable[[str], None]) -> str:
    """Runs ``write(tmp_dir)`` in a temporary sibling of ``target``, then moves it into place.

    An existing ``target`` is replaced only after the new checkpoint is complete, and only
    if it is an rlstack checkpoint (or empty): a directory holding anything else is never
    deleted.

    Returns:
        The absolute path of ``target``.

    Raises:
        CheckpointError: If ``target`` exists and is not a checkpoint.
    """
    target = Path(target).absolute()
    if target.exists() and not (target / METADATA_FILE).is_file() and (not target.is_dir() or any(target.iterdir())):
        raise CheckpointError(
            f"Cannot save a checkpoint to {str(target)!r}: it exists and is not an rlstack checkpoint, and saving "
            "would replace it. Pass a new path (e.g. a subdirectory), or remove it first."
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(target)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-{_owner_tag()}-", dir=target.parent))
    try:
        write(str(tmp))
        _fsync_dir(tmp)
        if not target.exists():
            os.rename(tmp, target)
        elif _exchange(tmp, target):
            shutil.rmtree(tmp, ignore_errors=True)  # now holds the previous checkpoint
        else:
            # Two renames: a crash between them leaves the previous checkpoint in the
            # .old- sibling, which read_checkpoint's error points to.
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-{_owner_tag()}-", dir=target.parent))
            os.rename(target, old / target.name)
            os.rename(tmp, target)
            shutil.rmtree(old, ignore_errors=True)
        _fsync_dir(target.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return str(target)
