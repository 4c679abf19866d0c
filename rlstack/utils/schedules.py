"""Piecewise-linear schedules over the global timestep (``lr_schedule`` and friends)."""

from __future__ import annotations

from collections.abc import Sequence

from rlstack.errors import ConfigError


class PiecewiseSchedule:
    """A value that follows straight lines between ``(timestep, value)`` points.

    Before the first point the first value holds; after the last point the last value
    holds. This is the classic RLlib meaning of ``lr_schedule: [[0, 1e-3], [1e6, 1e-5]]``.

    Args:
        endpoints: ``(timestep, value)`` pairs with increasing timesteps.
        name: The config key, used in error messages.

    Raises:
        ConfigError: If the points are malformed or not increasing.
    """

    def __init__(self, endpoints: Sequence[Sequence[float]], name: str = "schedule") -> None:
        points = []
        for point in endpoints:
            if not isinstance(point, (list, tuple)) or len(point) != 2:
                raise ConfigError(
                    f"{name} must be a list of [timestep, value] pairs, got element {point!r}; "
                    f"example: {name}: [[0, 0.001], [100000, 0.0001]]"
                )
            try:
                points.append((float(point[0]), float(point[1])))
            except (TypeError, ValueError) as exc:
                raise ConfigError(f"{name} entry {point!r} is not a pair of numbers.") from exc
        if not points:
            raise ConfigError(f"{name} is empty; give at least one [timestep, value] pair or null.")
        timesteps = [t for t, _ in points]
        if timesteps != sorted(timesteps):
            raise ConfigError(f"{name} timesteps must not decrease, got {timesteps}.")
        self.endpoints = points

    def value(self, timestep: float) -> float:
        """Returns the scheduled value at ``timestep``."""
        points = self.endpoints
        if timestep <= points[0][0]:
            return points[0][1]
        for (t0, v0), (t1, v1) in zip(points[:-1], points[1:]):
            if t0 <= timestep < t1:
                alpha = (timestep - t0) / (t1 - t0)
                return v0 + alpha * (v1 - v0)
        return points[-1][1]


def make_schedule(constant: float, endpoints: Sequence[Sequence[float]] | None, name: str) -> PiecewiseSchedule:
    """Returns the schedule for ``endpoints``, or a constant one at ``constant`` when None."""
    if endpoints is None:
        return PiecewiseSchedule([[0, constant]], name)
    return PiecewiseSchedule(endpoints, name)
