"""Sampling an :class:`~rlstack.env.external_env.ExternalEnv`: the env's loop calls in,
this answers and records.

The env's calls arrive as events (``get_action``, ``log_action``, ``end_episode``).
:meth:`ExternalEnvSampler.collect` takes every event waiting, computes the actions of all
of them in one batched forward pass of the worker's acting policy, answers the
``get_action`` calls, and turns each episode's steps into rows: a step's row is complete
when the episode's next event brings its reward and next observation (``end_episode``: a
terminal step). When ``target`` rows are complete, each episode's rows go through the
policy's trajectory postprocessing, the pieces of episodes still running cut with a
bootstrap value V(next observation), as the env sampler cuts fragments.

Episodes started with ``training_enabled=False`` are acted for and reported in the
metrics but give no rows. Logged (off-policy) actions are recorded as taken, turned into
the policy's form (Discrete ``start``, Box actions mapped back into [-1, 1] under
``normalize_actions``), with their log-likelihood under the policy where it has one.

A recurrent policy acts from each episode's own state (and previous action / reward),
recorded in the rows as the env sampler records them (``state_in_<i>``, ``prev_*``).
"""

from __future__ import annotations

import queue
import random
import threading
from typing import Any

import gymnasium as gym
import numpy as np

from rlstack.env.external_env import ExternalEnv, _Episode, _Event
from rlstack.errors import ConfigError, EnvError
from rlstack.evaluation.metrics import EpisodeStats
from rlstack.evaluation.recurrent_states import SubEnvMemory, after_step, initial_states
from rlstack.models.numpy.distributions import DISTRIBUTIONS
from rlstack.policies.rnn_sequencing import state_out_key
from rlstack.sample_batch import SampleBatch, concat_samples

__all__ = ["ExternalEnvSampler"]

_B = SampleBatch


class _Track:
    """One episode as the sampler records it."""

    __slots__ = ("eps_id", "training", "memory", "rows", "pending", "episode_return", "length")

    def __init__(self, eps_id: int, training: bool, memory: SubEnvMemory | None) -> None:
        self.eps_id = eps_id
        self.training = training
        self.memory = memory  # a recurrent policy's state and previous action / reward
        self.rows: list[dict[str, Any]] = []
        # The step waiting for its reward and next observation: (obs, action, extras).
        self.pending: tuple[np.ndarray, Any, dict[str, Any]] | None = None
        self.episode_return = 0.0
        self.length = 0


