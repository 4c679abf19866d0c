"""PolicyServerInput: a rollout worker's experience from simulators that connect over HTTP
(1.13's ``ray.rllib.env.policy_server_input``, whose path re-exports it). It lives with
the rollout workers: it is an input reader whose samples and episode metrics feed one.

The trainer's config names it as its input (``"input": lambda ioctx:
PolicyServerInput(ioctx, "127.0.0.1", 9900)``, ``"env": None`` with
``observation_space`` / ``action_space``); each worker that gets one listens on its
port. Clients (:class:`~rlstack.env.policy_client.PolicyClient`) either

- ask the server for every action (``inference_mode="remote"``): the server runs an
  ExternalEnv whose events its worker's acting policy answers in a background thread
  (:class:`~rlstack.evaluation.external_sampler.ExternalEnvSampler`, batching the
  actions of all connected episodes), and the rows it records become the worker's
  samples; or
- act with a copy of the policy in their own process (``inference_mode="local"``): they
  fetch the policy's build arguments and weights from the server and send back the
  batches they recorded.

:meth:`PolicyServerInput.next` hands the worker the next batch from either source; the
episodes the clients finished show in the trainer's results (``episode_reward_mean``...).

Protocol: ``POST /`` with a JSON body ``{"command": NAME, ...}`` (arrays as in
rlstack/env/_wire.py, which also names the commands); the answer is JSON, except ``GET_WORKER_ARGS`` and
``GET_WEIGHTS``, which answer a pickle (the client trusts the server it connects to; the
server never unpickles what a client sends). An unknown command, a malformed body or a
call that does not fit the episode's state gets a 4xx answer with ``{"error": ...}``;
the server goes on serving.

The server listens on the address it is given: keep it ``127.0.0.1`` (or a private
network's address) — anyone who reaches the port can feed the trainer experience.
"""

from __future__ import annotations

import logging
import queue
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

from rlstack.env import _wire
from rlstack.env._wire import Commands
from rlstack.env.external_env import ExternalEnv, ExternalEnvError
from rlstack.evaluation.metrics import EpisodeStats
from rlstack.offline.input_reader import InputReader
from rlstack.sample_batch import SampleBatch

__all__ = ["PolicyServerInput", "Commands"]

logger = logging.getLogger(__name__)

# The most a request body may hold (a local client's batch of samples included).
MAX_BODY_BYTES = 256 * 1024 * 1024
# Batches waiting for the worker; the samplers wait (and so do the clients) beyond that.
MAX_QUEUED_BATCHES = 64
# Episodes the remote clients may have running at once.
MAX_RUNNING_EPISODES = 10_000
# Seconds a connection may sit idle or a request take to arrive.
CONNECTION_TIMEOUT_S = 600


class _ServedEnv(ExternalEnv):
    """The server's ExternalEnv: its loop is the clients', over HTTP."""

    def run(self) -> None:  # pragma: no cover - never started as a thread
        pass


