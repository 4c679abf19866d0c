"""Turns raw observations of any supported space into flat float32 vectors.

Every observation reaches policies as one row of a ``float32 [batch, size]`` array,
whatever its space: Box values flattened, Discrete and MultiDiscrete one-hot encoded,
Dict and Tuple components flattened and concatenated in the space's order. The
:class:`Component` layout tells a model where each component lives in the row so it can
reshape images back and route them through a CNN.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from rlstack.errors import EnvError
from rlstack.utils.spaces.repeated import Repeated


@dataclass(frozen=True)
class Component:
    """One observation component inside the flat vector.

    Attributes:
        kind: ``"image"`` (rank-3 Box, HWC), ``"vector"`` (other Box) or ``"onehot"``.
        shape: The component's shape before flattening.
        start: Its first column in the flat vector.
        size: How many columns it takes.
    """

    kind: str
    shape: tuple[int, ...]
    start: int
    size: int


def _components(space: gym.Space, start: int, out: list[Component]) -> int:
    if isinstance(space, gym.spaces.Box):
        shape = tuple(int(d) for d in space.shape)
        size = int(np.prod(shape)) if shape else 1
        kind = "image" if len(shape) == 3 else "vector"
        out.append(Component(kind, shape or (1,), start, size))
        return start + size
    if isinstance(space, gym.spaces.Discrete):
        out.append(Component("onehot", (int(space.n),), start, int(space.n)))
        return start + int(space.n)
    if isinstance(space, gym.spaces.MultiDiscrete):
        size = int(np.sum(space.nvec))
        out.append(Component("onehot", (size,), start, size))
        return start + size
    if isinstance(space, gym.spaces.MultiBinary):
        size = int(np.prod(space.shape))
        out.append(Component("vector", (size,), start, size))
        return start + size
    if isinstance(space, gym.spaces.Dict):
        for sub in space.spaces.values():
            start = _components(sub, start, out)
        return start
    if isinstance(space, gym.spaces.Tuple):
        for sub in space.spaces:
            start = _components(sub, start, out)
        return start
    if isinstance(space, Repeated):
        # 1.13's layout: the list's length, then max_len items (the unused ones zeros).
        size = 1 + space.max_len * _components(space.child_space, 0, [])
        out.append(Component("vector", (size,), start, size))
        return start + size
    raise EnvError(
        f"Observation space {space} is not supported; use Box, Discrete, MultiDiscrete, "
        "MultiBinary, Repeated, or Dict/Tuple of those."
    )


class Preprocessor:
    """Flattens observations of ``space`` into float32 rows of ``size`` columns.

    Args:
        space: The env's observation space.
    """

    def __init__(self, space: gym.Space) -> None:
        self.space = space
        self.layout: list[Component] = []
        self.size = _components(space, 0, self.layout)
        self.shape = (self.size,)
        # The common case (one Box) needs no per-observation Python work at all.
        self._is_flat_box = isinstance(space, gym.spaces.Box)

    def transform_batch(self, observations: Sequence[Any]) -> np.ndarray:
        """Returns ``float32 [len(observations), size]`` for a list of raw observations.

        Raises:
            EnvError: If an observation does not fit the space.
        """
        n = len(observations)
        if self._is_flat_box:
            try:
                return np.asarray(observations, dtype=np.float32).reshape(n, self.size)
            except ValueError as exc:
                raise EnvError(
                    f"Observations do not match the observation space {self.space}: {exc}"
                ) from exc
        out = np.zeros((n, self.size), dtype=np.float32)
        for row, obs in enumerate(observations):
            self._write(self.space, obs, out[row], 0)
        return out

    def transform(self, observation: Any) -> np.ndarray:
        """Returns ``float32 [size]`` for one raw observation."""
        return self.transform_batch([observation])[0]

    def _write(self, space: gym.Space, obs: Any, row: np.ndarray, start: int) -> int:
        if isinstance(space, gym.spaces.Box):
            size = int(np.prod(space.shape)) if space.shape else 1
            value = np.asarray(obs, dtype=np.float32)
            if value.size != size:
                raise EnvError(f"Observation component of shape {value.shape} does not fit {space}.")
            row[start : start + size] = value.reshape(-1)
            return start + size
        if isinstance(space, gym.spaces.Discrete):
            index = int(obs) - int(space.start)
            if not 0 <= index < int(space.n):
                raise EnvError(f"Observation {obs!r} is outside {space}.")
            row[start + index] = 1.0
            return start + int(space.n)
        if isinstance(space, gym.spaces.MultiDiscrete):
            offset = start
            starts = np.asarray(getattr(space, "start", np.zeros_like(space.nvec))).reshape(-1)
            for value, n, first in zip(np.asarray(obs).reshape(-1), space.nvec.reshape(-1), starts):
                index = int(value) - int(first)
                if not 0 <= index < int(n):
                    raise EnvError(f"Observation {obs!r} is outside {space}.")
                row[offset + index] = 1.0
                offset += int(n)
            return offset
        if isinstance(space, gym.spaces.MultiBinary):
            size = int(np.prod(space.shape))
            row[start : start + size] = np.asarray(obs, dtype=np.float32).reshape(-1)
            return start + size
        if isinstance(space, gym.spaces.Dict):
            for key, sub in space.spaces.items():
                if key not in obs:
                    raise EnvError(f"Dict observation has no key {key!r}; the space has keys {list(space.spaces)}.")
                start = self._write(sub, obs[key], row, start)
            return start
        if isinstance(space, gym.spaces.Tuple):
            for sub, value in zip(space.spaces, obs):
                start = self._write(sub, value, row, start)
            return start
        if isinstance(space, Repeated):
            if len(obs) > space.max_len:
                raise EnvError(f"Observation list of {len(obs)} items does not fit {space} (max_len {space.max_len}).")
            item_size = _components(space.child_space, 0, [])
            row[start] = len(obs)
            for j, item in enumerate(obs):
                self._write(space.child_space, item, row, start + 1 + j * item_size)
            return start + 1 + space.max_len * item_size
        raise EnvError(f"Unsupported observation space {space}.")


class _ClassicPreprocessor(Preprocessor):
    """Classic RLlib's preprocessor interface over :class:`Preprocessor`'s encoding.

    Args:
        space: The observation space.
        options: The ``model`` sub-dict (accepted as 1.x did; unused).

    Attributes:
        shape: The shape of a transformed observation.
        size: Its number of values.
        observation_space: A Box of transformed observations.
    """

    def __init__(self, space: gym.Space, options: dict | None = None) -> None:
        super().__init__(space)
        self.options = options or {}
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, self.shape, np.float32)
        self.observation_space.original_space = space  # type: ignore[attr-defined]

    def transform(self, observation: Any) -> np.ndarray:
        """Returns one observation as ``float32`` of :attr:`shape`."""
        return super().transform(observation).reshape(self.shape)


class NoPreprocessor(_ClassicPreprocessor):
    """Box observations: kept in their shape (as float32)."""

    def __init__(self, space: gym.Space, options: dict | None = None) -> None:
        super().__init__(space, options)
        self.shape = tuple(int(d) for d in space.shape) or (1,)
        # MultiBinary has no bounds attributes: its values are 0 or 1.
        low, high = getattr(space, "low", 0.0), getattr(space, "high", 1.0)
        self.observation_space = gym.spaces.Box(
            np.broadcast_to(low, space.shape).reshape(self.shape).astype(np.float32),
            np.broadcast_to(high, space.shape).reshape(self.shape).astype(np.float32), self.shape, np.float32)


class OneHotPreprocessor(_ClassicPreprocessor):
    """Discrete and MultiDiscrete observations: one-hot vectors."""


class DictFlatteningPreprocessor(_ClassicPreprocessor):
    """Dict observations: components encoded and concatenated in the space's order."""


