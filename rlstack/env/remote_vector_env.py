"""RemoteVectorEnv: a worker's sub-envs each in a Ray actor of its own (``remote_worker_envs``).

Each step sends every sub-env its action at once and then waits for all of them, so
sub-envs whose ``step`` is slow (a simulator, a remote service) run in parallel while
the worker computes one batch of actions for all (1.13's ``remote_worker_envs``).
Resets, the horizon, automatic resets and restarts of failed sub-envs are the
:class:`~rlstack.env.VectorEnv`'s own.

An env given as a class becomes the actor class itself (a subclass that adds the
gymnasium adapters below), so the user's own methods can be called on the actor handles
that ``get_sub_environments()`` and ``foreach_env`` give: ``env.set_task.remote(task)``.
An env given by name or creator is built inside a holder actor, which offers only the
env API. The actors take no CPU of their own, as in 1.13: they share the worker's.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from rlstack.env.legacy import LegacyEnvAdapter, five_values, is_legacy_env
from rlstack.env.vector_env import VectorEnv
from rlstack.errors import ConfigError

# Ray options of a sub-env actor.
ACTOR_OPTIONS = {"num_cpus": 0}


class EnvActorMethods:
    """What an env actor adds to the env it serves: reset and step with gymnasium's
    results whatever API the env was written to (an old env is adapted inside the actor,
    where it lives)."""

    def _rlstack_env(self) -> Any:
        return self

    def _rlstack_view(self) -> Any:
        view = self.__dict__.get("_rlstack_adapted")
        if view is None:
            raw = self._rlstack_env()
            view = self.__dict__["_rlstack_adapted"] = LegacyEnvAdapter(raw) if is_legacy_env(raw) else raw
        return view

    def _rlstack_spaces(self) -> tuple[gym.Space, gym.Space, bool]:
        from rlstack.env.multi_agent_env import MultiAgentEnv

        raw = self._rlstack_env()
        return raw.observation_space, raw.action_space, isinstance(raw, MultiAgentEnv)

    def _rlstack_reset(self, seed: int | None = None) -> tuple[Any, dict]:
        result = self._rlstack_view().reset(seed=seed)
        if not (isinstance(result, tuple) and len(result) == 2):
            # An env whose reset takes seed but still returns the observation only.
            self.__dict__["_rlstack_adapted"] = LegacyEnvAdapter(self._rlstack_env())
            result = (result, {})
        return result

    def _rlstack_step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        return five_values(self._rlstack_view().step(action))


class _EnvHolder(EnvActorMethods):
    """The actor of an env given by name or creator: it builds the env and serves it."""

    def __init__(self, build: Callable[[], Any]) -> None:
        self.env = build()

    def _rlstack_env(self) -> Any:
        return self.env

    def close(self) -> None:
        self.env.close()


def make_env_actor(env_class: type | None, build: Callable[[], Any], context: Any) -> Any:
    """A Ray actor serving one sub-env: an actor of ``env_class`` itself (constructed
    with ``context``) when the env was given as a class, else a holder of ``build()``."""
    import ray

    if env_class is not None:
        served = type(env_class.__name__, (env_class, EnvActorMethods), {"__module__": env_class.__module__})
        return ray.remote(**ACTOR_OPTIONS)(served).remote(context)
    return ray.remote(**ACTOR_OPTIONS)(_EnvHolder).remote(build)


def is_plain_env_class(spec: Any) -> bool:
    """Whether ``spec`` is an env class an actor can subclass (a single-agent gym-style
    env, not a vector, external or multi-agent one)."""
    from rlstack.env.base_env import BaseEnv
    from rlstack.env.external_env import ExternalEnv
    from rlstack.env.multi_agent_env import MultiAgentEnv

    return inspect.isclass(spec) and not issubclass(spec, (BaseEnv, ExternalEnv, MultiAgentEnv))


class ActorEnv(gym.Env):
    """The worker's stand-in for one env actor: gymnasium's API, answered by the actor.

    :meth:`send` starts a step without waiting, so that all sub-envs step at once; the
    :meth:`step` that follows collects its result.
    """

    def __init__(self, actor: Any) -> None:
        import ray

        self.actor = actor
        self.observation_space, self.action_space, multi_agent = ray.get(actor._rlstack_spaces.remote())
        if multi_agent:
            ray.kill(actor)
            raise ConfigError("remote_worker_envs=True is not supported for multi-agent envs by rlstack: set it "
                              "to False (the sub-envs then step inside the rollout worker) and raise num_workers "
                              "to step more envs in parallel.")
        self._sent: Any = None

    def send(self, action: Any) -> None:
        """Starts the actor's step with ``action``."""
        self._sent = self.actor._rlstack_step.remote(action)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        import ray

        self._sent = None
        return ray.get(self.actor._rlstack_reset.remote(seed))

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        import ray

        sent, self._sent = self._sent, None
        return ray.get(sent if sent is not None else self.actor._rlstack_step.remote(action))

    def close(self) -> None:
        import ray

        ray.kill(self.actor)


class RemoteVectorEnv(VectorEnv):
    """A :class:`VectorEnv` whose ``make_one`` builds :class:`ActorEnv` s."""

    def step(self, actions: Sequence[Any]) -> tuple[list[Any], np.ndarray, np.ndarray, np.ndarray, dict[int, Any],
                                                     list[dict]]:
        """Sends every sub-env its action, then steps as :meth:`VectorEnv.step` (which
        collects the results in order)."""
        if isinstance(actions, np.ndarray) and actions.ndim == 1 and actions.dtype.kind in "iu":
            actions = actions.tolist()
        for env, action in zip(self.envs, actions):
            env.send(action)
        return super().step(actions)

    def get_sub_environments(self) -> list[Any]:
        """The sub-envs' Ray actor handles (call an env's own methods with ``.remote()``)."""
        return [env.actor for env in self.envs]
