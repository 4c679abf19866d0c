"""The HTTP endpoint's JSON, framework-free and Ray-free: a request body read into checked
observations (and recurrent state, previous actions / rewards), answers and spaces written
as JSON.

Every check here runs on one request before it joins a batch, so that a bad request is
answered on its own (a 4xx :class:`RequestError` naming the problem) and never reaches
the batch of good ones it would have joined.

Request body (a JSON object)::

    {"obs": OBS}                              one observation
    {"obs": [OBS, ...], "batch": true}        several, answered in order
    optional: "state": [...], "prev_action": ..., "prev_reward": ...  (recurrent models)

``OBS`` is what the env returns, as JSON: a number or nested lists for a Box or
Discrete space, an object for a Dict space, a list for a Tuple space.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from rlstack.errors import RLStackError

__all__ = ["ParsedRequest", "RequestError", "RequestParser", "space_to_json", "to_jsonable"]

# Array kinds an observation may hold: bool, signed / unsigned int, float.
_NUMERIC_KINDS = frozenset("biuf")
_KEYS = ("obs", "batch", "state", "prev_action", "prev_reward")


class RequestError(RLStackError, ValueError):
    """A request the server refuses: ``status`` is the HTTP status it answers with (400
    for a body that is not the request format, 413 for one too large, 422 for values that
    do not fit the policy), the message is the ``"error"`` of the JSON answer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class ParsedRequest:
    """One request, checked: ``observations`` as the env would return them (one per
    row), whether the client sent a batch, and the optional recurrent inputs with one
    leading row dimension each (``state``: one array per state tensor; ``prev``:
    ``{"prev_action": ..., "prev_reward": ...}`` as given, in the env's action form)."""

    observations: list[Any]
    batched: bool
    state: list[np.ndarray] | None = None
    prev: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def rows(self) -> int:
        """How many observations the request holds."""
        return len(self.observations)