class TupleFlatteningPreprocessor(_ClassicPreprocessor):
    """Tuple observations: components encoded and concatenated in order."""


class RepeatedValuesPreprocessor(_ClassicPreprocessor):
    """Repeated observations: the list's length, then ``max_len`` encoded items (zeros
    for the missing ones); a model gets them back as ``RepeatedValues``."""


def get_preprocessor(space: gym.Space) -> type[_ClassicPreprocessor]:
    """Returns the preprocessor class for ``space`` (classic RLlib's call).

    Instances, ``cls(space, options=None)``, have ``.shape``, ``.size``,
    ``.observation_space`` and ``.transform(obs)``; their encoding is the one policies
    use (Discrete one-hot, Dict/Tuple flattened and concatenated).

    Raises:
        EnvError: For a space no preprocessor covers.
    """
    if isinstance(space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete)):
        return OneHotPreprocessor
    if isinstance(space, gym.spaces.Dict):
        return DictFlatteningPreprocessor
    if isinstance(space, gym.spaces.Tuple):
        return TupleFlatteningPreprocessor
    if isinstance(space, Repeated):
        return RepeatedValuesPreprocessor
    if isinstance(space, (gym.spaces.Box, gym.spaces.MultiBinary)):
        return NoPreprocessor
    raise EnvError(
        f"Observation space {space} is not supported; use Box, Discrete, MultiDiscrete, MultiBinary, Repeated, or "
        "Dict/Tuple of those.")