class _BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class PolicyServerInput(ThreadingHTTPServer, InputReader):
    """An input reader fed by policy clients over HTTP (see the module docstring).

    Args:
        ioctx: The worker's IOContext (the trainer passes it to the ``input`` function).
        address: The address to listen on (e.g. ``"127.0.0.1"``).
        port: The port to listen on (0: any free one; see :attr:`server_port`).
        idle_timeout: Seconds between "waiting for clients" log lines while no batch comes.
    """

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, ioctx: Any, address: str, port: int, idle_timeout: float = 3.0) -> None:
        if ioctx is None or ioctx.worker is None:
            raise ValueError("PolicyServerInput needs the IOContext of a rollout worker: give it as config['input'] = "
                             "lambda ioctx: PolicyServerInput(ioctx, address, port)")
        self.rollout_worker = ioctx.worker
        self.idle_timeout = float(idle_timeout)
        self.samples_queue: queue.Queue[SampleBatch] = queue.Queue(maxsize=MAX_QUEUED_BATCHES)
        self.metrics_queue: queue.Queue[EpisodeStats] = queue.Queue()
        worker = self.rollout_worker
        self.env = _ServedEnv(worker.action_space, worker.observation_space, max_concurrent=MAX_RUNNING_EPISODES)
        self._sampler: Any = None
        self._sampler_lock = threading.Lock()
        self._sampler_error: BaseException | None = None
        self._closed = False
        try:
            super().__init__((address, int(port)), _Handler)
        except OSError as err:
            raise OSError(f"PolicyServerInput cannot listen on {address}:{port}: {err} (another server or trainer "
                          "holds the port? give each worker its own port)") from err
        self._serving = threading.Thread(target=self.serve_forever, name=f"policy-server-{self.server_port}",
                                         daemon=True)
        self._serving.start()
        logger.info("PolicyServerInput of worker %d listening on http://%s:%d", ioctx.worker_index,
                    self.server_address[0], self.server_port)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that went away mid-request (killed, restarted) is not the server's error.
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            logger.debug("policy client %s disconnected", client_address)
            return
        super().handle_error(request, client_address)

    # ----- InputReader --------------------------------------------------------------

    def next(self) -> SampleBatch:
        """The next batch a client sent or the served episodes made (blocks until one comes)."""
        while True:
            if self._sampler_error is not None:
                raise RuntimeError(f"The policy server's sampler failed: {self._sampler_error}") \
                    from self._sampler_error
            try:
                return self.samples_queue.get(timeout=self.idle_timeout)
            except queue.Empty:
                logger.info("PolicyServerInput on port %d: waiting for clients' experience", self.server_port)

    def get_metrics(self) -> list[EpisodeStats]:
        """The episodes the clients finished since the last call."""
        stats = []
        while True:
            try:
                stats.append(self.metrics_queue.get_nowait())
            except queue.Empty:
                break
        if self._sampler is not None:
            stats.extend(self._sampler.drain_metrics())
        return stats

    def close(self) -> None:
        """Stops serving and the sampler thread."""
        if self._closed:
            return
        self._closed = True
        if self._sampler is not None:
            self._sampler.stopped.set()
        self.env.fail(RuntimeError("the trainer stopped"))
        self.shutdown()
        self.server_close()

    # ----- remote inference ---------------------------------------------------------

    def _served_env(self) -> ExternalEnv:
        # The ExternalEnv remote clients act in; its sampler thread starts with the first.
        with self._sampler_lock:
            if self._sampler is None:
                from rlstack.evaluation.external_sampler import ExternalEnvSampler

                self._sampler = ExternalEnvSampler(self.rollout_worker, self.env)
                threading.Thread(target=self._sample_loop, name=f"policy-server-sampler-{self.server_port}",
                                 daemon=True).start()
        return self.env

    def _sample_loop(self) -> None:
        target = int(self.rollout_worker.config.get("rollout_fragment_length", 200))
        try:
            while not self._closed:
                batch = self._sampler.collect(target)
                if batch is None or not self._enqueue(batch):
                    return
        except BaseException as err:  # reported by next(); the clients get it from get_action
            logger.exception("The policy server's sampler failed")
            self._sampler_error = err

    # ----- local inference ------------------------------------------------------------

    def _worker_args(self) -> dict[str, Any]:
        from rlstack.models.catalog import ModelCatalog
        from rlstack.evaluation.callbacks import DefaultCallbacks

        worker = self.rollout_worker
        build = worker._build_args
        config = dict(worker.config)
        # The client samples with its own ExternalEnv; it reads and writes no files and
        # runs no callbacks of the trainer's (they may live in the server's __main__).
        config.update(input="sampler", output=None, callbacks=DefaultCallbacks, num_workers=0, num_gpus=0,
                      num_gpus_per_worker=0, env=None, evaluation_interval=None, evaluation_config={})
        return {"policy_class": build.policy_class, "config": config,
                "spaces": (worker.observation_space, worker.action_space),
                "postprocess_fn": build.postprocess_fn,
                "model_registry": ModelCatalog.registered_models(config.get("model") or {})}

    def _enqueue(self, batch: SampleBatch) -> bool:
        # Waits while the worker is behind; False once the server is closed.
        while not self._closed:
            try:
                self.samples_queue.put(batch, timeout=1.0)
                return True
            except queue.Full:
                continue
        return False

    def _report(self, samples: Any, metrics: list[dict]) -> None:
        batch = _checked_samples(samples, self.rollout_worker)
        stats = [EpisodeStats(float(entry["episode_reward"]), int(entry["episode_length"])) for entry in metrics]
        if batch.count and not self._enqueue(batch):
            raise _BadRequest(503, "the trainer has stopped")
        for entry in stats:
            self.metrics_queue.put(entry)

    # ----- requests -------------------------------------------------------------------

    def handle_command(self, request: dict) -> tuple[Any, bool]:
        """Runs one command; returns ``(answer, pickled)``.

        Raises:
            _BadRequest: The request is malformed or does not fit the episode's state.
        """
        command = request.get("command")
        if self._closed:
            raise _BadRequest(503, "the trainer has stopped; this server no longer takes requests")
        try:
            if command == Commands.START_EPISODE:
                return {"episode_id": self._served_env().start_episode(request.get("episode_id"),
                                                                         bool(request.get("training_enabled", True)))}, False
            if command == Commands.GET_ACTION:
                return {"action": self._served_env().get_action(_need(request, "episode_id"),
                                                                _need(request, "observation"))}, False
            if command == Commands.LOG_ACTION:
                self._served_env().log_action(_need(request, "episode_id"), _need(request, "observation"),
                                              _need(request, "action"))
                return {}, False
            if command == Commands.LOG_RETURNS:
                self._served_env().log_returns(_need(request, "episode_id"), float(_need(request, "reward")),
                                               request.get("info"))
                return {}, False
            if command == Commands.END_EPISODE:
                self._served_env().end_episode(_need(request, "episode_id"), _need(request, "observation"))
                return {}, False
            if command == Commands.GET_WORKER_ARGS:
                return self._worker_args(), True
            if command == Commands.GET_WEIGHTS:
                return {"weights": self.rollout_worker.get_weights(),
                        "global_timestep": getattr(self.rollout_worker.policy, "global_timestep", None)}, True
            if command == Commands.REPORT_SAMPLES:
                self._report(_need(request, "samples"), request.get("metrics") or [])
                return {}, False
        except ExternalEnvError as err:
            raise _BadRequest(409, str(err)) from err
        except (TypeError, ValueError, KeyError) as err:
            raise _BadRequest(422, f"{command}: {err}") from err
        known = ", ".join(name for name in vars(Commands) if not name.startswith("_"))
        raise _BadRequest(400, f"unknown command {command!r}; the commands are {known}")


