"""Sum and min segment trees over a fixed number of slots, vectorised with numpy.

Prioritized replay (Schaul et al. 2016) keeps one priority per buffer slot. It needs
the total of all priorities, sampling a slot with probability proportional to its
priority (a prefix-sum search) and the smallest priority (for the importance-weight
normaliser), each in O(log n) after an update. A segment tree stores the slots as the
leaves of a complete binary tree whose inner nodes hold the sum (or min) of their
children; node ``i`` has children ``2i`` and ``2i + 1``, the root is node 1.

Updates and searches take whole index arrays and walk the tree level by level, so a
batch of ``k`` operations costs ``O(k log n)`` numpy work in ``log n`` vectorised steps.

Examples:
    >>> tree = SumSegmentTree(4)
    >>> tree.update(np.array([0, 1, 2, 3]), np.array([1.0, 2.0, 3.0, 4.0]))
    >>> float(tree.total()), tree.find_prefixsum_index(np.array([0.5, 1.5, 9.9])).tolist()
    (10.0, [0, 1, 3])
"""

from __future__ import annotations

import operator
from collections.abc import Callable

import numpy as np

__all__ = ["MinSegmentTree", "SumSegmentTree"]


class _SegmentTree:
    """A complete binary tree over ``capacity`` leaves combined with ``_op``."""

    _neutral: float = 0.0

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"A segment tree needs capacity >= 1, got {capacity}.")
        self.capacity = int(capacity)
        # Leaves live at [size, 2 * size); size is the next power of two.
        self._size = 1 << max(0, (self.capacity - 1).bit_length())
        self._tree = np.full(2 * self._size, self._neutral, dtype=np.float64)

    @staticmethod
    def _op(left: np.ndarray, right: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    # The same operation on two floats (the one-slot path of update()).
    _scalar_op: Callable[[float, float], float]

    def update(self, indices: np.ndarray, values: np.ndarray) -> None:
        """Sets the leaves ``indices`` to ``values`` and refreshes their ancestors.

        Args:
            indices: Slot indices in ``[0, capacity)``; a repeated index keeps the last value.
            values: One value per index.

        Raises:
            IndexError: If an index is out of range.
        """
        indices = np.asarray(indices, dtype=np.int64).reshape(-1)
        values = np.broadcast_to(np.asarray(values, dtype=np.float64), indices.shape)
        if indices.size == 0:
            return
        if indices.min() < 0 or indices.max() >= self.capacity:
            raise IndexError(f"Segment-tree index out of range [0, {self.capacity}): {indices.min()}..{indices.max()}")
        nodes = indices + self._size
        tree = self._tree
        tree[nodes] = values  # numpy assigns in order: the last duplicate wins
        if nodes.size == 1:  # one row added per env step: plain floats beat numpy calls
            node, combine = int(nodes[0]) >> 1, self._scalar_op
            while node:
                tree[node] = combine(tree.item(2 * node), tree.item(2 * node + 1))
                node >>= 1
            return
        # Sorted and distinct; halving keeps them sorted, so the next level's distinct
        # parents are where neighbours differ (no sort per level).
        nodes = np.unique(nodes >> 1)
        while nodes[0] >= 1:  # node 0 is unused (capacity 1: the leaf is the root)
            tree[nodes] = self._op(tree[2 * nodes], tree[2 * nodes + 1])
            if nodes[0] == 1:
                break
            parents = nodes >> 1
            distinct = np.empty(parents.size, dtype=bool)
            distinct[0] = True
            np.not_equal(parents[1:], parents[:-1], out=distinct[1:])
            nodes = parents[distinct]

    def __getitem__(self, indices: np.ndarray | int) -> np.ndarray:
        """The leaf values at ``indices``."""
        return self._tree[np.asarray(indices, dtype=np.int64) + self._size]

    def reduce(self) -> float:
        """The sum (or min) over all slots, in O(1)."""
        return float(self._tree[1])


class SumSegmentTree(_SegmentTree):
    """Sums of priorities; samples slots in proportion to their values.

    Args:
        capacity: Number of slots.
    """

    _neutral = 0.0

    @staticmethod
    def _op(left: np.ndarray, right: np.ndarray) -> np.ndarray:
        return left + right

    _scalar_op = staticmethod(operator.add)

    def total(self) -> float:
        """The sum over all slots."""
        return self.reduce()

    def find_prefixsum_index(self, prefix_sums: np.ndarray) -> np.ndarray:
        """For each ``s``, the smallest slot ``i`` with ``sum(values[: i + 1]) > s``.

        With ``s`` drawn uniformly from ``[0, total())`` slot ``i`` comes up with
        probability ``values[i] / total()``.

        Args:
            prefix_sums: Values in ``[0, total())``.

        Returns:
            Slot indices (int64), clipped into ``[0, capacity)`` against rounding.
        """
        remaining = np.array(prefix_sums, dtype=np.float64).reshape(-1)
        nodes = np.ones(remaining.shape, dtype=np.int64)
        while nodes[0] < self._size:  # every search descends the same number of levels
            left = 2 * nodes
            left_sum = self._tree[left]
            go_right = remaining >= left_sum
            remaining = np.where(go_right, remaining - left_sum, remaining)
            nodes = np.where(go_right, left + 1, left)
        return np.minimum(nodes - self._size, self.capacity - 1)


class MinSegmentTree(_SegmentTree):
    """Minimum of the slots' values (unused slots count as +inf).

    Args:
        capacity: Number of slots.
    """

    _neutral = float("inf")

    @staticmethod
    def _op(left: np.ndarray, right: np.ndarray) -> np.ndarray:
        return np.minimum(left, right)

    _scalar_op = staticmethod(min)

    def min(self) -> float:
        """The minimum over all slots."""
        return self.reduce()
