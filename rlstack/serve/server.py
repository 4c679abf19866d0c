"""Starting and stopping the policy's HTTP endpoint on Ray Serve (``rlstack serve``).

:func:`start_server` checks the checkpoint and the options, starts Ray (or connects to
a cluster) and Serve, deploys :class:`~rlstack.serve.deployment.PolicyServer` as a Serve
application and returns the endpoint's URL once its replicas answer; several checkpoints
can be served side by side as applications of different names and route prefixes.
:func:`stop_server` shuts Serve down again. :func:`serve_forever` is the command: both,
with a wait for Ctrl-C (or SIGTERM) in between.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlstack.errors import CheckpointError, ConfigError, RLStackError

__all__ = ["APP_NAME", "ServeError", "serve_forever", "start_server", "stop_server"]

# The default Serve application name.
APP_NAME = "rlstack"
# The deployment's name inside each application.
DEPLOYMENT_NAME = "PolicyServer"


class ServeError(RLStackError, RuntimeError):
    """The endpoint could not be started: Serve failed to deploy the policy."""


@dataclass
class _Running:
    # What start_server set up in this process, for the next call and stop_server: the
    # HTTP options Serve runs with, the applications it deployed, whether it started the
    # local Ray, and the environment
    # variables it changed for direct ingress (their values before).
    http: tuple[str, int, bool] | None = None
    apps: list[str] = field(default_factory=list)
    started_ray: bool = False
    saved_env: dict[str, str | None] = field(default_factory=dict)


_running = _Running()


def start_server(
    checkpoint: str | os.PathLike,
    *,
    env: str | None = None,
    policy_id: str = "default_policy",
    explore: bool = False,
    num_replicas: int = 1,
    num_cpus_per_replica: float = 1.0,
    route_prefix: str = "/",
    host: str = "127.0.0.1",
    port: int = 8000,
    max_batch_size: int = 64,
    batch_wait_timeout_s: float = 0.002,
    max_body_bytes: int = 1 << 20,
    ray_address: str | None = None,
    direct_ingress: bool = False,
    name: str = APP_NAME,
) -> str:
    """Serves the checkpoint's policy over HTTP on Ray Serve and returns the endpoint's URL.

    Args:
        checkpoint: A checkpoint directory written by an rlstack trainer.
        env: The env to restore the trainer with: needed when the checkpoint's env was an
            object (e.g. a class) rather than a name; a ``register_env`` name is found
            through Ray's registry.
        policy_id: The policy that acts (a multi-agent checkpoint: one of its policies).
        explore: Sample actions instead of the most likely (greedy) ones.
        num_replicas: How many replicas (processes, each with its own copy of the policy).
        num_cpus_per_replica: CPUs Ray reserves for each replica.
        route_prefix: The path the endpoint answers on.
        host: The address the HTTP server binds to.
        port: Its port.
        max_batch_size: The most requests a replica answers with one ``compute_actions``.
        batch_wait_timeout_s: How long a replica waits for more requests to fill a batch.
        max_body_bytes: The largest request body accepted (larger ones are answered 413).
        ray_address: Connect to this Ray cluster (e.g. ``auto``) instead of starting a
            local Ray (which binds to 127.0.0.1 and runs no dashboard).
        direct_ingress: Ray Serve's throughput-optimized mode (``RAY_SERVE_THROUGHPUT_OPTIMIZED``):
            no proxy actor; each replica runs the HTTP server itself, replica *i* on port
            ``port + i`` (no load balancing between them). Serve reads this when its
            processes start, so it needs the local Ray that this function starts, and
            serves one application.
        name: The Serve application's name: a second checkpoint is served beside the
            first under another name and route prefix (same host and port).

    Returns:
        The URL, e.g. ``http://127.0.0.1:8000/`` (with ``direct_ingress`` and several
        replicas: the first replica's).

    Raises:
        CheckpointError: If the checkpoint is missing or unreadable.
        ConfigError: For an option out of range, a policy id the checkpoint lacks, or
            HTTP options that differ from those of the Serve already running.
        ServeError: If Serve could not deploy the policy (the replica's error included).
    """
    checkpoint = str(Path(checkpoint).expanduser().absolute())
    _check_options(num_replicas, num_cpus_per_replica, route_prefix, port, max_batch_size, batch_wait_timeout_s,
                   max_body_bytes)
    _check_checkpoint(checkpoint, policy_id)
    import ray

    address = ray_address or os.environ.get("RAY_ADDRESS")
    if direct_ingress and (ray.is_initialized() or address):
        raise ConfigError(
            "direct_ingress (--direct-ingress) needs the local Ray that rlstack serve starts: Ray Serve reads it "
            "from the environment when its processes start. Leave out --ray-address / RAY_ADDRESS (and do not "
            "call ray.init() first), or start the cluster with RAY_SERVE_THROUGHPUT_OPTIMIZED=1 in its "
            "environment.")
    if _running.http is not None and (_running.http != (host, port, direct_ingress) or direct_ingress):
        raise ConfigError(
            f"Serve already runs in this process on {_running.http[0]}:{_running.http[1]}"
            f"{' with direct ingress (one application)' if _running.http[2] else ''}; serve another checkpoint "
            "beside it with the same host and port (and another name and route_prefix), or call stop_server() "
            "first.")
    _start_ray(address, direct_ingress, port, num_replicas)
    from ray import serve

    from rlstack.serve.deployment import PolicyServer

    quiet = {"enable_access_log": False, "log_level": "WARNING"}  # no log line per request
    # With direct ingress the replicas listen on `port`; Serve 2.60 still starts its proxy
    # (it answers through the replicas on the slow path), on a free port of its own.
    proxy_port = _free_port(host) if direct_ingress else port
    serve.start(http_options={"host": host, "port": proxy_port}, logging_config=quiet)
    _running.http = (host, port, direct_ingress)
    deployment = serve.deployment(
        PolicyServer,
        name=DEPLOYMENT_NAME,
        num_replicas=num_replicas,
        ray_actor_options={"num_cpus": num_cpus_per_replica},
        # Enough requests in flight per replica to fill a batch while the previous one runs.
        max_ongoing_requests=max(2 * max_batch_size, 8),
        # A replica that cannot restore the checkpoint will not on a second try either.
        max_constructor_retry_count=1,
        # Serve checks every 2 s by default whether a stopping replica's requests are done.
        graceful_shutdown_wait_loop_s=0.2,
        logging_config=quiet,
    )
    app = deployment.bind(checkpoint, env=env, policy_id=policy_id, explore=explore, max_batch_size=max_batch_size,
                          batch_wait_timeout_s=batch_wait_timeout_s, max_body_bytes=max_body_bytes)
    try:
        serve.run(app, name=name, route_prefix=route_prefix)
    except Exception as exc:  # noqa: BLE001 - Serve reports a replica's failure as text
        detail = _deployment_message(name) or str(exc)
        serve.delete(name)
        if not _running.apps:  # nothing else served: take Serve (and a Ray started here) down again
            stop_server()
        raise ServeError(f"Ray Serve could not deploy the policy of {checkpoint}: {detail}") from exc
    _running.apps.append(name)
    return f"http://{host}:{port}{route_prefix}"


def stop_server() -> None:
    """Takes down the applications :func:`start_server` deployed, then Serve itself unless
    other applications run on it (a shared cluster's), and the local Ray if
    :func:`start_server` started it."""
    import ray

    if ray.is_initialized() and _running.http is not None:
        from ray import serve

        others = set() if _running.started_ray else set(serve.status().applications) - set(_running.apps)
        if others:  # a shared cluster's applications keep running, and Serve with them
            for name in _running.apps:
                serve.delete(name)
        else:
            serve.shutdown()
    if ray.is_initialized() and _running.started_ray:
        ray.shutdown()
    for key, value in _running.saved_env.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    _running.__init__()


def serve_forever(checkpoint: str | os.PathLike, **options: Any) -> int:
    """``rlstack serve``: :func:`start_server`, print the URL, wait for Ctrl-C or
    SIGTERM, :func:`stop_server`. Returns the exit code (0)."""
    url = start_server(checkpoint, **options)
    print(f"Serving {checkpoint} at {url} (POST {{\"obs\": ...}} for actions, GET describes the policy); "
          "Ctrl-C stops.", flush=True)
    stopped = threading.Event()
    # Handlers of our own rather than KeyboardInterrupt: a shell starts a background job
    # (`rlstack serve ... &`) with SIGINT ignored, and Ctrl-C should stop it all the same.
    previous = {sig: signal.signal(sig, lambda *_: stopped.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        while not stopped.wait(0.5):
            pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        print("Stopping the server.", flush=True)
        stop_server()
    return 0


def _start_ray(address: str | None, direct_ingress: bool, port: int, num_replicas: int) -> None:
    import ray

    if ray.is_initialized():
        return
    if direct_ingress:
        # Inherited by the Ray processes started below (raylet, Serve's controller and replicas).
        for key, value in _direct_ingress_env(port, num_replicas).items():
            _running.saved_env.setdefault(key, os.environ.get(key))
            os.environ[key] = value
    from rlstack.trainers.common.ray_start import connect_ray, init_local_ray

    if address:
        connect_ray(address, log_to_driver=False)
        return

    init_local_ray(include_dashboard=False, log_to_driver=False)
    _running.started_ray = True


def _free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _direct_ingress_env(port: int, num_replicas: int) -> dict[str, str]:
    # Serve's throughput-optimized mode without HAProxy: direct ingress (replicas serve
    # HTTP on ports taken from [MIN, MAX), here exactly port .. port + num_replicas - 1),
    # user code on the replica's main event loop, no per-request log lines on stderr. The
    # drain period (Serve's default 30 s) only delays Ctrl-C here: no load balancer
    # needs to learn that a replica is going.
    return {
        "RAY_SERVE_THROUGHPUT_OPTIMIZED": "1",
        "RAY_SERVE_ENABLE_DIRECT_INGRESS": "1",
        "RAY_SERVE_DIRECT_INGRESS_MIN_HTTP_PORT": str(port),
        "RAY_SERVE_DIRECT_INGRESS_MAX_HTTP_PORT": str(port + num_replicas),
        "RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S": "1",
    }


def _deployment_message(name: str) -> str:
    # Why the deployment failed (a replica constructor's traceback), as Serve's status has it.
    from ray import serve

    try:
        return serve.status().applications[name].deployments[DEPLOYMENT_NAME].message
    except Exception:  # noqa: BLE001 - no status to add: the caller reports Serve's own error
        return ""


def _check_options(num_replicas: int, num_cpus_per_replica: float, route_prefix: str, port: int,
                   max_batch_size: int, batch_wait_timeout_s: float, max_body_bytes: int) -> None:
    checks = (
        (num_replicas >= 1, f"num_replicas must be at least 1, got {num_replicas}."),
        (num_cpus_per_replica > 0, f"num_cpus_per_replica must be positive, got {num_cpus_per_replica}."),
        (route_prefix.startswith("/"), f"route_prefix must start with '/', got {route_prefix!r} (e.g. '/cartpole')."),
        (0 < port < 65536, f"port must be in 1..65535, got {port}."),
        (max_batch_size >= 1, f"max_batch_size must be at least 1, got {max_batch_size}."),
        (batch_wait_timeout_s >= 0, f"batch_wait_timeout_s must be 0 or more, got {batch_wait_timeout_s}."),
        (max_body_bytes >= 64, f"max_body_bytes must be at least 64, got {max_body_bytes}."),
    )
    for ok, message in checks:
        if not ok:
            raise ConfigError(message)


def _check_checkpoint(checkpoint: str, policy_id: str) -> None:
    # Before Ray starts: a wrong path or policy id fails in a second, not after a deploy.
    from rlstack.trainers.common import checkpoint_files as ckpt
    from rlstack.trainers.common.registry import get_trainer_class

    if not Path(checkpoint).is_dir():
        raise CheckpointError(f"No checkpoint directory at {checkpoint}; pass a directory that an rlstack trainer "
                              "wrote (trainer.save(), or a checkpoint_* directory of rlstack train).")
    metadata, _ = ckpt.read_checkpoint(checkpoint)
    get_trainer_class(metadata.get("algorithm", "?"))
    policies = sorted(metadata.get("policies") or {"default_policy": None})
    if policy_id not in policies:
        raise ConfigError(f"Policy {policy_id!r} is not in the checkpoint; its policies: {', '.join(policies)} "
                          "(rlstack serve --policy-id).")