class ExternalEnvSampler:
    """Answers an ExternalEnv's calls with a worker's acting policy and records its
    episodes.

    Args:
        worker: The :class:`~rlstack.evaluation.rollout_worker.RolloutWorker` whose
            ``sampling_policy``, preprocessor and observation filter act (a single-agent
            one; it may have no env).
        env: The ExternalEnv whose events are answered.
    """

    def __init__(self, worker: Any, env: ExternalEnv) -> None:
        if worker.multi_agent:
            raise ConfigError("An ExternalEnv is single-agent: its worker must have one policy (no 'multiagent' "
                              "policies); ExternalMultiAgentEnv is not in rlstack yet.")
        self.worker = worker
        self.env = env
        self._tracks: dict[_Episode, _Track] = {}
        # Episode ids unique across samplers (clients and servers) without coordination.
        self._rng = random.Random()
        self._finished: list[SampleBatch] = []  # postprocessed pieces of ended episodes
        self._complete_rows = 0
        # Finished episodes' stats, for the worker's get_metrics (another thread reads them).
        self.metrics: queue.Queue[EpisodeStats] = queue.Queue()
        self.stopped = threading.Event()

    def collect(self, target: int, poll_s: float = 0.2) -> SampleBatch | None:
        """Answers events until at least ``target`` training rows are complete, and
        returns them postprocessed; None if :attr:`stopped` was set first."""
        while self._complete_rows < target:
            if not self.poll(poll_s) and self.stopped.is_set():
                return None
        return self._flush()

    def poll(self, timeout: float) -> bool:
        """Answers and records every event waiting (waiting up to ``timeout`` seconds for
        the first); False if none came."""
        try:
            events = [self.env.events.get(timeout=timeout)]
        except queue.Empty:
            if self.env.ident is not None and not self.env.is_alive():
                raise EnvError(f"{type(self.env).__name__}.run() has ended (it returned or raised: see the traceback "
                               "printed above): its episodes no longer come. run() must loop for as long as the "
                               "trainer samples.")
            return False
        while True:
            try:
                events.append(self.env.events.get_nowait())
            except queue.Empty:
                break
        # A call whose caller gave up waiting is not a step the simulator took.
        events = [event for event in events if not event.cancelled]
        try:
            self._handle(events)
        except BaseException as err:
            # Every caller waiting (or calling later) learns why instead of timing out.
            self.env.fail(err)
            for event in events:
                event.answer(err)
            raise
        return True

    def drain_metrics(self) -> list[EpisodeStats]:
        """The episodes finished since the last call."""
        stats = []
        while True:
            try:
                stats.append(self.metrics.get_nowait())
            except queue.Empty:
                return stats

    # ----- events ---------------------------------------------------------------------

    def _handle(self, events: list[_Event]) -> None:
        # In waves of one event per episode: an episode's events (log_action does not wait
        # for its answer) are taken in order, each acting from the state the last left.
        while events:
            wave, later, seen = [], [], set()
            for event in events:
                (later if event.episode in seen else wave).append(event)
                seen.add(event.episode)
            self._handle_wave(wave)
            events = later

    def _handle_wave(self, events: list[_Event]) -> None:
        policy = self.worker.sampling_policy
        obs = self._observations(events)
        tracks: list[_Track | None] = []
        for k, event in enumerate(events):
            track = self._tracks.get(event.episode)
            if track is None and obs[k] is not None:
                track = self._tracks[event.episode] = _Track(self._rng.getrandbits(62), event.episode.training_enabled,
                                                             initial_states(policy, 1))
            if track is not None and obs[k] is not None and track.pending is not None:
                self._complete_row(track, event, obs[k])
            tracks.append(track)
        acting = [k for k, event in enumerate(events) if event.kind != "end" and obs[k] is not None]
        if acting:
            self._act(events, acting, obs, tracks)
        for k, event in enumerate(events):
            if event.kind == "end" and tracks[k] is not None:
                if obs[k] is None:  # a bad last observation: the episode ends without its last row
                    tracks[k].pending = None
                self._end(event.episode, tracks[k])
        self.worker._perf_steps += len(acting)

    def _act(self, events: list[_Event], acting: list[int], obs: list[Any], tracks: list[Any]) -> None:
        policy = self.worker.sampling_policy
        memories = [tracks[k].memory for k in acting]
        inputs = _stacked_inputs(memories)
        actions, extras = policy.compute_actions(np.stack([obs[k] for k in acting]), **inputs)
        self._logged_actions(events, acting, obs, actions, extras)
        env_actions = policy.unsquash_actions(actions)
        for j, k in enumerate(acting):
            track = tracks[k]
            row = {key: value[j] for key, value in extras.items()}
            if track.memory is not None:
                # What the step acted from (state_in_<i>, prev_*), and the state it moves on to.
                row.update({key: value[0] for key, value in track.memory.columns().items()})
                track.memory.states = [extras[state_out_key(i)][j:j + 1].copy()
                                       for i in range(len(track.memory.states))]
            track.pending = (obs[k], actions[j], row)
            if events[k].kind == "act":
                events[k].answer(env_actions[j])

    def _observations(self, events: list[_Event]) -> list[np.ndarray | None]:
        # Preprocessed and filtered observations, one batch when they are all good; a bad
        # one (wrong shape, NaN) fails its own caller only.
        worker = self.worker
        try:
            return list(worker._process_obs([event.obs for event in events]))
        except Exception:
            pass
        out: list[np.ndarray | None] = []
        for event in events:
            try:
                out.append(worker._process_obs([event.obs])[0])
            except Exception as err:
                out.append(None)
                if event.kind == "act":
                    event.answer(err)
        return out

    def _logged_actions(self, events: list[_Event], acting: list[int], obs: list[Any], actions: np.ndarray,
                        extras: dict[str, np.ndarray]) -> None:
        # log_action's actions replace the policy's, in the policy's form, with their
        # log-likelihood under the distribution the policy acted from (its state included).
        logged = [j for j, k in enumerate(acting) if events[acting[j]].kind == "logged"]
        if not logged:
            return
        policy = self.worker.sampling_policy
        for j in logged:
            actions[j] = _policy_form(policy, events[acting[j]].action)
        dist_class = DISTRIBUTIONS.get(policy.dist_spec.kind)
        if _B.ACTION_LOGP in extras and _B.ACTION_DIST_INPUTS in extras and dist_class is not None:
            inputs = np.asarray(extras[_B.ACTION_DIST_INPUTS])[logged]
            extras[_B.ACTION_LOGP][logged] = dist_class(inputs, policy.dist_spec).logp(np.asarray(actions)[logged])

    def _complete_row(self, track: _Track, event: _Event, next_obs: np.ndarray) -> None:
        obs, action, extras = track.pending
        track.pending = None
        reward = float(self.worker.clip_rewards(np.float32(event.reward)))
        track.episode_return += event.reward
        track.length += 1
        if track.memory is not None:
            after_step(track.memory, np.asarray(action)[None], np.array([reward], dtype=np.float32))
        if not track.training:
            return
        track.rows.append({_B.OBS: obs, _B.ACTIONS: action, _B.REWARDS: reward,
                           _B.TERMINATEDS: event.kind == "end", _B.NEXT_OBS: next_obs, **extras})
        self._complete_rows += 1

    def _end(self, episode: _Episode, track: _Track) -> None:
        del self._tracks[episode]
        self.metrics.put(EpisodeStats(track.episode_return, track.length))
        if track.rows:
            self._finished.append(self._piece(track, None))
            track.rows = []

    def _flush(self) -> SampleBatch:
        # Ended episodes' pieces, then the running ones cut where they are.
        policy = self.worker.sampling_policy
        pieces, self._finished = self._finished, []
        running = [track for track in self._tracks.values() if track.rows]
        values: list[float | None] = [None] * len(running)
        if running and policy.needs_bootstrap_value:
            # V(next obs): the value the policy computed when it acted on that observation
            # (from the episode's state then), or computed now where it reports none.
            values = [track.pending[2].get(_B.VF_PREDS) for track in running]
            missing = [k for k, value in enumerate(values) if value is None]
            if missing:
                computed = policy.compute_values(np.stack([running[k].pending[0] for k in missing]))
                for k, value in zip(missing, computed):
                    values[k] = value
        for track, value in zip(running, values):
            pieces.append(self._piece(track, value))
            track.rows = []
        self._complete_rows = 0
        batch = concat_samples(pieces)
        hooks = getattr(self.worker, "_hooks", ())
        if "on_sample_end" in hooks:
            self.worker.callbacks.on_sample_end(worker=self.worker, samples=batch)
        return batch

    def _piece(self, track: _Track, bootstrap_value: float | None) -> SampleBatch:
        rows = track.rows
        columns = {key: np.stack([np.asarray(row[key]) for row in rows]) for key in rows[0]}
        columns[_B.REWARDS] = columns[_B.REWARDS].astype(np.float32)
        columns[_B.OBS] = columns[_B.OBS].astype(np.float32)
        columns[_B.NEXT_OBS] = columns[_B.NEXT_OBS].astype(np.float32)
        columns[_B.TRUNCATEDS] = np.zeros(len(rows), dtype=bool)
        columns[_B.EPS_ID] = np.full(len(rows), track.eps_id, dtype=np.int64)
        bootstrap = np.zeros(len(rows), dtype=np.float32)
        if bootstrap_value is not None:
            bootstrap[-1] = bootstrap_value
        columns[_B.BOOTSTRAP_VALUE] = bootstrap
        return self.worker.sampling_policy.postprocess_trajectory(SampleBatch(columns))


