"""Checking a raw observation against the policy's observation space, with a message that
says what was given, what the space expects and how to fix the call (``compute_single_action``
and ``compute_actions`` on raw observations)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from rlstack.errors import ObservationError

# Array kinds a Box observation may have: bool, signed / unsigned int, float.
_NUMERIC_KINDS = frozenset("biuf")


def check_observation(obs: Any, space: gym.Space, what: str = "Observation") -> None:
    """Raises unless ``obs`` is one raw observation of ``space``.

    Box observations are checked by shape and numeric dtype only (one array conversion
    and two comparisons: this runs on every ``compute_single_action``); their values may
    lie outside the declared bounds, as the policy can still act on them. Other spaces
    use ``space.contains``.

    Args:
        obs: The observation as the caller passed it.
        space: The policy's observation space.
        what: How the message names the observation (e.g. "Observation 3 of 8").

    Raises:
        ObservationError: Saying what was given (type, shape, dtype), the space
            expected, and how to fix the call.
    """
    if isinstance(space, gym.spaces.Box):
        try:
            array = np.asarray(obs)
        except (TypeError, ValueError):  # e.g. a ragged nested list
            array = None
        if array is not None and array.shape == space.shape and array.dtype.kind in _NUMERIC_KINDS:
            return
    else:
        try:
            if space.contains(obs):
                return
        except (TypeError, ValueError, KeyError, IndexError, AttributeError):
            pass
    raise ObservationError(_observation_mismatch(obs, space, what))


def _observation_mismatch(obs: Any, space: gym.Space, what: str) -> str:
    try:
        array = None if isinstance(obs, (dict, tuple)) else np.asarray(obs)
    except (TypeError, ValueError):
        array = None
    shape = array.shape if array is not None else None
    dtype = array.dtype if array is not None else None
    text = " ".join(repr(obs).split())  # one line, even for an image
    text = text if len(text) <= 80 else text[:77] + "..."
    given = f"{what} {text} ({type(obs).__name__}, shape {shape}, dtype {dtype})"
    expected = f"the observation space {space} (shape {space.shape}, dtype {space.dtype})"
    reset_pair = isinstance(obs, tuple) and len(obs) == 2 and isinstance(obs[1], dict)
    if reset_pair and not isinstance(space, gym.spaces.Tuple):
        fix = ("It looks like the (obs, info) pair that gymnasium's env.reset() returns: unpack it, "
               "obs, info = env.reset(), and pass obs.")
    elif array is not None and isinstance(space, gym.spaces.Box) and array.shape[1:] == space.shape and array.ndim:
        fix = f"It looks like a batch of {array.shape[0]} observations: pass them to compute_actions()."
    elif array is not None and isinstance(space, gym.spaces.Box) and array.dtype.kind not in _NUMERIC_KINDS:
        fix = f"Its dtype {array.dtype} is not numeric: pass numbers, e.g. np.asarray(obs, dtype=np.{space.dtype})."
    elif array is not None and isinstance(space, gym.spaces.Box) and array.size == int(np.prod(space.shape)):
        fix = f"It holds the right number of values: reshape it to {space.shape}."
    else:
        fix = ("Pass one observation as the env returns it (from env.reset() or env.step()); a trainer acts only on "
               "observations of the env it was built (or restored) with.")
    return f"{given} does not fit {expected}. {fix}"
