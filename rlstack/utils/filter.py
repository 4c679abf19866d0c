"""Classic RLlib's ``ray.rllib.utils.filter``: the :class:`Filter` base a custom
observation filter subclasses, and rlstack's built-in filters under their 1.13 names.

A custom filter is configured as ``observation_filter=lambda shape: MyFilter(shape)``;
rlstack syncs it between workers through the methods below (see
:class:`rlstack.utils.filters.ClassicFilter`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlstack.utils.filters import MeanStdFilter, NoFilter, make_filter

__all__ = ["Filter", "MeanStdFilter", "NoFilter", "get_filter"]


class Filter:
    """What a classic custom observation filter defines.

    ``__call__(x, update=True)`` filters a batch of observations (counting them when
    ``update``); ``copy()`` returns an independent copy, buffer included;
    ``reset_buffer()`` forgets what was seen since the last sync; ``apply_changes(other,
    with_buffer=False)`` merges another copy's buffer into these statistics;
    ``as_serializable()`` returns what ``sync(other)`` on another copy takes to adopt
    these statistics.
    """

    is_concurrent = False

    def __call__(self, x: Any, update: bool = True) -> np.ndarray:
        raise NotImplementedError

    def apply_changes(self, other: Filter, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError

    def copy(self) -> Filter:
        raise NotImplementedError

    def sync(self, other: Filter) -> None:
        raise NotImplementedError

    def reset_buffer(self) -> None:
        raise NotImplementedError

    def clear_buffer(self) -> None:
        """Classic RLlib's older name of :meth:`reset_buffer`."""
        self.reset_buffer()

    def as_serializable(self) -> Filter:
        return self


def get_filter(filter_config: Any, shape: tuple[int, ...]) -> Any:
    """The filter ``observation_filter`` names (one of ``FILTERS``, or a function of the
    shape), as the rollout workers build it."""
    return make_filter(filter_config, shape)
