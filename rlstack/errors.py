"""The exception family rlstack raises for problems a user can fix.

Each error subclasses the builtin a caller would expect (``ValueError`` for a bad
config value, ``ImportError`` for a missing framework) so that generic handlers keep
working, and :class:`RLStackError` so that ``except RLStackError`` catches them all.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = [
    "CheckpointError",
    "ClusterAuthenticationError",
    "ClusterConnectionError",
    "ConfigError",
    "EnvError",
    "FrameworkNotInstalledError",
    "JobSubmissionError",
    "RLStackError",
    "closest_matches",
]


class RLStackError(Exception):
    """Base class of every error rlstack raises on purpose."""


class ConfigError(RLStackError, ValueError):
    """A config key is unknown or its value is impossible."""


class EnvError(RLStackError, ValueError):
    """An environment cannot be found, built or used."""


class CheckpointError(RLStackError, ValueError):
    """A checkpoint is missing, incomplete, corrupt or from another algorithm."""


class FrameworkNotInstalledError(RLStackError, ImportError):
    """The deep-learning framework a config asks for is not installed."""


class JobSubmissionError(RLStackError, RuntimeError):
    """The Jobs API refused a job or a request about it."""


class ClusterConnectionError(RLStackError, ConnectionError):
    """The Ray Jobs API (the dashboard's HTTP server) cannot be reached."""


class ClusterAuthenticationError(RLStackError, PermissionError):
    """The cluster runs with token authentication and refused this client's token."""


def closest_matches(word: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    """Returns up to ``n`` candidates that look like ``word``, best first.

    Args:
        word: The misspelled name.
        candidates: The valid names.
        n: How many suggestions to return at most.

    Returns:
        The close matches, possibly empty.
    """
    candidates = list(candidates)
    matches = difflib.get_close_matches(word, candidates, n=n, cutoff=0.6)
    if not matches:
        lowered = {c.lower(): c for c in candidates}
        matches = [lowered[m] for m in difflib.get_close_matches(word.lower(), lowered, n=n, cutoff=0.6)]
    return matches


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """Formats a "did you mean ...?" suffix for an error message (empty if no match)."""
    matches = closest_matches(word, candidates)
    if not matches:
        return ""
    return "; did you mean " + " or ".join(repr(m) for m in matches) + "?"
