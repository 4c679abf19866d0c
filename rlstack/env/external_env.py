"""ExternalEnv: an env that drives itself and asks the policy for actions (1.13's
``ray.rllib.env.external_env.ExternalEnv``).

A simulator that cannot be stepped from outside (a game server, a plant, a service)
runs its own loop in :meth:`ExternalEnv.run` (the env is a thread) and calls
``start_episode`` / ``get_action`` or ``log_action`` / ``log_returns`` /
``end_episode``. Each call becomes an event on the env's queue; an
:class:`~rlstack.evaluation.external_sampler.ExternalEnvSampler` takes the events,
computes the actions in batches across the running episodes and turns the episodes into
training rows. ``get_action`` blocks until the sampler has acted; the other calls only
queue their event.

PolicyServerInput serves such an env over HTTP (remote inference) and PolicyClient runs
one locally (local inference); see rlstack/env/policy_server_input.py.
"""

from __future__ import annotations

import queue
import threading
import uuid
from typing import Any

import gymnasium as gym

from rlstack.errors import RLStackError

__all__ = ["ExternalEnv"]

# How long get_action waits for the sampler before it gives up (the trainer stopped, or
# sampling crashed).
ACTION_TIMEOUT_S = 300.0
_FINISHED_IDS_KEPT = 100_000


class ExternalEnvError(RLStackError):
    """An ExternalEnv call that does not fit the episode's state (an unknown or finished
    episode id, too many running episodes, no action in time)."""


class _Event:
    """One call of the env's loop, as the sampler sees it.

    Attributes:
        kind: ``"act"`` (get_action), ``"logged"`` (log_action) or ``"end"`` (end_episode).
        episode: The episode's :class:`_Episode`.
        obs: The observation the call carries.
        action: The logged action (``"logged"`` only).
        reward: The rewards logged since the episode's previous event.
        info: The last info logged since then.
    """

    __slots__ = ("kind", "episode", "obs", "action", "reward", "info")

    def __init__(self, kind: str, episode: "_Episode", obs: Any, action: Any = None) -> None:
        self.kind, self.episode, self.obs, self.action = kind, episode, obs, action
        self.reward, self.info = episode.take_reward()


class _Episode:
    """A running episode: the rewards logged since its last event and the channel its
    get_action answers come back on."""

    def __init__(self, episode_id: str, training_enabled: bool) -> None:
        self.episode_id = episode_id
        self.training_enabled = training_enabled
        self.reward = 0.0
        self.info: dict = {}
        self.answers: queue.Queue = queue.Queue(maxsize=1)

    def take_reward(self) -> tuple[float, dict]:
        reward, info = self.reward, self.info
        self.reward, self.info = 0.0, {}
        return reward, info


class ExternalEnv(threading.Thread):
    """An env that runs its own loop and queries the policy (1.13's API).

    Subclass it and implement :meth:`run`; pass the instance (or a creator returning it)
    as the trainer's env, or let PolicyServerInput / PolicyClient build one.

    Args:
        action_space: The action space.
        observation_space: The observation space.
        max_concurrent: How many episodes may run at once.
    """

    def __init__(self, action_space: gym.Space, observation_space: gym.Space, max_concurrent: int = 100) -> None:
        super().__init__(daemon=True)
        self.action_space = action_space
        self.observation_space = observation_space
        self._max_concurrent_episodes = int(max_concurrent)
        self._episodes: dict[str, _Episode] = {}
        # Ids of ended episodes, to tell "ended" from "never started" (the latest ones only).
        self._finished: dict[str, None] = {}
        self._lock = threading.Lock()
        # What the sampler takes: one _Event per get_action / log_action / end_episode.
        self.events: queue.Queue[_Event] = queue.Queue()

    def run(self) -> None:
        """The env's loop: start episodes, ask for actions, log rewards, end episodes.
        Runs in its own thread once the sampler starts the env."""
        raise NotImplementedError(f"{type(self).__name__} must implement ExternalEnv.run()")

    # ----- 1.13's episode API ---------------------------------------------------------

    def start_episode(self, episode_id: str | None = None, training_enabled: bool = True) -> str:
        """Starts an episode and returns its id.

        Args:
            episode_id: The id to use (None: a new unique one).
            training_enabled: Whether the episode's steps go into training batches (its
                return is reported either way).

        Raises:
            ExternalEnvError: The id is running or was used, or ``max_concurrent`` episodes run.
        """
        episode_id = episode_id or uuid.uuid4().hex
        with self._lock:
            if episode_id in self._episodes or episode_id in self._finished:
                raise ExternalEnvError(f"Episode {episode_id!r} has already been started; give each episode a new id "
                                       "(or none: start_episode() makes one).")
            if len(self._episodes) >= self._max_concurrent_episodes:
                raise ExternalEnvError(f"{len(self._episodes)} episodes are running, the most this env allows "
                                       f"(max_concurrent={self._max_concurrent_episodes}): end some with end_episode() "
                                       "or raise max_concurrent.")
            self._episodes[episode_id] = _Episode(episode_id, training_enabled)
        return episode_id

    def get_action(self, episode_id: str, observation: Any) -> Any:
        """The policy's action for ``observation`` (blocks until the sampler acts)."""
        episode = self._get(episode_id)
        self.events.put(_Event("act", episode, observation))
        try:
            answer = episode.answers.get(timeout=ACTION_TIMEOUT_S)
        except queue.Empty:
            raise ExternalEnvError(f"No action for episode {episode_id!r} within {ACTION_TIMEOUT_S:.0f} s: the "
                                   "trainer that samples this env is not running.") from None
        if isinstance(answer, BaseException):
            # A bad observation (its shape, NaN) or a failed forward pass: the caller's.
            raise ValueError(f"no action for episode {episode_id!r}: {answer}") from answer
        return answer

    def log_action(self, episode_id: str, observation: Any, action: Any) -> None:
        """Records an action taken by someone else (off-policy) in ``observation``."""
        self.events.put(_Event("logged", self._get(episode_id), observation, action))

    def log_returns(self, episode_id: str, reward: float, info: dict | None = None) -> None:
        """Adds ``reward`` to the episode's current step (rewards add up until the next
        action); ``info`` is kept for that step."""
        episode = self._get(episode_id)
        episode.reward += float(reward)
        if info:
            episode.info = info

    def end_episode(self, episode_id: str, observation: Any) -> None:
        """Ends the episode with its last observation (a terminal step)."""
        with self._lock:
            episode = self._episodes.pop(episode_id, None)
            if episode is None:
                raise ExternalEnvError(self._unknown(episode_id))
            self._finished[episode_id] = None
            if len(self._finished) > _FINISHED_IDS_KEPT:
                del self._finished[next(iter(self._finished))]
        self.events.put(_Event("end", episode, observation))

    # ----- helpers ------------------------------------------------------------------------

    def _get(self, episode_id: str) -> _Episode:
        episode = self._episodes.get(episode_id)
        if episode is None:
            raise ExternalEnvError(self._unknown(episode_id))
        return episode

    def _unknown(self, episode_id: str) -> str:
        if episode_id in self._finished:
            return f"Episode {episode_id!r} has ended; start a new one with start_episode()."
        return f"Episode {episode_id!r} was never started; call start_episode() first and use the id it returns."
