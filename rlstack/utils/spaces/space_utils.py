"""Helpers over nested gymnasium spaces (RLlib 1.13's ``ray.rllib.utils.spaces.space_utils``).

A Tuple or Dict space is a tree whose leaves are the other spaces; its leaves are listed
in tree order (Tuple by position, Dict by its keys' order, which gymnasium sorts).
rlstack's policies act on a Tuple / Dict action space with one flat action vector per
step, the leaves' values side by side (:class:`FlatActionLayout`), and give the env the
nested value it expects.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["FlatActionLayout", "flatten_space", "flatten_to_single_ndarray", "get_base_struct_from_space",
           "tree_leaves", "unbatch"]


def flatten_space(space: gym.Space) -> list[gym.Space]:
    """The leaf spaces of a (possibly nested) Tuple / Dict space, in tree order; any
    other space as a list of itself."""
    if isinstance(space, gym.spaces.Tuple):
        return [leaf for child in space.spaces for leaf in flatten_space(child)]
    if isinstance(space, gym.spaces.Dict):
        return [leaf for child in space.spaces.values() for leaf in flatten_space(child)]
    return [space]


def get_base_struct_from_space(space: gym.Space) -> Any:
    """The space's tree as Python tuples and dicts of its leaf spaces."""
    if isinstance(space, gym.spaces.Tuple):
        return tuple(get_base_struct_from_space(child) for child in space.spaces)
    if isinstance(space, gym.spaces.Dict):
        return {key: get_base_struct_from_space(child) for key, child in space.spaces.items()}
    return space


def tree_leaves(value: Any) -> list[Any]:
    """A nested value's leaves in tree order (tuples and lists by position, dicts by
    sorted key, as gymnasium's Dict orders its spaces)."""
    if isinstance(value, (tuple, list)):
        return [leaf for child in value for leaf in tree_leaves(child)]
    if isinstance(value, dict):
        return [leaf for key in sorted(value) for leaf in tree_leaves(value[key])]
    return [value]


def flatten_to_single_ndarray(value: Any) -> np.ndarray:
    """A nested value (tuples / dicts of arrays or numbers) as one flat float array."""
    leaves = tree_leaves(value)
    if len(leaves) == 1 and not isinstance(value, (tuple, list, dict)):
        return np.asarray(value)
    return np.concatenate([np.asarray(leaf, dtype=np.float32).reshape(-1) for leaf in leaves])


def unbatch(batches_struct: Any) -> list[Any]:
    """A nested value of batches (each leaf ``[B, ...]``) as a list of ``B`` nested
    values, one per row."""
    leaves = tree_leaves(batches_struct)
    size = len(leaves[0])

    def row(value: Any, i: int) -> Any:
        if isinstance(value, tuple | list):
            return tuple(row(child, i) for child in value)
        if isinstance(value, dict):
            return {key: row(child, i) for key, child in value.items()}
        return value[i]

    return [row(batches_struct, i) for i in range(size)]


class FlatActionLayout:
    """Where each leaf of a Tuple / Dict action space sits in a flat action vector:
    a Discrete leaf takes one entry (its index from 0), a MultiDiscrete one entry per
    part, a Box its values flattened.

    Args:
        space: The Tuple or Dict action space.

    Raises:
        TypeError: For a leaf that is not Discrete, MultiDiscrete or Box.
    """

    def __init__(self, space: gym.Space) -> None:
        self.space = space
        self.leaves = flatten_space(space)
        widths = []
        for leaf in self.leaves:
            if isinstance(leaf, gym.spaces.Discrete):
                widths.append(1)
            elif isinstance(leaf, (gym.spaces.MultiDiscrete, gym.spaces.Box)):
                widths.append(int(np.prod(leaf.shape)))
            else:
                raise TypeError(f"Action space {space} has a leaf {leaf}; Tuple / Dict action spaces may hold Discrete, "
                                "MultiDiscrete and Box spaces.")
        self.widths = tuple(widths)
        self.width = sum(widths)
        self._bounds = np.cumsum(widths)[:-1]
        #: A flat vector of discrete leaves only holds integers (and is kept as such).
        self.discrete = not any(isinstance(leaf, gym.spaces.Box) for leaf in self.leaves)

    def split(self, flat: np.ndarray) -> list[np.ndarray]:
        """The leaves' parts of flat actions ``[B, width]`` (each ``[B, leaf width]``)."""
        return np.split(np.asarray(flat).reshape(-1, self.width), self._bounds, axis=1)

    def to_env(self, flat: np.ndarray, box_transform: Any = None) -> list[Any]:
        """Flat policy actions ``[B, width]`` as ``B`` nested env actions: discrete parts
        as integers shifted by their space's ``start``, Box parts through
        ``box_transform(values [B, *shape], leaf)`` (None: reshaped and cast)."""
        parts = []
        for part, leaf in zip(self.split(flat), self.leaves):
            if isinstance(leaf, gym.spaces.Discrete):
                parts.append(part[:, 0].astype(np.int64) + int(leaf.start))
            elif isinstance(leaf, gym.spaces.MultiDiscrete):
                parts.append(part.astype(np.int64).reshape(-1, *leaf.shape) + np.asarray(leaf.start))
            else:
                values = part.reshape(-1, *leaf.shape)
                parts.append(box_transform(values, leaf) if box_transform is not None
                             else values.astype(leaf.dtype, copy=False))
        rows = len(parts[0])
        return [self._nest(self.space, iter([part[i] for part in parts])) for i in range(rows)]

    def _nest(self, space: gym.Space, values: Any) -> Any:
        if isinstance(space, gym.spaces.Tuple):
            return tuple(self._nest(child, values) for child in space.spaces)
        if isinstance(space, gym.spaces.Dict):
            return {key: self._nest(child, values) for key, child in space.spaces.items()}
        value = next(values)
        if isinstance(space, gym.spaces.Discrete):
            return int(value)
        return np.asarray(value)  # a Box of shape () gets a 0-d array, as its contains() wants

    def from_env(self, actions: Any, box_transform: Any = None) -> np.ndarray:
        """Nested env actions (one, or a list of them) as flat policy actions ``[B, width]``
        (:meth:`to_env` undone; ``box_transform(values [B, *shape], leaf)`` for Box parts)."""
        rows = actions if isinstance(actions, list) else [actions]
        row_leaves = [self._struct_leaves(self.space, row) for row in rows]
        columns = []
        for j, leaf in enumerate(self.leaves):
            values = np.stack([np.asarray(leaves[j], dtype=np.float64) for leaves in row_leaves])
            if isinstance(leaf, (gym.spaces.Discrete, gym.spaces.MultiDiscrete)):
                values = values - np.asarray(leaf.start)
            elif box_transform is not None:
                values = box_transform(values, leaf)
            columns.append(values.reshape(len(rows), -1))
        flat = np.concatenate(columns, axis=1)
        return flat.astype(np.int64 if self.discrete else np.float32)

    def _struct_leaves(self, space: gym.Space, value: Any) -> list[Any]:
        # A nested env action's leaves in the space's tree order.
        if isinstance(space, gym.spaces.Tuple):
            return [leaf for child, item in zip(space.spaces, value) for leaf in self._struct_leaves(child, item)]
        if isinstance(space, gym.spaces.Dict):
            return [leaf for key, child in space.spaces.items() for leaf in self._struct_leaves(child, value[key])]
        return [value]
