"""RepeatedValues: a batch of Repeated observations as a model gets them (RLlib 1.13's
``ray.rllib.models.repeated_values``).

``values`` holds the items, padded to ``max_len`` (each leaf ``[B, max_len, ...]``, in
the item space's structure), ``lengths`` each row's number of real items ``[B]``.
"""

from __future__ import annotations

from typing import Any


def _slice(value: Any, index: Any) -> Any:
    # value[index] through dicts, tuples and nested RepeatedValues.
    if isinstance(value, dict):
        return {key: _slice(sub, index) for key, sub in value.items()}
    if isinstance(value, tuple):
        return tuple(_slice(sub, index) for sub in value)
    if isinstance(value, RepeatedValues):
        return RepeatedValues(_slice(value.values, index), value.lengths[index], value.max_len)
    return value[index]


def _real_items(row_values: Any, length: Any) -> list[Any]:
    # One row's first `length` items, nested Repeated parts unbatched as well.
    return [_unbatched(_slice(row_values, i)) for i in range(int(length))]


def _unbatched(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _unbatched(sub) for key, sub in value.items()}
    if isinstance(value, tuple):
        return tuple(_unbatched(sub) for sub in value)
    if isinstance(value, RepeatedValues):  # one row's: leaves [max_len, ...], a scalar length
        return _real_items(value.values, value.lengths)
    return value


class RepeatedValues:
    """Padded items of a batch of Repeated observations with their lengths.

    Args:
        values: The items, each leaf ``[B, max_len, ...]`` (nested dicts / tuples, and
            RepeatedValues for a Repeated inside an item).
        lengths: Real items per row ``[B]`` (a float tensor, as the flat observation
            held it).
        max_len: The Repeated space's ``max_len``.
    """

    def __init__(self, values: Any, lengths: Any, max_len: int) -> None:
        self.values = values
        self.lengths = lengths
        self.max_len = int(max_len)

    def unbatch_repeat_dim(self) -> list[Any]:
        """The ``max_len`` item positions: position ``i``'s values for every row
        (``[B, ...]`` leaves), padding included."""
        return [_slice(self.values, (slice(None), i)) for i in range(self.max_len)]

    def unbatch_all(self) -> list[list[Any]]:
        """Per row, the list of its real items (padding dropped), each in the item
        space's structure with nested Repeated parts as lists too; needs concrete
        lengths (eager tensors or arrays)."""
        return [_real_items(_slice(self.values, b), self.lengths[b]) for b in range(len(self.lengths))]

    def __repr__(self) -> str:
        return f"RepeatedValues(value={self.values!r}, lengths={self.lengths!r}, max_len={self.max_len})"
