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
    "EnvFailureError",
    "FrameworkNotInstalledError",
    "JobSubmissionError",
    "MissingFeatureError",
    "NonFiniteError",
    "ObservationError",
    "PlacementTimeoutError",
    "RLStackError",
    "WorkerFailureError",
    "closest_matches",
    "pip_install",
]

# Where this project installs from: its distribution is rlstack-ray (the name rlstack on PyPI
# belongs to an unrelated project), taken from the repository.
REPOSITORY = "https://github.com/rlstack-dev/rlstack"


def pip_install(extra: str, options: str = "") -> str:
    """The command that installs rlstack with ``extra`` (after pip's ``options``, e.g.
    ``"-U"``), for error messages."""
    return f"pip install {options + ' ' if options else ''}'rlstack-ray[{extra}] @ git+{REPOSITORY}'"


class RLStackError(Exception):
    """Base class of every error rlstack raises on purpose."""


class MissingFeatureError(RLStackError, AttributeError):
    """An attribute RLlib 1.13 had and rlstack does not; the message says what to use."""


class ConfigError(RLStackError, ValueError):
    """A config key is unknown or its value is impossible."""


class EnvError(RLStackError, ValueError):
    """An environment cannot be found, built or used."""


class ObservationError(RLStackError, ValueError):
    """An observation handed to a trained policy does not fit its observation space."""


class EnvFailureError(EnvError):
    """A sub-env raised in ``step()`` or ``reset()`` (the env's own exception is chained);
    ``restart_failed_sub_environments=True`` restarts the sub-env instead."""


class NonFiniteError(RLStackError, FloatingPointError):
    """A NaN or inf where training cannot go on: in an env's observation or reward, or in
    a loss or its gradients (raised before the update is applied)."""

    # A recreated worker would meet the same numbers again (see WorkerSet.on_worker_failure).
    fatal = True

    @classmethod
    def in_update(cls, what: str, where: str, lr: float | None = None) -> "NonFiniteError":
        """The error for a learner update that was not applied because ``what`` (the
        loss terms or gradients) was NaN or inf.

        Args:
            what: What was non-finite, e.g. ``"the loss terms vf_loss, total_loss"``.
            where: Which policy and step, e.g. ``"PPOTorchPolicy, epoch 1 minibatch 3"``.
            lr: The learning rate in use, for the hint.
        """
        lr_text = f" (lr={lr:g})" if lr is not None else ""
        return cls(
            f"Non-finite {what} in {where}; the update was not applied, so the weights hold no NaN or inf "
            f"from it. Usual causes: a learning rate too high{lr_text} (lower lr or set grad_clip), NaN/inf "
            "or very large rewards (clip_rewards, or scale them in the env), observations on a large scale "
            "(observation_filter='MeanStdFilter'), or a log(0) / division by zero in a custom loss or model."
        )


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


class WorkerFailureError(RLStackError, RuntimeError):
    """A rollout or evaluation worker failed and the config does not let training go on."""


class PlacementTimeoutError(RLStackError, TimeoutError):
    """A standalone trainer's remote workers could not get their CPUs/GPUs within
    ``placement_timeout_s`` (the resources they asked for were released again)."""


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