def _checked_samples(samples: Any, worker: Any) -> SampleBatch:
    """A local client's batch, checked before the trainer sees it.

    Raises:
        ValueError: Not a batch of equal-length columns, observations of another shape
            than the policy's, or NaN / inf in a numeric column.
    """
    if not isinstance(samples, dict) or not samples:
        raise ValueError("'samples' must be an object of columns")
    columns = {}
    for key, value in samples.items():
        array = np.asarray(value)
        if array.ndim == 0 or array.dtype == object:
            raise ValueError(f"column {key!r} must be an array of rows")
        if array.dtype.kind == "f" and not np.isfinite(array).all():
            raise ValueError(f"column {key!r} holds NaN or inf")
        columns[key] = array
    lengths = {key: len(value) for key, value in columns.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"the columns have different lengths: {lengths}")
    for key in (SampleBatch.OBS, SampleBatch.ACTIONS, SampleBatch.REWARDS):
        if key not in columns:
            raise ValueError(f"the batch has no {key!r} column")
    expected = tuple(worker.preprocessor.shape)
    if columns[SampleBatch.OBS].shape[1:] != expected:
        raise ValueError(f"observations of shape {columns[SampleBatch.OBS].shape[1:]} were sent, the policy's are "
                         f"{expected}")
    return SampleBatch(columns)


def _need(request: dict, key: str) -> Any:
    if key not in request:
        raise _BadRequest(400, f"{request.get('command')} needs {key!r} in the request")
    return request[key]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: one connection per client
    timeout = CONNECTION_TIMEOUT_S  # an idle or stalled connection is closed
    disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms delayed-ACK stall
    server: PolicyServerInput

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        try:
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = -1
            if length < 0:
                raise _BadRequest(400, "the request needs a Content-Length header of the body's size in bytes")
            if length > MAX_BODY_BYTES:
                self._answer(413, {"error": f"the request body holds {length} bytes, over the limit "
                                            f"{MAX_BODY_BYTES}"})
                self.close_connection = True
                return
            body = self.rfile.read(length)
            try:
                request = _wire.loads(body)
            except ValueError as err:
                raise _BadRequest(400, f"the request body is not JSON of this protocol: {err}") from err
            if not isinstance(request, dict):
                raise _BadRequest(400, "the request body must be a JSON object with a 'command'")
            answer, pickled = self.server.handle_command(request)
        except _BadRequest as err:
            self._answer(err.status, {"error": str(err)})
            return
        except Exception as err:  # a bug or a failed action: answered, the server goes on
            logger.exception("PolicyServerInput request failed")
            self._answer(500, {"error": f"{type(err).__name__}: {err}"})
            return
        if pickled:
            from ray import cloudpickle  # classes and functions of the server's script included

            self._send(200, cloudpickle.dumps(answer), "application/octet-stream")
        else:
            self._answer(200, answer)

    def do_GET(self) -> None:  # noqa: N802
        self._answer(405, {"error": "the policy server answers POST requests with a JSON {'command': ...} body"})

    def _answer(self, status: int, payload: Any) -> None:
        self._send(status, _wire.dumps(payload), "application/json")

    def _send(self, status: int, data: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
        logger.debug("policy server: " + format, *args)