class RequestParser:
    """Reads request bodies for one policy.

    Args:
        observation_space: The policy's observation space (the env's, before preprocessing).
        state_shapes: The shape of each recurrent state tensor without a batch dimension
            (``[]`` for a model without state).
        prev_shapes: For a model that reads previous actions / rewards, the shape of one
            row of each (``{"prev_action": shape, "prev_reward": shape}``); ``{}`` otherwise.

    Example:
        >>> parser = RequestParser(gym.spaces.Box(-1.0, 1.0, (2,), np.float32))
        >>> parser.parse(b'{"obs": [0.5, -0.5]}').observations
        [array([ 0.5, -0.5], dtype=float32)]
        >>> parser.parse(b'{"obs": [[0.5, -0.5], [0.0, 1.0]], "batch": true}').rows
        2
        >>> parser.parse(b'{"obs": [0.5]}')
        Traceback (most recent call last):
        ...
        rlstack.serve.codec.RequestError: obs has shape (1,); expected shape (2,), dtype float32 for Box(...).
    """

    def __init__(self, observation_space: gym.Space, state_shapes: list[tuple[int, ...]] | None = None,
                 prev_shapes: dict[str, tuple[int, ...]] | None = None) -> None:
        self.observation_space = observation_space
        self.state_shapes = [tuple(shape) for shape in state_shapes or []]
        self.prev_shapes = {key: tuple(shape) for key, shape in (prev_shapes or {}).items()}

    def parse(self, body: bytes) -> ParsedRequest:
        """Reads and checks one request body.

        Raises:
            RequestError: 400 for a body that is not a JSON object with ``obs`` (or has
                an unknown key), 422 for an observation, state or previous input that
                does not fit the policy (its shape, dtype or a NaN / infinity), saying
                what was expected and what was given.
        """
        try:
            request = json.loads(body)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise RequestError(400, f"The body is not JSON ({exc}); send a JSON object such as "
                                    '{"obs": [0.0, 0.1, 0.0, -0.1]}.') from None
        if not isinstance(request, dict):
            raise RequestError(400, f"The body must be a JSON object with an \"obs\" key, got a JSON "
                                    f"{_json_type(request)}; e.g. {{\"obs\": OBS}} or {{\"obs\": [OBS, ...], "
                                    "\"batch\": true}.")
        unknown = sorted(set(request) - set(_KEYS))
        if "obs" not in request:
            hint = f" (it has {', '.join(map(repr, sorted(request)))})" if request else ""
            raise RequestError(400, f'The request has no "obs" key{hint}; send {{"obs": OBS}} for one observation '
                                    'or {"obs": [OBS, ...], "batch": true} for several.')
        if unknown:
            raise RequestError(400, f"Unknown key(s) {', '.join(map(repr, unknown))} in the request; allowed: "
                                    f"{', '.join(_KEYS)}.")
        batched = request.get("batch", False)
        if not isinstance(batched, bool):
            raise RequestError(400, f'"batch" must be true or false, got {json.dumps(batched)[:40]}.')
        if batched:
            given = request["obs"]
            if not isinstance(given, list) or not given:
                raise RequestError(422, 'With "batch": true, "obs" must be a non-empty list of observations, got '
                                        f"a JSON {_json_type(given)}{' (empty)' if given == [] else ''}.")
            observations = [decode_observation(obs, self.observation_space, f"obs[{i}]")
                            for i, obs in enumerate(given)]
        else:
            observations = [decode_observation(request["obs"], self.observation_space, "obs")]
        parsed = ParsedRequest(observations, batched)
        parsed.state = self._state(request.get("state"), parsed)
        parsed.prev = self._prev(request, parsed)
        return parsed

    def _state(self, given: Any, parsed: ParsedRequest) -> list[np.ndarray] | None:
        if given is None or (given == [] and not self.state_shapes):
            return None
        if not self.state_shapes:
            raise RequestError(422, "This policy's model has no recurrent state; leave \"state\" out.")
        rows = f"[{parsed.rows}, ...] " if parsed.batched else ""
        shapes = [((parsed.rows,) if parsed.batched else ()) + shape for shape in self.state_shapes]
        if not isinstance(given, list) or len(given) != len(shapes):
            count = len(given) if isinstance(given, list) else f"a JSON {_json_type(given)}"
            raise RequestError(422, f'"state" must be a list of {len(shapes)} arrays {rows}of shapes '
                                    f"{[list(s) for s in shapes]} (the previous answer's \"state_out\"; leave it "
                                    f"out at an episode's start), got {count}.")
        arrays = [_numeric_array(value, f"state[{i}]", shape, np.float32) for i, (value, shape)
                  in enumerate(zip(given, shapes))]
        return arrays if parsed.batched else [array[None] for array in arrays]

    def _prev(self, request: dict[str, Any], parsed: ParsedRequest) -> dict[str, np.ndarray]:
        prev = {}
        for key in ("prev_action", "prev_reward"):
            if request.get(key) is None:
                continue
            if key not in self.prev_shapes:
                raise RequestError(422, f"This policy's model does not read {key}; leave \"{key}\" out.")
            shape = ((parsed.rows,) if parsed.batched else ()) + self.prev_shapes[key]
            array = _numeric_array(request[key], key, shape, np.float64)
            prev[key] = array if parsed.batched else array[None]
        return prev


