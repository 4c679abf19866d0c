"""MultiAgentVectorEnv: a rollout worker's multi-agent sub-envs, stepped together.

The multi-agent twin of :class:`~rlstack.env.vector_env.VectorEnv` (whose seeding,
horizon, failure handling and restarts it inherits): every value is a dict by agent id
per sub-env, and a sub-env whose episode ended (``"__all__"``) is reset at once, its
last observations returned apart in ``final_obs``. :func:`make_vector_env` picks the
single- or multi-agent kind from the first sub-env.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym

from rlstack.env.external_env import ExternalEnv
from rlstack.env.legacy import reset_takes_seed
from rlstack.env.multi_agent_env import ALL, DEFAULT_AGENT_ID, MultiAgentEnv
from rlstack.env.vector_env import VectorEnv
from rlstack.errors import EnvError

__all__ = ["MultiAgentVectorEnv", "SingleAgentAsMultiAgent", "make_vector_env"]

class SingleAgentAsMultiAgent(MultiAgentEnv):
    """A single-agent env as a MultiAgentEnv of one agent, ``"agent0"`` (what 1.13 did
    with a ``gym.Env`` in a multi-agent config)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__()
        self.env = env
        self.observation_space = env.observation_space
        self.action_space = env.action_space
        self._agent_ids = {DEFAULT_AGENT_ID}

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        obs, info = self.env.reset(seed=seed, options=options)
        return {DEFAULT_AGENT_ID: obs}, {DEFAULT_AGENT_ID: info}

    def step(self, action_dict: dict) -> tuple[dict, dict, dict, dict, dict]:
        obs, reward, terminated, truncated, info = self.env.step(action_dict[DEFAULT_AGENT_ID])
        return ({DEFAULT_AGENT_ID: obs}, {DEFAULT_AGENT_ID: reward},
                {DEFAULT_AGENT_ID: terminated, ALL: terminated}, {DEFAULT_AGENT_ID: truncated, ALL: truncated},
                {DEFAULT_AGENT_ID: info})

    def close(self) -> None:
        self.env.close()


class MultiAgentVectorEnv(VectorEnv):
    """``num_envs`` multi-agent sub-envs (see :class:`VectorEnv` for the arguments)."""

    def reset_one(self, index: int, seed: int | None = None) -> dict[Any, Any]:
        """Resets sub-env ``index`` and returns its first observations by agent id."""
        self._steps[index] = 0
        env = self.envs[index]
        if reset_takes_seed(env):
            result = env.reset(seed=seed)
        else:
            # A 1.x MultiAgentEnv: reset() without arguments (seeded through seed() if it has one).
            if seed is not None and hasattr(env, "seed"):
                env.seed(seed)
            result = env.reset()
        if isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], dict):
            return result[0]
        if isinstance(result, dict):
            return result  # 1.13's reset() returned the observations only
        raise EnvError(f"{type(self.envs[index]).__name__}.reset() returned {type(result).__name__}; a MultiAgentEnv "
                       "returns (obs_dict, info_dict), both keyed by agent id.")

    def step(self, actions: Sequence[dict[Any, Any]]) -> tuple[  # type: ignore[override]
            list[dict], list[dict], list[dict], list[dict], dict[int, dict], list[dict]]:
        """Steps every sub-env once with its action dict.

        Returns:
            ``(obs, rewards, terminateds, truncateds, final_obs, infos)``, one dict per
            sub-env (``terminateds`` / ``truncateds`` with ``"__all__"``); ``obs`` holds
            the reset observations of a sub-env whose episode ended, ``final_obs`` its
            last ones. A sub-env restarted after raising is in :attr:`broken`, its
            ``obs`` the new episode's.

        Raises:
            EnvFailureError: As :meth:`VectorEnv.step`.
            EnvError: If a sub-env returns something else than five dicts.
        """
        n = self.num_envs
        observations: list[dict] = [{}] * n
        rewards: list[dict] = [{}] * n
        terminateds: list[dict] = [{ALL: False}] * n
        truncateds: list[dict] = [{ALL: False}] * n
        infos: list[dict] = [{}] * n
        final_obs: dict[int, dict] = {}
        if self.broken:
            self.broken = []
        for i, env in enumerate(self.envs):
            try:
                result = env.step(actions[i])
            except Exception as exc:  # noqa: BLE001 - any env error; re-raised or restarted
                observations[i] = self._restart(i, "step", exc)
                self.broken.append(i)
                continue
            obs, reward, terminated, truncated, info = _five_dicts(env, result)
            self._steps[i] += 1
            all_terminated = bool(terminated.get(ALL, False))
            all_truncated = bool(truncated.get(ALL, False)) and not all_terminated
            horizon_cut = (self.horizon is not None and self._steps[i] >= self.horizon
                           and not (all_terminated or all_truncated))
            if horizon_cut:
                all_truncated = True
            if self.no_done_at_end:
                # 1.x's no_done_at_end: every end is a cut, bootstrapped from the last obs.
                truncated = {**truncated, **{a: True for a, done in terminated.items() if done and a != ALL}}
                terminated = {a: False for a in terminated}
                all_truncated, all_terminated = all_truncated or all_terminated, False
            terminated = {**terminated, ALL: all_terminated}
            truncated = {**truncated, ALL: all_truncated}
            rewards[i], terminateds[i], truncateds[i], infos[i] = reward, terminated, truncated, info
            if all_terminated or all_truncated:
                final_obs[i] = obs
                if horizon_cut and self.soft_horizon:
                    self._steps[i] = 0  # the record ends; the env's episode goes on from obs
                else:
                    obs = self._next_episode(i)
            observations[i] = obs
        return observations, rewards, terminateds, truncateds, final_obs, infos


