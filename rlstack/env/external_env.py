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

import math
import queue
import threading
import uuid
from typing import Any

import gymnasium as gym
import numpy as np

from rlstack.errors import RLStackError

__all__ = ["ExternalEnv"]

# How long get_action waits for the sampler before it gives up (the trainer stopped, or
# sampling crashed).
ACTION_TIMEOUT_S = 300.0
_FINISHED_IDS_KEPT = 100_000
# Events waiting for the sampler; log_action / end_episode wait (then fail) beyond that.
MAX_QUEUED_EVENTS = 10_000


class ExternalEnvError(RLStackError, ValueError):
    """An ExternalEnv call that does not fit the episode's state (an unknown or finished
    episode id, too many running episodes, no action in time, the sampler gone). A
    ValueError, as 1.13 raised."""


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

    __slots__ = ("kind", "episode", "obs", "action", "reward", "info", "cancelled", "_done", "_answer")

    def __init__(self, kind: str, episode: "_Episode", obs: Any, action: Any = None) -> None:
        self.kind, self.episode, self.obs, self.action = kind, episode, obs, action
        self.reward, self.info = episode.take_reward()
        # get_action's answer: one slot per call, so an answer can never reach a later call.
        self.cancelled = False  # the caller gave up waiting: the sampler drops the event
        self._done = threading.Event()
        self._answer: Any = None

    def answer(self, value: Any) -> None:
        """Hands the caller its action (or the exception that stopped it)."""
        self._answer = value
        self._done.set()

    def wait(self, timeout: float) -> Any:
        if not self._done.wait(timeout):
            self.cancelled = True
            raise TimeoutError
        return self._answer


class _Episode:
    """A running episode: the rewards logged since its last event and the channel its
    get_action answers come back on."""

    def __init__(self, episode_id: str, training_enabled: bool) -> None:
        self.episode_id = episode_id
        self.training_enabled = training_enabled
        self.reward = 0.0
        self.info: dict = {}

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
        self.events: queue.Queue[_Event] = queue.Queue(maxsize=MAX_QUEUED_EVENTS)
        # Why the events are no longer answered (the sampler failed or stopped), if so.
        self.error: BaseException | None = None

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
        event = _Event("act", self._get(episode_id), observation)
        self._put(event)
        try:
            answer = event.wait(ACTION_TIMEOUT_S)
        except TimeoutError:
            raise ExternalEnvError(f"No action for episode {episode_id!r} within {ACTION_TIMEOUT_S:.0f} s: the "
                                   "trainer that samples this env is not sampling (stopped, or not calling "
                                   "train()).") from None
        if isinstance(answer, BaseException):
            # A bad observation (its shape, NaN) or a failed forward pass: the caller's.
            raise ValueError(f"no action for episode {episode_id!r}: {answer}") from answer
        return answer

    def log_action(self, episode_id: str, observation: Any, action: Any) -> None:
        """Records an action taken by someone else (off-policy) in ``observation``.

        Raises:
            ValueError: The action is not in the action space.
        """
        self._put(_Event("logged", self._get(episode_id), observation, _checked_action(self.action_space, action)))

    def log_returns(self, episode_id: str, reward: float, info: dict | None = None) -> None:
        """Adds ``reward`` to the episode's current step (rewards add up until the next
        action); ``info`` is kept for that step.

        Raises:
            ValueError: The reward is not a finite number.
        """
        episode = self._get(episode_id)
        reward = float(reward)
        if not math.isfinite(reward):
            raise ValueError(f"log_returns: the reward must be a finite number, got {reward} (episode {episode_id!r})")
        episode.reward += reward
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
        self._put(_Event("end", episode, observation))

    def fail(self, error: BaseException) -> None:
        """No more answers: every waiting call and every later one raises ``error``'s message
        (the sampler failed or its worker stopped)."""
        self.error = error
        while True:
            try:
                self.events.get_nowait().answer(error)
            except queue.Empty:
                return

    # ----- helpers ------------------------------------------------------------------------

    def _put(self, event: _Event) -> None:
        if self.error is not None:
            raise ExternalEnvError(f"This env's sampler has stopped ({self.error}); nothing answers its calls.")
        try:
            self.events.put(event, timeout=ACTION_TIMEOUT_S)
        except queue.Full:
            raise ExternalEnvError(f"{MAX_QUEUED_EVENTS} calls have waited {ACTION_TIMEOUT_S:.0f} s for the sampler: "
                                   "the trainer is not sampling this env.") from None

    def _get(self, episode_id: str) -> _Episode:
        episode = self._episodes.get(episode_id)
        if episode is None:
            raise ExternalEnvError(self._unknown(episode_id))
        return episode

    def _unknown(self, episode_id: str) -> str:
        if episode_id in self._finished:
            return f"Episode {episode_id!r} has ended; start a new one with start_episode()."
        return f"Episode {episode_id!r} was never started; call start_episode() first and use the id it returns."


def _checked_action(space: gym.Space, action: Any) -> Any:
    """A logged action as the space holds it.

    Raises:
        ValueError: It is not in ``space`` (the message says what was expected).
    """
    if isinstance(space, gym.spaces.Discrete):
        value = np.asarray(action)
        if value.shape != () or value.dtype.kind not in "iu" and not (value.dtype.kind == "f" and value == int(value)):
            raise ValueError(f"log_action: a Discrete({space.n}) action must be one integer, got {action!r}")
        if not space.contains(int(value)):
            raise ValueError(f"log_action: action {int(value)} is not in Discrete({space.n}, start={space.start})")
        return int(value)
    if isinstance(space, gym.spaces.Box):
        value = np.asarray(action, dtype=space.dtype)
        if value.size != int(np.prod(space.shape)):
            raise ValueError(f"log_action: a Box action has shape {space.shape}, got {np.shape(action)}")
        value = value.reshape(space.shape)
        if not np.isfinite(value).all():
            raise ValueError(f"log_action: the action holds NaN or inf: {action!r}")
        return value
    if not space.contains(action if not isinstance(action, list) else np.asarray(action)):
        raise ValueError(f"log_action: {action!r} is not in the action space {space}")
    return action
