"""PolicyClient: a simulator's side of the policy server (1.13's
``ray.rllib.env.policy_client``).

A process that steps its own env talks to a trainer whose input is a
:class:`~rlstack.evaluation.policy_server_input.PolicyServerInput`::

    client = PolicyClient("http://127.0.0.1:9900", inference_mode="remote")
    episode_id = client.start_episode()
    action = client.get_action(episode_id, obs)
    client.log_returns(episode_id, reward)
    client.end_episode(episode_id, last_obs)

``inference_mode="remote"``: every call is one HTTP request and the server's policy acts.
``"local"``: the client builds the trainer's policy in this process (its framework is
imported here), acts without a round trip, sends the batches it records in the
background and fetches new weights every ``update_interval`` seconds (and on
:meth:`PolicyClient.update_policy_weights`).
"""

from __future__ import annotations

import http.client
import logging
import pickle
import threading
import time
from typing import Any
from urllib.parse import urlsplit

from rlstack.env import _wire
from rlstack.env._wire import Commands
from rlstack.env.external_env import ACTION_TIMEOUT_S, ExternalEnv
from rlstack.errors import RLStackError

__all__ = ["PolicyClient", "PolicyClientError"]

logger = logging.getLogger(__name__)

# How long one request may take: a remote get_action waits for the server's sampler,
# which gives up first (and says why).
REQUEST_TIMEOUT_S = ACTION_TIMEOUT_S + 60.0


class PolicyClientError(RLStackError):
    """The policy server could not be reached, or refused a request (its message says why).

    Attributes:
        status: The HTTP status of the refusal (None when the server was not reached).
    """

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class _LocalEnv(ExternalEnv):
    """A local client's ExternalEnv: its loop is the caller's."""

    def run(self) -> None:  # pragma: no cover - never started as a thread
        pass


