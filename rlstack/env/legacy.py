"""An adapter that gives old gym-style envs the gymnasium API.

Old envs return only ``obs`` from ``reset()`` and a 4-tuple ``(obs, reward, done, info)``
from ``step()``. gymnasium splits ``done`` into ``terminated`` (the MDP ended: do not
bootstrap) and ``truncated`` (cut short, e.g. a time limit: bootstrap). Old gym marked
time-limit cuts with ``info["TimeLimit.truncated"]``; we honour that flag.

A 1.x env class keeps that API after ``import gym`` became ``import gymnasium as gym``:
it is then a ``gymnasium.Env`` whose ``reset()`` takes no ``seed``. Such an env is
adapted too; the sign is its ``reset`` signature, which gymnasium's own envs never lack.

gym 0.21's ``env.np_random`` was a numpy ``RandomState``, and old envs call its
``randint`` (``rand``, ``randn``, ``random_sample``); gymnasium's is a ``Generator``,
which has ``integers`` instead. An adapted env's generator is a
:class:`LegacyNpRandom`: gymnasium's generator, seeded as gymnasium seeds it, that also
answers those ``RandomState`` calls.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from rlstack.env.multi_agent_env import MultiAgentEnv
from rlstack.utils.imports import import_object


class LegacyNpRandom(np.random.Generator):
    """A numpy ``Generator`` that also answers gym 0.21's ``RandomState`` calls.

    ``randint(low, high=None, size=None, dtype=int)`` is ``RandomState.randint``: ``high``
    is exclusive and ``randint(n)`` draws from ``[0, n)`` (``integers`` with the same
    arguments); ``rand(*shape)``, ``randn(*shape)`` and ``random_sample(size)`` are
    ``random`` and ``standard_normal``. The draws come from the bit generator given, so
    wrapping an env's generator continues its stream.

    Args:
        bit_generator: The bit generator to draw from (a seeded generator's
            ``bit_generator``).

    Examples:
        >>> rng = LegacyNpRandom(np.random.PCG64(0))
        >>> bool(0 <= rng.randint(3) < 3), rng.randint(1, 4, size=2).shape
        (True, (2,))
    """

    def randint(self, low: int, high: int | None = None, size: Any = None, dtype: Any = int) -> Any:
        """``RandomState.randint``: integers in ``[low, high)``, or ``[0, low)`` without ``high``."""
        return self.integers(low, high, size=size, dtype=dtype)

    def rand(self, *shape: int) -> Any:
        """``RandomState.rand``: uniform floats in ``[0, 1)`` of shape ``shape``."""
        return self.random(shape) if shape else self.random()

    def randn(self, *shape: int) -> Any:
        """``RandomState.randn``: standard normal floats of shape ``shape``."""
        return self.standard_normal(shape) if shape else self.standard_normal()

    def random_sample(self, size: Any = None) -> Any:
        """``RandomState.random_sample``: uniform floats in ``[0, 1)``."""
        return self.random(size)

    def __reduce__(self) -> tuple:
        # Generator's own reduction rebuilds a plain Generator; keep the class (and the
        # bit generator's state) through pickling and deepcopy.
        return (type(self), (self.bit_generator,))


def legacy_np_random(env: Any) -> None:
    """Makes ``env.np_random`` a :class:`LegacyNpRandom` on the same stream, where it is
    a gymnasium-style ``Generator`` (a gymnasium env's, created now if it has none yet; or
    one an old env's own ``seed()`` made with ``gymnasium.utils.seeding``). A gym 0.21
    ``RandomState`` or an env without ``np_random`` is left alone."""
    if isinstance(env, gym.Env):
        current = env.np_random  # (gymnasium creates it on first read)
    else:
        current = vars(env).get("np_random") if hasattr(env, "__dict__") else None
    if isinstance(current, np.random.Generator) and not isinstance(current, LegacyNpRandom):
        env.np_random = LegacyNpRandom(current.bit_generator)


class LegacyEnvAdapter(gym.Env):
    """Wraps an env with the old 4-tuple ``step`` / obs-only ``reset`` API.

    Args:
        env: The old-style env. It needs ``observation_space``, ``action_space``,
            ``reset()`` and ``step(action)``; ``seed(s)``, ``render()`` and ``close()``
            are used when present.
    """

    # get_sub_environments() gives the env inside, the object the user's creator built.
    wraps_user_env = True

    def __init__(self, env: Any) -> None:
        self.env = env
        self.observation_space = env.observation_space
        self.action_space = env.action_space
        self.metadata = getattr(env, "metadata", {})
        self.render_mode = getattr(env, "render_mode", None)
        legacy_np_random(env)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        """Resets the old env, seeding it first when ``seed`` is given: through its own
        ``seed(seed)`` when it has one, else (a ``gymnasium.Env``) as gymnasium's
        ``Env.reset(seed=seed)`` seeds ``np_random``."""
        if seed is not None:
            if callable(getattr(self.env, "seed", None)):
                self.env.seed(seed)
            elif isinstance(self.env, gym.Env):
                gym.Env.reset(self.env, seed=seed)
            legacy_np_random(self.env)
        result = self.env.reset()
        # Some half-migrated envs already return (obs, info); accept both.
        if isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], dict):
            return result
        return result, {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        """Steps the old env and splits ``done`` into ``terminated`` and ``truncated``."""
        return five_values(self.env.step(action))

    @property
    def unwrapped(self) -> Any:
        """The old env itself (under any wrappers of its own), as ``isinstance`` checks
        in user code expect."""
        return getattr(self.env, "unwrapped", self.env)

    @property
    def spec(self) -> Any:
        """The registration the env was made from: gymnasium's ``make`` writes it on
        :attr:`unwrapped`, the old env."""
        return getattr(self.unwrapped, "spec", None)

    @spec.setter
    def spec(self, value: Any) -> None:
        self.unwrapped.spec = value

    def __getattr__(self, name: str) -> Any:
        # The old env's own attributes and methods (a curriculum env's set_task, called
        # through foreach_env) stay reachable through the adapter.
        if name == "env" or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.env, name)

    def render(self) -> Any:
        """Renders the old env, if it can."""
        return self.env.render() if hasattr(self.env, "render") else None

    def close(self) -> None:
        """Closes the old env, if it can."""
        if hasattr(self.env, "close"):
            self.env.close()


def five_values(result: tuple) -> tuple[Any, float, bool, bool, dict]:
    """A ``step`` result as gymnasium's 5 values: an old 4-tuple's ``done`` split into
    ``terminated`` and ``truncated`` (by ``info["TimeLimit.truncated"]``)."""
    if len(result) == 5:
        return result
    obs, reward, done, info = result
    info = dict(info or {})
    truncated = bool(done and info.pop("TimeLimit.truncated", False))
    return obs, reward, bool(done) and not truncated, truncated, info


def four_values(result: tuple) -> tuple[Any, float, bool, dict]:
    """A ``step`` result as gym 0.21's 4 values, the inverse of :func:`five_values`:
    ``done = terminated or truncated``, a truncation marked in ``info["TimeLimit.truncated"]``
    as gym's TimeLimit did. ``rlstack migrate`` writes it where a 1.x env class of the
    project returns a gymnasium env's step, so that the class keeps its 1.x API."""
    if len(result) == 4:
        return result
    obs, reward, terminated, truncated, info = result
    if truncated and not terminated:
        info = {**(info or {}), "TimeLimit.truncated": True}
    return obs, reward, bool(terminated or truncated), info


def is_legacy_env(env: Any) -> bool:
    """True when ``env`` has the old gym API: not a gymnasium env but shaped like an old
    gym one, or a single-agent ``gymnasium.Env`` whose ``reset()`` takes no ``seed``."""
    if isinstance(env, gym.Env):
        return not isinstance(env, MultiAgentEnv) and not reset_takes_seed(env)
    return all(hasattr(env, name) for name in ("reset", "step", "observation_space", "action_space"))


def reset_takes_seed(env: Any) -> bool:
    """Whether ``env.reset`` accepts gymnasium's ``seed`` keyword (found once per env
    class: the signature is read on the first call and kept)."""
    cls = type(env)
    known = _SEEDED_RESET.get(cls)
    if known is None:
        known = _SEEDED_RESET[cls] = _signature_takes_seed(env)
    return known


# reset_takes_seed's answers, by env class.
_SEEDED_RESET: dict[type, bool] = {}


def _signature_takes_seed(env: Any) -> bool:
    try:
        parameters = inspect.signature(env.reset).parameters.values()
    except (TypeError, ValueError):  # a builtin or C-implemented reset: trust it
        return True
    return any(p.name == "seed" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def legacy_entry_point(entry_point: str | Callable[..., Any]) -> Callable[..., gym.Env]:
    """An entry point for ``gymnasium.register`` that makes a gym 0.21 env with gymnasium's API.

    A 1.x project registers its own env with gym (``register(id="corridor-v0",
    entry_point="my_pkg.envs:Corridor")``) and then calls ``gym.make("corridor-v0")``;
    gymnasium's ``make`` resets with ``seed=`` and expects 5 values from ``step``, which the
    old class does not give. ``rlstack migrate`` wraps such an entry point in this function:
    the env it makes comes in a :class:`LegacyEnvAdapter` when it has the old API, as it is
    when it has gymnasium's.

    Args:
        entry_point: ``"module:Class"`` (imported on the first ``make``) or a callable
            returning the env; ``make``'s keyword arguments are passed on.

    Returns:
        The creator to register.
    """

    def make(**kwargs: Any) -> gym.Env:
        target = import_object(entry_point, "entry_point") if isinstance(entry_point, str) else entry_point
        env = target(**kwargs)
        return LegacyEnvAdapter(env) if is_legacy_env(env) else env

    return make