def _policy_form(policy: Any, action: Any) -> Any:
    """An env action (as logged) in the form the policy outputs and batches record."""
    space = policy.action_space
    action = np.asarray(action)
    if isinstance(space, gym.spaces.Discrete):
        return action - int(space.start)
    if isinstance(space, gym.spaces.MultiDiscrete):
        return action - np.asarray(space.start)
    if isinstance(space, gym.spaces.Box):
        bounded = np.isfinite(space.low).all() and np.isfinite(space.high).all()
        if bounded and (policy.acts_in_unit_box or policy.config.get("normalize_actions", True)):
            return (2.0 * (action - space.low) / (space.high - space.low) - 1.0).astype(np.float32)
    return action


def _stacked_inputs(memories: list[SubEnvMemory | None]) -> dict[str, Any]:
    """``compute_actions`` / ``compute_values`` keyword arguments for episodes whose
    memories (one row each) are ``memories``; empty for a policy without state."""
    if not memories or memories[0] is None:
        return {}
    inputs = [memory.inputs() for memory in memories]
    stacked: dict[str, Any] = {"state_batches": [np.concatenate(parts) for parts in
                                                 zip(*(entry["state_batches"] for entry in inputs))]}
    for key in ("prev_action_batch", "prev_reward_batch"):
        stacked[key] = None if inputs[0][key] is None else np.concatenate([entry[key] for entry in inputs])
    return stacked