def _five_dicts(env: Any, result: Any) -> tuple[dict, dict, dict, dict, dict]:
    # gymnasium's five dicts; 1.13's four (obs, rewards, dones, infos) are read as
    # terminations, the only kind of end 1.13 knew.
    if isinstance(result, tuple) and len(result) == 5 and all(isinstance(part, dict) for part in result):
        return result
    if isinstance(result, tuple) and len(result) == 4 and all(isinstance(part, dict) for part in result):
        obs, reward, dones, info = result
        return obs, reward, dones, {ALL: False}, info
    raise EnvError(f"{type(env).__name__}.step() returned {type(result).__name__} "
                   f"{'of ' + str(len(result)) + ' values' if isinstance(result, tuple) else ''}; a MultiAgentEnv "
                   "returns (obs, rewards, terminateds, truncateds, infos), five dicts keyed by agent id, with "
                   "'__all__' in terminateds and truncateds.")


def make_vector_env(make_one: Callable[[int], Any], num_envs: int, multi_agent: bool,
                    **kwargs: Any) -> VectorEnv:
    """The sub-envs of a rollout worker: a :class:`MultiAgentVectorEnv` when the env is a
    :class:`MultiAgentEnv` or ``multi_agent`` (policies are configured: a single-agent env
    then becomes one agent, ``"agent0"``), else a :class:`VectorEnv`.

    Args:
        make_one: Builds the sub-env of a vector index.
        num_envs: How many sub-envs.
        multi_agent: The config names policies (``multiagent.policies``).
        **kwargs: The other arguments of :class:`VectorEnv`.

    Returns:
        The vector env; or the env itself when it is an :class:`ExternalEnv` (it runs its
        own loop; the worker samples it with an ExternalEnvSampler) or a
        :class:`VectorEnv` already.
    """
    first = make_one(0)
    if isinstance(first, ExternalEnv):
        return first
    if isinstance(first, VectorEnv):
        # The creator built the whole vector (classic RLlib's custom VectorEnv): its own
        # num_envs counts, not num_envs_per_worker.
        return first
    if not (multi_agent or isinstance(first, MultiAgentEnv)):
        built = {0: first}
        return VectorEnv(lambda i: built.pop(i) if i in built else make_one(i), num_envs, **kwargs)

    def make_multi(i: int) -> MultiAgentEnv:
        env = built.pop(i) if i in built else make_one(i)
        return env if isinstance(env, MultiAgentEnv) else SingleAgentAsMultiAgent(env)

    built = {0: first}
    return MultiAgentVectorEnv(make_multi, num_envs, **kwargs)