class PolicyClient:
    """Talks to a PolicyServerInput (see the module docstring).

    Args:
        address: The server's URL, e.g. ``"http://127.0.0.1:9900"``.
        inference_mode: ``"remote"`` (the server acts) or ``"local"`` (a policy copy here acts).
        update_interval: Local inference: seconds between weight fetches (None: only on
            :meth:`update_policy_weights`).
    """

    # 1.13's class attributes for the protocol's commands.
    START_EPISODE = Commands.START_EPISODE
    GET_ACTION = Commands.GET_ACTION
    LOG_ACTION = Commands.LOG_ACTION
    LOG_RETURNS = Commands.LOG_RETURNS
    END_EPISODE = Commands.END_EPISODE
    GET_WORKER_ARGS = Commands.GET_WORKER_ARGS
    GET_WEIGHTS = Commands.GET_WEIGHTS
    REPORT_SAMPLES = Commands.REPORT_SAMPLES

    def __init__(self, address: str, inference_mode: str = "local", update_interval: float | None = 10.0) -> None:
        if inference_mode not in ("local", "remote"):
            raise ValueError(f"inference_mode must be 'local' or 'remote', got {inference_mode!r}")
        url = urlsplit(address if "://" in address else f"http://{address}")
        if url.scheme != "http" or not url.hostname:
            raise ValueError(f"the policy server's address must be http://HOST:PORT, got {address!r}")
        self.address = address
        self._host, self._port, self._path = url.hostname, url.port or 80, url.path or "/"
        self._connection: http.client.HTTPConnection | None = None
        self._lock = threading.Lock()
        self.inference_mode = inference_mode
        self.local = inference_mode == "local"
        self.update_interval = update_interval
        if self.local:
            self._setup_local_worker()

    # ----- 1.13's API ---------------------------------------------------------------------

    def start_episode(self, episode_id: str | None = None, training_enabled: bool = True) -> str:
        """Starts an episode and returns its id (``episode_id`` or a new one)."""
        if self.local:
            self._check_local()
            return self.env.start_episode(episode_id, training_enabled)
        return self._send({"command": Commands.START_EPISODE, "episode_id": episode_id,
                           "training_enabled": training_enabled})["episode_id"]

    def get_action(self, episode_id: str, observation: Any) -> Any:
        """The policy's action for ``observation`` in the episode."""
        if self.local:
            self._check_local()
            return self.env.get_action(episode_id, observation)
        return self._send({"command": Commands.GET_ACTION, "episode_id": episode_id,
                           "observation": observation})["action"]

    def log_action(self, episode_id: str, observation: Any, action: Any) -> None:
        """Records an action the simulator took itself (off-policy) in ``observation``."""
        if self.local:
            self._check_local()
            self.env.log_action(episode_id, observation, action)
            return
        self._send({"command": Commands.LOG_ACTION, "episode_id": episode_id, "observation": observation,
                    "action": action})

    def log_returns(self, episode_id: str, reward: float, info: dict | None = None,
                    multiagent_done_dict: dict | None = None) -> None:
        """Adds ``reward`` to the episode's current step (``info`` kept with it)."""
        if multiagent_done_dict:
            raise NotImplementedError("multiagent_done_dict: multi-agent external envs are not in rlstack yet")
        if self.local:
            self._check_local()
            self.env.log_returns(episode_id, reward, info)
            return
        self._send({"command": Commands.LOG_RETURNS, "episode_id": episode_id, "reward": float(reward),
                    "info": _wire.encode(info) if info else None})

    def end_episode(self, episode_id: str, observation: Any) -> None:
        """Ends the episode with its last observation."""
        if self.local:
            self._check_local()
            self.env.end_episode(episode_id, observation)
            return
        self._send({"command": Commands.END_EPISODE, "episode_id": episode_id, "observation": observation})

    def update_policy_weights(self) -> None:
        """Local inference: loads the server's current weights into the local policy."""
        if not self.local:
            return
        answer = self._send({"command": Commands.GET_WEIGHTS}, pickled=True)
        self.rollout_worker.set_weights(answer["weights"], answer.get("global_timestep"))
        self._last_update = time.monotonic()

    def close(self) -> None:
        """Stops the local sampler thread and closes the connection."""
        if self.local:
            self.sampler.stopped.set()
            self._thread.join(timeout=5)
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    # ----- local inference ------------------------------------------------------------

    def _setup_local_worker(self) -> None:
        from rlstack.evaluation.external_sampler import ExternalEnvSampler
        from rlstack.evaluation.rollout_worker import RolloutWorker

        args = self._send({"command": Commands.GET_WORKER_ARGS}, pickled=True)
        self.rollout_worker = RolloutWorker(None, args["policy_class"], args["config"], spaces=args["spaces"],
                                            postprocess_fn=args["postprocess_fn"],
                                            model_registry=args["model_registry"])
        self.update_policy_weights()
        worker = self.rollout_worker
        self.env = _LocalEnv(worker.action_space, worker.observation_space, max_concurrent=10_000)
        self.sampler = ExternalEnvSampler(worker, self.env)
        self._sampling_error: BaseException | None = None
        self._thread = threading.Thread(target=self._report_loop, name="policy-client-sampler", daemon=True)
        self._thread.start()

    def _report_loop(self) -> None:
        # Records the local episodes; each batch goes to the server, with the episodes
        # finished meanwhile, and new weights come back every update_interval seconds.
        target = int(self.rollout_worker.config.get("rollout_fragment_length", 200))
        try:
            while True:
                batch = self.sampler.collect(target)
                if batch is None:
                    return
                metrics = [{"episode_reward": stats.episode_return, "episode_length": stats.length}
                           for stats in self.sampler.drain_metrics()]
                self._send({"command": Commands.REPORT_SAMPLES, "samples": dict(batch.items()), "metrics": metrics})
                if self.update_interval is not None and time.monotonic() - self._last_update >= self.update_interval:
                    self.update_policy_weights()
        except BaseException as err:
            logger.exception("The policy client's sampler failed")
            self._sampling_error = err

    def _check_local(self) -> None:
        if self._sampling_error is not None:
            raise PolicyClientError(f"the local sampler stopped: {self._sampling_error}") from self._sampling_error

    # ----- HTTP -------------------------------------------------------------------------

    def _send(self, request: dict, pickled: bool = False) -> Any:
        body = _wire.dumps(request)
        with self._lock:
            for attempt in (0, 1):
                reused = self._connection is not None
                try:
                    if self._connection is None:
                        self._connection = http.client.HTTPConnection(self._host, self._port,
                                                                      timeout=REQUEST_TIMEOUT_S)
                    self._connection.request("POST", self._path, body, {"Content-Type": "application/json"})
                    response = self._connection.getresponse()
                    data = response.read()
                    break
                except (ConnectionError, http.client.HTTPException, OSError) as err:
                    if self._connection is not None:
                        self._connection.close()
                        self._connection = None
                    # Sent again only when a kept-alive connection turned out closed (the
                    # server never read the request); a timeout or a reset mid-answer is not
                    # retried, so no step is logged twice.
                    stale = reused and isinstance(err, (http.client.RemoteDisconnected, BrokenPipeError))
                    if attempt or not stale:
                        raise PolicyClientError(f"cannot reach the policy server at {self.address}: {err} (is the "
                                                "trainer with its PolicyServerInput running?)") from err
        if response.status != 200:
            try:
                message = _wire.loads(data).get("error", data.decode(errors="replace"))
            except (ValueError, AttributeError):
                message = data.decode(errors="replace")
            raise PolicyClientError(f"the policy server refused {request['command']} ({response.status}): {message}",
                                    response.status)
        return pickle.loads(data) if pickled else _wire.loads(data)
