"""The policy server's protocol: its commands, and JSON with numpy arrays for its requests
(rlstack/evaluation/policy_server_input.py and rlstack/env/policy_client.py).

What a client sends the server is JSON and only JSON: the server never unpickles a
request, so a client cannot make it run code. Arrays travel as
``{"__ndarray__": base64 of the raw bytes, "dtype": "float32", "shape": [4]}`` (numeric
and bool dtypes only), tuples as ``{"__tuple__": [...]}``; numpy scalars become plain
numbers. Observations of any space (Box, Discrete, Dict, Tuple) and sample batches'
columns go through :func:`encode` / :func:`decode`.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import numpy as np

_ARRAY, _TUPLE = "__ndarray__", "__tuple__"
_KINDS = frozenset("biuf")  # bool, signed / unsigned int, float


class Commands:
    """The protocol's commands (1.13's ``PolicyClient.START_EPISODE``... names)."""

    START_EPISODE = "START_EPISODE"
    GET_ACTION = "GET_ACTION"
    LOG_ACTION = "LOG_ACTION"
    LOG_RETURNS = "LOG_RETURNS"
    END_EPISODE = "END_EPISODE"
    GET_WORKER_ARGS = "GET_WORKER_ARGS"
    GET_WEIGHTS = "GET_WEIGHTS"
    REPORT_SAMPLES = "REPORT_SAMPLES"


def encode(value: Any) -> Any:
    """``value`` as JSON-ready Python (see the module docstring)."""
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in _KINDS:
            raise TypeError(f"arrays of dtype {value.dtype} cannot be sent; use numeric or bool arrays")
        array = np.ascontiguousarray(value)
        return {_ARRAY: base64.b64encode(array.tobytes()).decode("ascii"), "dtype": array.dtype.str,
                "shape": list(array.shape)}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {str(key): encode(item) for key, item in value.items()}
    if isinstance(value, tuple):
        return {_TUPLE: [encode(item) for item in value]}
    if isinstance(value, list):
        return [encode(item) for item in value]
    return value


def decode(value: Any) -> Any:
    """The Python value :func:`encode` made (arrays back as numpy).

    Raises:
        ValueError: A malformed array (dtype not numeric, size not matching its shape).
    """
    if isinstance(value, dict):
        if _ARRAY in value:
            dtype = np.dtype(str(value.get("dtype")))
            if dtype.kind not in _KINDS:
                raise ValueError(f"an array of dtype {dtype} was sent; only numeric and bool arrays are accepted")
            shape = tuple(int(n) for n in value.get("shape", ()))
            data = base64.b64decode(str(value[_ARRAY]), validate=True)
            if len(data) != dtype.itemsize * int(np.prod(shape, dtype=np.int64)):
                raise ValueError(f"an array of shape {list(shape)} and dtype {dtype} was sent with {len(data)} bytes")
            return np.frombuffer(data, dtype=dtype).reshape(shape).copy()
        if _TUPLE in value:
            return tuple(decode(item) for item in value[_TUPLE])
        return {key: decode(item) for key, item in value.items()}
    if isinstance(value, list):
        return [decode(item) for item in value]
    return value


def dumps(value: Any) -> bytes:
    """``value`` encoded as a JSON document."""
    return json.dumps(encode(value)).encode("utf-8")


def loads(data: bytes) -> Any:
    """The value of a JSON document :func:`dumps` made.

    Raises:
        ValueError: Not JSON, or a malformed array in it.
    """
    value = json.loads(data)
    try:
        return decode(value)
    except (TypeError, KeyError, OverflowError) as err:
        raise ValueError(f"a malformed array: {err}") from err
