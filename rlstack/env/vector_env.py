"""VectorEnv: several copies of one env stepped together, with automatic resets.

Each ``step`` returns the next observation of every sub-env; a sub-env whose episode
just ended is reset at once, and the observation that ended the episode is returned
separately in ``final_obs`` so that a truncated episode can bootstrap from it.
``terminated`` and ``truncated`` stay apart (ARCHITECTURE.md, "Episodes").

A sub-env whose ``step`` or ``reset`` raises either stops the run with an
:class:`~rlstack.errors.EnvFailureError` naming it, or, with ``restart_failed``
(``restart_failed_sub_environments``), is closed, rebuilt and reset while the other
sub-envs go on; :attr:`VectorEnv.broken` then tells the caller which episodes broke.

A class written to classic RLlib's VectorEnv API (built with ``observation_space``,
``action_space`` and ``num_envs``; overriding ``vector_reset``, ``reset_at`` and
``vector_step``, whose ``dones`` end episodes the caller then resets one by one) is
driven through those methods: :meth:`VectorEnv.reset` and :meth:`VectorEnv.step` call
them and reset each ended sub-env with ``reset_at``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from rlstack.env.base_env import BaseEnv
from rlstack.env.legacy import LegacyEnvAdapter
from rlstack.errors import EnvError, EnvFailureError

logger = logging.getLogger(__name__)

# A sub-env that fails more than this many times in a row (no episode ending in between)
# is broken for good: restarting it again would only spin. The default of the config key
# num_consecutive_env_restarts_tolerance.
MAX_RESTARTS_IN_ROW = 10


def env_name(env: gym.Env) -> str:
    """The env's registered id, else its (unwrapped) class name, for messages."""
    spec = getattr(env, "spec", None)
    if spec is not None and getattr(spec, "id", None):
        return str(spec.id)
    try:
        return type(env.unwrapped).__name__
    except Exception:  # noqa: BLE001 - a broken env may fail even here
        return type(env).__name__


def user_env(env: Any) -> Any:
    """The object the env creator built, under the adapters and wrappers rlstack put
    around it (those whose class sets ``wraps_user_env``)."""
    while getattr(type(env), "wraps_user_env", False):
        env = env.env
    return env