def decode_observation(value: Any, space: gym.Space, where: str = "obs") -> Any:
    """One observation from its JSON form into what the env returns for ``space``.

    Raises:
        RequestError: (422) If it does not fit: a wrong shape, a non-numeric value, a
            float for an integer space, a NaN or infinity, a missing or extra Dict key.
    """
    if isinstance(space, gym.spaces.Box):
        return _numeric_array(value, where, space.shape, space.dtype, space)
    if isinstance(space, gym.spaces.Discrete):
        if isinstance(value, bool) or not isinstance(value, int):
            raise RequestError(422, f"{where} must be an integer in [{space.start}, {space.start + space.n}) for "
                                    f"{space}, got {_short(value)}.")
        if not space.start <= value < space.start + space.n:
            raise RequestError(422, f"{where} = {value} is outside {space}: expected an integer in "
                                    f"[{space.start}, {space.start + space.n}).")
        return np.int64(value)
    if isinstance(space, (gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
        array = _numeric_array(value, where, space.shape, space.dtype, space)
        if not space.contains(array):
            raise RequestError(422, f"{where} = {_short(value)} is outside {space}.")
        return array
    if isinstance(space, gym.spaces.Dict):
        if not isinstance(value, dict):
            raise RequestError(422, f"{where} must be a JSON object with keys {sorted(space.spaces)} for a Dict "
                                    f"observation space, got a JSON {_json_type(value)}.")
        missing, extra = sorted(set(space.spaces) - set(value)), sorted(set(value) - set(space.spaces))
        if missing or extra:
            parts = ([f"missing {missing}"] if missing else []) + ([f"unexpected {extra}"] if extra else [])
            raise RequestError(422, f"{where} has keys {sorted(value)}; the Dict observation space has "
                                    f"{sorted(space.spaces)} ({', '.join(parts)}).")
        return {key: decode_observation(value[key], sub, f"{where}[{key!r}]") for key, sub in space.spaces.items()}
    if isinstance(space, gym.spaces.Tuple):
        if not isinstance(value, list) or len(value) != len(space.spaces):
            raise RequestError(422, f"{where} must be a JSON list of {len(space.spaces)} entries for a Tuple "
                                    f"observation space, got {_short(value)}.")
        return tuple(decode_observation(item, sub, f"{where}[{i}]") for i, (item, sub)
                     in enumerate(zip(value, space.spaces)))
    if not space.contains(value):  # another space: the env's own check
        raise RequestError(422, f"{where} = {_short(value)} is not in the observation space {space}.")
    return value


def _numeric_array(value: Any, where: str, shape: tuple[int, ...], dtype: Any, space: gym.Space | None = None,
                   ) -> np.ndarray:
    # JSON numbers / nested lists as an array of `shape`, cast to `dtype` (a float for an
    # integer dtype is refused rather than truncated: it is almost always a wrong input).
    try:
        array = np.asarray(value)
    except ValueError:  # ragged lists
        array = None
    if array is not None and array.shape == tuple(shape):  # the common case first, without building a message
        kind = array.dtype.kind
        if kind in "biu" or (kind == "f" and np.dtype(dtype).kind == "f" and np.isfinite(array).all()):
            return array.astype(dtype, copy=False)
    expected = f"shape {tuple(shape)}, dtype {np.dtype(dtype)}" + (f" for {space}" if space is not None else "")
    if array is None or array.dtype == object:
        raise RequestError(422, f"{where} is not a rectangular array of numbers ({_short(value)}); expected "
                                f"{expected}.")
    if array.shape != tuple(shape):
        raise RequestError(422, f"{where} has shape {array.shape}; expected {expected}.")
    if array.dtype.kind not in _NUMERIC_KINDS:
        what = "strings" if array.dtype.kind in "US" else f"{array.dtype} values"
        raise RequestError(422, f"{where} holds {what}; expected numbers ({expected}).")
    if array.dtype.kind == "f":
        if not np.isfinite(array).all():
            raise RequestError(422, f"{where} holds NaN or infinity ({_short(value)}); every value must be a "
                                    "finite number.")
        if np.dtype(dtype).kind in "biu":
            raise RequestError(422, f"{where} holds non-integer numbers ({_short(value)}); expected integers "
                                    f"({expected}).")
    return array.astype(dtype, copy=False)


def to_jsonable(value: Any) -> Any:
    """``value`` with numpy arrays and scalars (nested in dicts, lists or tuples) as JSON
    lists and numbers."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {str(key): to_jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(item) for item in value]
    return value


def space_to_json(space: gym.Space) -> dict[str, Any]:
    """A JSON description of a gymnasium space: its type, shape and dtype, and ``n`` /
    ``nvec`` / sub-spaces where it has them (bounds are left out: they may be infinite)."""
    described: dict[str, Any] = {"type": type(space).__name__}
    if isinstance(space, gym.spaces.Dict):
        described["spaces"] = {key: space_to_json(sub) for key, sub in space.spaces.items()}
        return described
    if isinstance(space, gym.spaces.Tuple):
        described["spaces"] = [space_to_json(sub) for sub in space.spaces]
        return described
    if space.shape is not None:
        described["shape"] = list(space.shape)
    if space.dtype is not None:
        described["dtype"] = str(space.dtype)
    if isinstance(space, gym.spaces.Discrete):
        described.update(n=int(space.n), start=int(space.start))
    elif isinstance(space, gym.spaces.MultiDiscrete):
        described["nvec"] = space.nvec.tolist()
    return described


def _json_type(value: Any) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}
    return names.get(type(value), "number")


def _short(value: Any) -> str:
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    if isinstance(value, float) and not math.isfinite(value):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
