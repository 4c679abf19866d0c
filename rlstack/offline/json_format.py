"""One line of an experience file: a batch as JSON, in classic RLlib 1.13's layout.

A line is ``{"type": "SampleBatch", <column>: [...], ...}`` or ``{"type":
"MultiAgentBatch", "count": <env steps>, "policy_batches": {<policy id>: {<column>:
[...]}}}``. A column is a JSON list, or, for the columns named in
``output_compress_columns`` (``obs`` and ``new_obs`` by default), one string: the column
array pickled, LZ4-framed and base64-encoded, as 1.13 packs them, so files move both ways
between 1.13 and rlstack.

Reading never runs code from a file: packed columns are unpickled by an unpickler that
builds numpy arrays and nothing else (:func:`unpack`).

1.13's files mark an episode's end in ``dones``; rlstack's batches keep gymnasium's
``terminateds`` and ``truncateds`` apart. A line written by rlstack carries all three;
a line without ``terminateds`` is read with ``terminateds = dones`` (1.13 did not tell a
time limit from a termination) and ``truncateds`` false.
"""

from __future__ import annotations

import base64
import io
import json
import pickle
from typing import Any

import numpy as np

from rlstack.errors import pip_install
from rlstack.sample_batch import MultiAgentBatch, SampleBatch

__all__ = ["DONES", "ACTION_PROB", "from_json", "pack", "to_json", "unpack"]

# 1.13's column names that rlstack's batches hold under other names, or derive.
DONES = "dones"
ACTION_PROB = "action_prob"
_LZ4_MAGIC = b"\x04\x22\x4d\x18"

# The only globals a packed column may name: what pickling a numpy array refers to.
_ARRAY_GLOBALS = {
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
    ("numpy.core.numeric", "_frombuffer"), ("numpy._core.numeric", "_frombuffer"),
    ("numpy", "ndarray"), ("numpy", "dtype"),
}


class _ArrayUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ARRAY_GLOBALS or (module == "numpy" and name.startswith("dtypes")):
            return super().find_class(module, name)
        if module.startswith("numpy.dtypes"):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(
            f"a packed column refers to {module}.{name}: experience files may hold numpy arrays only, and "
            "rlstack does not run code from a data file")


def _lz4():
    try:
        import lz4.frame
    except ImportError as err:  # pragma: no cover - lz4 comes with the offline extra
        raise ImportError(f"packed (compressed) columns need the lz4 package: {pip_install('offline')}") from err
    return lz4.frame


def pack(array: np.ndarray) -> str:
    """A column as one string: pickled, LZ4-framed, base64 (1.13's ``compression.pack``)."""
    return base64.b64encode(_lz4().compress(pickle.dumps(np.ascontiguousarray(array), protocol=4))).decode("ascii")


def unpack(text: str) -> np.ndarray:
    """The array of a packed column (:func:`pack`, or 1.13's).

    Raises:
        ValueError: The string is not a packed array.
    """
    try:
        data = base64.b64decode(text, validate=True)
        if data[:4] == _LZ4_MAGIC:
            data = _lz4().decompress(data)
        value = _ArrayUnpickler(io.BytesIO(data)).load()
    except (ValueError, EOFError, pickle.UnpicklingError, RuntimeError) as err:
        raise ValueError(f"a packed column could not be read: {err}") from err
    return np.asarray(value)


def _jsonable(value: np.ndarray, compress: bool) -> Any:
    if compress and value.dtype != object:
        return pack(value)
    if value.dtype == object:
        return [_plain(item) for item in value]
    return value.tolist()


def _plain(item: Any) -> Any:
    # An info dict or another object a column holds: numpy values as plain JSON.
    if isinstance(item, dict):
        return {str(k): _plain(v) for k, v in item.items()}
    if isinstance(item, (list, tuple)):
        return [_plain(v) for v in item]
    if isinstance(item, np.ndarray):
        return item.tolist()
    if isinstance(item, np.generic):
        return item.item()
    if isinstance(item, (str, int, float, bool)) or item is None:
        return item
    return repr(item)


def _columns_to_json(batch: SampleBatch, compress_columns: frozenset[str]) -> dict[str, Any]:
    out = {key: _jsonable(value, key in compress_columns) for key, value in batch.items()}
    if SampleBatch.TERMINATEDS in batch and DONES not in batch:
        dones = batch[SampleBatch.TERMINATEDS] | batch.get(SampleBatch.TRUNCATEDS, False)
        out[DONES] = np.asarray(dones, dtype=bool).tolist()
    if SampleBatch.ACTION_LOGP in batch and ACTION_PROB not in batch:
        out[ACTION_PROB] = np.exp(batch[SampleBatch.ACTION_LOGP].astype(np.float64)).tolist()
    return out


def to_json(batch: SampleBatch | MultiAgentBatch, compress_columns: Any = ("obs", "new_obs")) -> str:
    """One JSON line (no newline) for ``batch``; see the module docstring."""
    compress = frozenset(compress_columns or ())
    if isinstance(batch, MultiAgentBatch):
        return json.dumps({"type": "MultiAgentBatch", "count": batch.count, "policy_batches": {
            pid: _columns_to_json(sub, compress) for pid, sub in batch.policy_batches.items()}})
    return json.dumps({"type": "SampleBatch", **_columns_to_json(batch, compress)})


def _column_from_json(key: str, value: Any) -> np.ndarray:
    if isinstance(value, str):
        return unpack(value)
    if key == "infos":
        array = np.empty(len(value), dtype=object)
        array[:] = value
        return array
    array = np.asarray(value)
    if array.dtype == np.float64:
        array = array.astype(np.float32)
    return array


def _batch_from_columns(columns: dict[str, Any]) -> SampleBatch:
    batch = SampleBatch({key: _column_from_json(key, value) for key, value in columns.items()})
    if SampleBatch.TERMINATEDS not in batch and DONES in batch:
        batch[SampleBatch.TERMINATEDS] = batch[DONES].astype(bool)
        batch[SampleBatch.TRUNCATEDS] = np.zeros(batch.count, dtype=bool)
    if SampleBatch.ACTION_LOGP not in batch and ACTION_PROB in batch:
        with np.errstate(divide="ignore"):
            batch[SampleBatch.ACTION_LOGP] = np.log(batch[ACTION_PROB].astype(np.float64)).astype(np.float32)
    return batch


def from_json(line: str, where: str = "") -> SampleBatch | MultiAgentBatch:
    """The batch one JSON line holds.

    Args:
        line: The line.
        where: Where it came from (``file:line``), for error messages.

    Raises:
        ValueError: The line is not a batch in this layout; the message says what is wrong.
    """
    at = f" ({where})" if where else ""
    try:
        data = json.loads(line)
    except json.JSONDecodeError as err:
        raise ValueError(f"an experience line is not JSON{at}: {err}") from err
    if not isinstance(data, dict):
        raise ValueError(f"an experience line must be a JSON object, got {type(data).__name__}{at}")
    kind = data.pop("type", "SampleBatch")
    try:
        if kind == "SampleBatch":
            return _batch_from_columns(data)
        if kind == "MultiAgentBatch":
            return MultiAgentBatch({pid: _batch_from_columns(cols) for pid, cols in data["policy_batches"].items()},
                                   int(data["count"]))
    except (KeyError, ValueError, TypeError) as err:
        raise ValueError(f"an experience line of type {kind} could not be read{at}: {err}") from err
    raise ValueError(f"unknown batch type {kind!r}{at}: expected 'SampleBatch' or 'MultiAgentBatch'")