class VectorEnv(BaseEnv):
    """``num_envs`` sub-envs made by ``make_one(vector_index)``.

    Args:
        make_one: Builds the sub-env with the given vector index (also used to rebuild
            a failed one).
        num_envs: How many sub-envs.
        seeds: Seed of each sub-env's first reset (None: unseeded). A rebuilt sub-env's
            first reset gets a seed derived from its own and the restart count.
        horizon: Truncate episodes after this many steps (None: the env's own limit).
        no_done_at_end: Record every episode end as a truncation, never as terminal
            (1.x's ``no_done_at_end``): value targets bootstrap from the last observation.
        soft_horizon: At the ``horizon``, end the episode's record (a truncation) but
            not the env's episode: the next record starts from the same state, without
            a reset (1.x's ``soft_horizon``).
        restart_failed: Close, rebuild and reset a sub-env whose ``step`` or ``reset``
            raises, instead of raising :class:`EnvFailureError`.
        worker_index: The rollout worker this runs in, for messages.
    """

    def __init__(
        self,
        make_one: Callable[[int], gym.Env] | None = None,
        num_envs: int = 1,
        seeds: Sequence[int | None] | None = None,
        horizon: int | None = None,
        restart_failed: bool = False,
        no_done_at_end: bool = False,
        worker_index: int = 0,
        max_restarts_in_row: int = MAX_RESTARTS_IN_ROW,
        soft_horizon: bool = False,
        *,
        observation_space: gym.Space | None = None,
        action_space: gym.Space | None = None,
    ) -> None:
        if isinstance(make_one, gym.Space):
            # Classic RLlib's positional form: VectorEnv(observation_space, action_space, num_envs).
            observation_space, action_space, num_envs, seeds = make_one, num_envs, seeds, None
            make_one = None
        self.make_one = make_one
        self.num_envs = int(num_envs)
        if make_one is None:
            if observation_space is None or action_space is None:
                raise TypeError("VectorEnv needs make_one (a function of the vector index that builds one "
                                "sub-env), or classic RLlib's observation_space, action_space and num_envs "
                                "with vector_reset, reset_at and vector_step overridden.")
            # A subclass written to classic RLlib's API: it steps its own sub-envs.
            self.envs = []
        else:
            self.envs = [make_one(i) for i in range(num_envs)]
        self.observation_space = observation_space if observation_space is not None else self.envs[0].observation_space
        self.action_space = action_space if action_space is not None else self.envs[0].action_space
        self._initial_seeds = list(seeds) if seeds is not None else [None] * num_envs
        self._seeds = list(self._initial_seeds)
        self.horizon = horizon
        self.no_done_at_end = no_done_at_end
        self.soft_horizon = soft_horizon
        self.restart_failed = restart_failed
        self.max_restarts_in_row = max_restarts_in_row
        self.worker_index = worker_index
        # Steps of each sub-env's current episode (for the horizon and for messages).
        self._steps = [0] * num_envs
        #: Sub-envs restarted (closed, rebuilt, reset) since this VectorEnv was built.
        self.num_restarts = 0
        #: Sub-envs whose episode broke off in the last :meth:`step` (their ``step``
        #: raised); their row of that step is a placeholder and the episode has no end.
        self.broken: list[int] = []
        self._restarts_in_row = np.zeros(num_envs, dtype=np.int64)
        self._restarts_of = np.zeros(num_envs, dtype=np.int64)

    @staticmethod
    def vectorize_gym_envs(
        make_env: Callable[[int], gym.Env] | None = None,
        existing_envs: Sequence[gym.Env] | None = None,
        num_envs: int = 1,
        action_space: gym.Space | None = None,
        observation_space: gym.Space | None = None,
        env_config: Any = None,
        policy_config: Any = None,
    ) -> VectorEnv:
        """Classic RLlib's way to build a VectorEnv from single envs: ``existing_envs``
        first, then ``make_env(vector_index)`` for the rest (``env_config`` and
        ``policy_config`` are not used: ``make_env`` already holds what it needs)."""
        existing = list(existing_envs or [])
        if make_env is None and len(existing) < num_envs:
            raise TypeError(f"vectorize_gym_envs got {len(existing)} existing envs for num_envs={num_envs}; "
                            "pass make_env (a function of the vector index) to build the rest.")
        return VectorEnv(lambda i: existing[i] if i < len(existing) else make_env(i), num_envs,
                         observation_space=observation_space, action_space=action_space)

    def _classic_api(self) -> bool:
        # A subclass that overrides classic RLlib's vector_step steps its sub-envs itself.
        return type(self).vector_step is not VectorEnv.vector_step

    def vector_reset(self) -> list[Any]:
        """Classic RLlib's name of :meth:`reset`; a classic subclass overrides it."""
        return self.reset()

    def reset_at(self, index: int | None = None) -> Any:
        """Resets sub-env ``index`` (0 when None) and returns its first observation;
        classic RLlib's name of :meth:`reset_one`, which a classic subclass overrides."""
        return self.reset_one(0 if index is None else index)

    def vector_step(self, actions: Sequence[Any]) -> tuple[list[Any], list[float], list[bool], list[dict]]:
        """Classic RLlib's step, overridden by a classic subclass: ``(obs, rewards,
        dones, infos)``, one per sub-env, without resetting ended ones."""
        raise NotImplementedError(
            "rlstack's VectorEnv steps with step(), which resets ended sub-envs itself and keeps terminated "
            "apart from truncated; override vector_step (with vector_reset and reset_at) only in a subclass "
            "written to classic RLlib's VectorEnv API.")

    def try_render_at(self, index: int | None = None) -> Any:
        """Renders sub-env ``index`` (0 when None), if it has a ``render`` method."""
        envs = self.get_sub_environments()
        env = envs[0 if index is None else index] if envs else None
        return env.render() if env is not None and hasattr(env, "render") else None

    def reset(self) -> list[Any]:
        """Resets every sub-env (seeded on the first call) and returns their observations."""
        if self._classic_api():
            self._steps = [0] * self.num_envs
            return list(self.vector_reset())
        observations = []
        for i in range(self.num_envs):
            try:
                observations.append(self.reset_one(i, seed=self._seeds[i]))
            except Exception as exc:  # noqa: BLE001 - any env error; re-raised or restarted
                observations.append(self._restart(i, "reset", exc))
        self._seeds = [None] * self.num_envs
        return observations

    def reset_one(self, index: int, seed: int | None = None) -> Any:
        """Resets sub-env ``index`` and returns its first observation (no restart on error)."""
        self._steps[index] = 0
        result = self.envs[index].reset(seed=seed)
        if not (isinstance(result, tuple) and len(result) == 2):
            # A gymnasium.Env subclass that still has the old obs-only reset.
            self.envs[index] = LegacyEnvAdapter(self.envs[index])
            result = self.envs[index].reset(seed=seed)
        return result[0]

    def step(
        self, actions: Sequence[Any]
    ) -> tuple[list[Any], np.ndarray, np.ndarray, np.ndarray, dict[int, Any], list[dict]]:
        """Steps every sub-env once.

        Returns:
            ``(obs, rewards, terminateds, truncateds, final_obs, infos)``: ``obs`` holds
            the reset observation for sub-envs whose episode ended; ``final_obs`` maps
            their index to the observation that ended it. A sub-env restarted after its
            ``step`` raised is listed in :attr:`broken`; its ``obs`` is the rebuilt env's
            first observation, its reward 0 and its episode neither terminated nor
            truncated.

        Raises:
            EnvFailureError: If a sub-env raised and ``restart_failed`` is off, or it
                keeps failing after restarts.
        """
        if self._classic_api():
            return self._classic_step(actions)
        n = self.num_envs
        if isinstance(actions, np.ndarray) and actions.ndim == 1 and actions.dtype.kind in "iu":
            # Discrete actions as Python ints: gymnasium's Discrete.contains (which envs
            # call every step) checks them several times faster than numpy scalars.
            actions = actions.tolist()
        observations: list[Any] = [None] * n
        rewards = np.empty(n, dtype=np.float32)
        terminateds = np.zeros(n, dtype=bool)
        truncateds = np.zeros(n, dtype=bool)
        final_obs: dict[int, Any] = {}
        infos: list[dict] = [{}] * n
        if self.broken:
            self.broken = []
        steps = self._steps
        for i, env in enumerate(self.envs):
            try:
                result = env.step(actions[i])
            except Exception as exc:  # noqa: BLE001 - any env error; re-raised or restarted
                observations[i] = self._restart(i, "step", exc)
                rewards[i] = 0.0
                self.broken.append(i)
                continue
            if len(result) != 5:
                if len(result) == 4 and not isinstance(env, LegacyEnvAdapter):
                    raise EnvError(
                        f"{type(env).__name__}.step returned 4 values (old gym API) after a "
                        "gymnasium-style reset; return (obs, reward, terminated, truncated, info) "
                        "or wrap the env in rlstack.env.LegacyEnvAdapter."
                    )
                raise EnvError(f"{type(env).__name__}.step returned {len(result)} values; expected 5.")
            obs, reward, terminated, truncated, info = result
            rewards[i] = reward
            infos[i] = info
            steps[i] += 1
            horizon_cut = self.horizon is not None and steps[i] >= self.horizon and not (terminated or truncated)
            if horizon_cut:
                truncated = True
            if terminated and self.no_done_at_end:
                terminated, truncated = False, True
            if terminated or truncated:
                terminateds[i] = bool(terminated)
                truncateds[i] = bool(truncated) and not terminated
                final_obs[i] = obs
                if horizon_cut and self.soft_horizon:
                    steps[i] = 0  # the record ends; the env's episode goes on from obs
                else:
                    obs = self._next_episode(i)
            observations[i] = obs
        return observations, rewards, terminateds, truncateds, final_obs, infos

    def _classic_step(
        self, actions: Sequence[Any]
    ) -> tuple[list[Any], np.ndarray, np.ndarray, np.ndarray, dict[int, Any], list[dict]]:
        """:meth:`step` of a subclass written to classic RLlib's API: its ``vector_step``,
        then ``reset_at`` for each sub-env whose episode ended. A ``done`` counts as
        terminal unless the info says ``TimeLimit.truncated`` or the horizon cut it."""
        observations, rewards, dones, infos = self.vector_step(actions)
        observations, infos = list(observations), [info or {} for info in infos]
        n = self.num_envs
        if len(observations) != n:
            raise EnvError(f"{type(self).__name__}.vector_step returned {len(observations)} observations for "
                           f"num_envs={n}; return one per sub-env.")
        terminateds = np.zeros(n, dtype=bool)
        truncateds = np.zeros(n, dtype=bool)
        final_obs: dict[int, Any] = {}
        for i in range(n):
            self._steps[i] += 1
            cut = self.horizon is not None and self._steps[i] >= self.horizon
            if not (dones[i] or cut):
                continue
            truncated = cut and not dones[i] or bool(infos[i].get("TimeLimit.truncated", False))
            if self.no_done_at_end:
                truncated = True
            terminateds[i], truncateds[i] = not truncated, truncated
            final_obs[i] = observations[i]
            self._steps[i] = 0
            observations[i] = self.reset_at(i)
        return observations, np.asarray(rewards, dtype=np.float32), terminateds, truncateds, final_obs, infos

    def _next_episode(self, index: int) -> Any:
        """Resets sub-env ``index`` after its episode came to its end (so its failures in
        a row are forgotten) and returns the next episode's first observation."""
        self._restarts_in_row[index] = 0  # it works: an episode came to its end
        try:
            return self.reset_one(index)
        except Exception as exc:  # noqa: BLE001 - any env error; re-raised or restarted
            # The episode itself ended well; only the next one cannot start.
            return self._restart(index, "reset", exc)

    def _restart(self, index: int, method: str, exc: Exception) -> Any:
        """Raises for a sub-env whose ``method`` raised ``exc``, or (``restart_failed``)
        closes, rebuilds and resets it; returns its new first observation."""
        where = (f"Sub-env {index} (vector index) of rollout worker {self.worker_index} "
                 f"({env_name(self.envs[index])}) raised {type(exc).__name__} in {method}()")
        if method == "step":
            where += f" at step {self._steps[index] + 1} of its episode"
        if not self.restart_failed:
            raise EnvFailureError(
                f"{where}: {exc}. Fix the env, or set restart_failed_sub_environments=True to close, rebuild "
                "and reset a sub-env that fails (its broken episode is dropped) and go on."
            ) from exc
        while True:
            self._restarts_in_row[index] += 1
            if self._restarts_in_row[index] > self.max_restarts_in_row:
                raise EnvFailureError(
                    f"{where}: {exc}; it failed {self.max_restarts_in_row + 1} times in a row without finishing an "
                    "episode, so restart_failed_sub_environments gives up on it "
                    "(num_consecutive_env_restarts_tolerance). Fix the env (or, if its episodes never end, set "
                    "horizon so that they do)."
                ) from exc
            logger.warning("%s: %s; closing it and starting a new one.", where, exc)
            self.num_restarts += 1
            self._restarts_of[index] += 1
            try:
                self.envs[index].close()
            except Exception:  # noqa: BLE001 - a broken env may not close cleanly; it is dropped anyway
                pass
            self.envs[index] = self.make_one(index)
            try:
                return self.reset_one(index, seed=self._restart_seed(index))
            except Exception as reset_exc:  # noqa: BLE001 - the new env fails too: try again
                exc, method = reset_exc, "reset"
                where = (f"Sub-env {index} (vector index) of rollout worker {self.worker_index} "
                         f"({env_name(self.envs[index])}) raised {type(exc).__name__} in reset()")

    def _restart_seed(self, index: int) -> int | None:
        # Deterministic when the run is seeded, and apart from every other sub-env's seed.
        base = self._initial_seeds[index]
        if base is None:
            return None
        entropy = [int(base) & 0xFFFFFFFFFFFFFFFF, int(self._restarts_of[index])]
        return int(np.random.SeedSequence(entropy).generate_state(1)[0])

    def get_sub_environments(self) -> list[gym.Env]:
        """The sub-envs the env creator built, by vector index (a rebuilt one replaces
        the failed one; an old-API env is given as itself, not as its adapter)."""
        return [user_env(env) for env in self.envs]

    def close(self) -> None:
        """Closes every sub-env."""
        for env in self.envs:
            env.close()
