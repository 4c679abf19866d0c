"""Cluster jobs: ``rlstack submit`` runs an rlstack command as a Ray job.

A thin layer over Ray's Jobs API (:class:`ray.job_submission.JobSubmissionClient`)::

    rlstack submit --address http://HEAD:8265 -- train -f tune_configs/cartpole-ppo.yaml

is the same as::

    ray job submit --address http://HEAD:8265 --working-dir . \\
        --runtime-env-json '{"excludes": [".git", ".venv", "venv", "__pycache__"]}' \\
        -- python -m rlstack train -f tune_configs/cartpole-ppo.yaml

What runs where:

* The working directory (default ``.``) is zipped, uploaded to the head node and unpacked
  as the job's current directory, so relative paths such as ``-f tune_configs/x.yaml``
  mean the copy. Ray itself leaves out what ``.gitignore`` and ``.rayignore`` files list,
  in every directory (unless ``RAY_RUNTIME_ENV_IGNORE_GITIGNORE=1``), and, since 2.60,
  ``.git``, ``.venv``, ``venv`` and ``__pycache__`` (unless
  ``RAY_OVERRIDE_RUNTIME_ENV_DEFAULT_EXCLUDES`` says otherwise); rlstack names
  :data:`DEFAULT_EXCLUDES` explicitly as well, so that no setting uploads a virtualenv.
* The entrypoint is ``python -m rlstack ARGS``, run by the ``python`` on the head node's
  ``PATH``. Ray puts the unpacked directory first on ``PYTHONPATH`` and ``-m`` puts the
  current directory first on ``sys.path``, so when the working directory is an rlstack
  checkout its ``rlstack/`` package is the one that runs (with the cluster's Ray, torch,
  ...); otherwise the rlstack installed on the cluster runs.
* Results go where ``rlstack train`` puts them on the node that runs the job's driver
  (``~/ray_results`` unless ``--storage-path``): give an absolute or shared path
  (``/mnt/shared/results``, ``s3://...``); a relative one lands in the unpacked copy,
  which Ray deletes eventually.

Token authentication (``RAY_AUTH_MODE=token`` on the cluster): Ray's client
sends ``Authorization: Bearer <token>`` only when ``RAY_AUTH_MODE=token`` is set in the
submitting process too, reading the token from ``RAY_AUTH_TOKEN``, else the file named by
``RAY_AUTH_TOKEN_PATH``, else ``~/.ray/auth_token`` (``ray get-auth-token`` on the head
prints it). rlstack relies on that and turns a refusal into an error saying which of
these to set; it never sends a token to an address unless asked to, like Ray.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import os
import re
import shlex
import sys
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from rlstack.errors import ClusterAuthenticationError, ClusterConnectionError, ConfigError, JobSubmissionError

if TYPE_CHECKING:
    from ray.job_submission import JobSubmissionClient

__all__ = [
    "DEFAULT_EXCLUDES",
    "ClusterAuthenticationError",
    "ClusterConnectionError",
    "JobSubmissionError",
    "build_entrypoint",
    "build_runtime_env",
    "check_upload",
    "submit",
]

# Never uploaded with the working directory (gitwildmatch patterns, at any depth), on
# top of what .gitignore / .rayignore list: a virtualenv alone is hundreds of MB, and Ray
# refuses packages over its limit. Ray 2.60's own defaults, which an environment variable
# can turn off (ray/_private/ray_constants.py, RAY_RUNTIME_ENV_DEFAULT_EXCLUDES).
DEFAULT_EXCLUDES = (".git", ".venv", "venv", "__pycache__")

# Seconds between status (and, without the log stream, log) requests.
POLL_INTERVAL_S = 1.0

_AUTH_HELP = (
    "Set RAY_AUTH_MODE=token in this shell and give the cluster's token in RAY_AUTH_TOKEN, "
    "or in a file named by RAY_AUTH_TOKEN_PATH, or in ~/.ray/auth_token (`ray get-auth-token` "
    "on the head node prints it)."
)


def build_entrypoint(args: Sequence[str]) -> str:
    """The shell command a job runs for ``rlstack ARGS``.

    Args:
        args: The rlstack command and its arguments, e.g. ``["train", "-f", "x.yaml"]``.

    Returns:
        ``python -m rlstack`` and the arguments, each quoted for the shell.

    Raises:
        ConfigError: If ``args`` is empty.

    Example:
        >>> build_entrypoint(["train", "--stop", '{"training_iteration": 1}'])
        'python -m rlstack train --stop \\'{"training_iteration": 1}\\''
    """
    if not args:
        raise ConfigError("No rlstack command to run; put it after '--', e.g. "
                          "rlstack submit --address http://HEAD:8265 -- train -f tune_configs/cartpole-ppo.yaml")
    return shlex.join(["python", "-m", "rlstack", *args])


def build_runtime_env(
    working_dir: str | None = ".",
    runtime_env: dict[str, Any] | None = None,
    env_vars: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The job's runtime env: the working directory to upload, excludes and env vars.

    Args:
        working_dir: A local directory to upload as the job's working directory, or a
            remote package URI (``s3://.../pkg.zip``, ``https://...``); ``None`` keeps
            ``runtime_env``'s own ``working_dir``, if any. Overrides ``runtime_env``'s.
        runtime_env: Any other Ray runtime-env fields (``pip``, ``env_vars``, ``excludes``, ...).
        env_vars: Environment variables for the job, added to ``runtime_env["env_vars"]``.

    Returns:
        A new runtime-env dict; a local working directory is made absolute and gets
        :data:`DEFAULT_EXCLUDES` added to its ``excludes``.

    Raises:
        ConfigError: If the working directory does not exist or a field has the wrong type.
    """
    env = copy.deepcopy(runtime_env or {})
    if not isinstance(env, dict):
        raise ConfigError(f"The runtime env must be a JSON object, got {type(env).__name__}.")
    if working_dir is not None:
        env["working_dir"] = working_dir
    local_dir = env.get("working_dir")
    if local_dir is not None and "://" not in str(local_dir):
        path = os.path.abspath(os.path.expanduser(str(local_dir)))
        if not os.path.isdir(path):
            raise ConfigError(
                f"Working directory {local_dir!r} does not exist (resolved to {path!r}); "
                "pass --working-dir DIR with the files the job needs (default: the current directory)."
            )
        env["working_dir"] = path
        excludes = env.get("excludes") or []
        if not isinstance(excludes, list):
            raise ConfigError(f"runtime_env 'excludes' must be a list of patterns, got {excludes!r}.")
        env["excludes"] = excludes + [e for e in DEFAULT_EXCLUDES if e not in excludes]
    if env_vars:
        merged = env.get("env_vars") or {}
        if not isinstance(merged, dict):
            raise ConfigError(f"runtime_env 'env_vars' must be a mapping, got {merged!r}.")
        env["env_vars"] = {**merged, **env_vars}
    return env


# rlstack submit refuses to upload more than this, or files that look like secrets,
# unless --force: the upload goes to every node of the cluster and stays there.
MAX_UPLOAD_BYTES = 100 * 2**20
# File names (fnmatch patterns) that usually hold credentials; matched at any depth.
SECRET_PATTERNS = (".env", ".env.*", "*.pem", "*.key", "*.p12", "*.pfx", "id_rsa*", "id_dsa*", "id_ecdsa*",
                   "id_ed25519*", "credentials", ".netrc", ".pypirc", "*.keystore")
# Templates that only show which variables to set.
_NOT_SECRETS = (".env.example", ".env.sample", ".env.template", ".env.dist")


def _uploaded_files(root: str, excludes: list[str]) -> list[tuple[str, int]]:
    """``(relative path, bytes)`` of every file Ray would upload from ``root``: its own
    walk, which applies ``excludes`` and the .gitignore / .rayignore files in every
    directory."""
    from pathlib import Path

    from ray._private.runtime_env import packaging

    base = Path(root).resolve()
    files: list[tuple[str, int]] = []

    def visit(path: Path) -> None:
        if path.is_file() and not path.is_symlink():
            files.append((str(path.relative_to(base)), path.stat().st_size))

    include_gitignore = os.environ.get("RAY_RUNTIME_ENV_IGNORE_GITIGNORE", "0") != "1"
    quiet = logging.getLogger("rlstack.jobs.upload_walk")  # Ray's walk logs each ignore file at INFO
    quiet.setLevel(logging.WARNING)
    packaging._dir_travel(base, [packaging._get_excludes(base, list(excludes))], visit,
                          include_gitignore=include_gitignore, logger=quiet)
    return files


def check_upload(runtime_env: dict[str, Any]) -> None:
    """Refuses a local working directory Ray would upload with more than
    :data:`MAX_UPLOAD_BYTES` or with files named like secrets (:data:`SECRET_PATTERNS`).

    Raises:
        ConfigError: Naming the largest files, or the secret-looking ones, and what to do.
    """
    import fnmatch

    root = runtime_env.get("working_dir")
    if root is None or "://" in str(root):
        return
    files = _uploaded_files(root, runtime_env.get("excludes") or [])
    secrets = sorted(path for path, _ in files
                     if os.path.basename(path) not in _NOT_SECRETS
                     and any(fnmatch.fnmatch(os.path.basename(path), pattern) for pattern in SECRET_PATTERNS))
    if secrets:
        raise ConfigError(
            f"The working directory {root} holds files that look like secrets, which would be uploaded to the "
            f"cluster: {', '.join(secrets[:10])}{' ...' if len(secrets) > 10 else ''}. List them in .gitignore or "
            "a .rayignore file (or --runtime-env-json '{\"excludes\": [...]}'), or pass --force to upload them.")
    total = sum(size for _, size in files)
    if total > MAX_UPLOAD_BYTES:
        largest = sorted(files, key=lambda f: -f[1])[:5]
        named = ", ".join(f"{path} ({size / 2**20:.1f} MiB)" for path, size in largest)
        raise ConfigError(
            f"The working directory {root} would upload {total / 2**20:.1f} MiB (more than "
            f"{MAX_UPLOAD_BYTES // 2**20} MiB); the largest files: {named}. Leave data, checkpoints and results out "
            "(.gitignore, .rayignore, or --runtime-env-json '{\"excludes\": [\"data/\"]}'), point --working-dir at "
            "a smaller directory, or pass --force.")


def submit(
    address: str | None,
    entrypoint_args: Sequence[str],
    working_dir: str | None = ".",
    runtime_env: dict[str, Any] | None = None,
    no_wait: bool = False,
    env_vars: dict[str, str] | None = None,
    out: TextIO | None = None,
    force: bool = False,
) -> int:
    """Submits ``rlstack ENTRYPOINT_ARGS`` as a Ray job; by default follows it to the end.

    Args:
        address: The Jobs API address, ``http://HEAD:8265`` (the dashboard's). ``None``:
            ``RAY_API_SERVER_ADDRESS``, else ``RAY_ADDRESS``, else ``http://127.0.0.1:8265``.
            An explicit address wins over both variables (Ray's client alone would let
            ``RAY_ADDRESS`` override it).
        entrypoint_args: The rlstack command to run, e.g. ``["train", "-f", "x.yaml"]``.
        working_dir: See :func:`build_runtime_env`.
        runtime_env: See :func:`build_runtime_env`.
        no_wait: Submit, print the job id and return without waiting.
        env_vars: See :func:`build_runtime_env`.
        out: Where the job id, the job's logs and its final status go (default stdout).
        force: Upload a working directory that :func:`check_upload` would refuse.

    Returns:
        0 if the job succeeded (or was submitted, with ``no_wait``), 1 if it failed or
        was stopped, 130 if following it was interrupted (the job keeps running).

    Raises:
        ClusterConnectionError: If the address cannot be reached.
        ClusterAuthenticationError: If the cluster refuses this client's token.
        JobSubmissionError: If the Jobs API refuses the job or a request about it.
        ConfigError: For a missing working directory or a malformed runtime env, or
            (without ``force``) one over 100 MiB or holding secret-looking files.
    """
    out = out or sys.stdout
    entrypoint = build_entrypoint(entrypoint_args)
    env = build_runtime_env(working_dir, runtime_env, env_vars)
    if not force:
        check_upload(env)
    shown = address or "the default address"
    with _cluster_errors(shown), _quiet_default_exclude_warnings():
        client = _client(address)
        job_id = client.submit_job(entrypoint=entrypoint, runtime_env=env)
    if no_wait:
        print(job_id, file=out, flush=True)
        return 0
    hint = f" --address {address}" if address else ""
    print(f"rlstack: submitted job {job_id}: {entrypoint}", file=sys.stderr, flush=True)
    try:
        with _cluster_errors(shown, f" Job {job_id} was submitted and may still run: ray job status {job_id}{hint}"):
            status = _follow_logs(client, job_id, out)
            info = client.get_job_info(job_id)
    except KeyboardInterrupt:
        print(f"\nrlstack: stopped following job {job_id}; it keeps running. "
              f"Logs: ray job logs -f {job_id}{hint}; stop it: ray job stop {job_id}{hint}",
              file=sys.stderr, flush=True)
        return 130
    # Ray's failure message repeats the log's last lines, already written above.
    reason = (info.message or "").split(", last available logs")[0].splitlines()
    message = f": {reason[0]}" if status != "SUCCEEDED" and reason else ""
    print(f"Job {job_id} {status}{message}", file=out, flush=True)
    return 0 if status == "SUCCEEDED" else 1


def _client(address: str | None) -> JobSubmissionClient:
    from ray.job_submission import JobSubmissionClient

    if address is None:
        return JobSubmissionClient()
    # Ray's client replaces even an explicit address with RAY_API_SERVER_ADDRESS or
    # RAY_ADDRESS when set (ray/dashboard/utils.py, get_address_for_submission_client);
    # the address on the command line should win.
    saved = {name: os.environ.pop(name) for name in ("RAY_API_SERVER_ADDRESS", "RAY_ADDRESS") if name in os.environ}
    try:
        return JobSubmissionClient(address)
    finally:
        os.environ.update(saved)


class _DefaultExcludeWarningFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "is now ignored by default" not in str(record.msg)


@contextlib.contextmanager
def _quiet_default_exclude_warnings() -> Iterator[None]:
    """Drops Ray's warning that .git/.venv are "now ignored by default": rlstack wants that."""
    logger = logging.getLogger("ray._private.runtime_env.working_dir")
    quiet = _DefaultExcludeWarningFilter()
    logger.addFilter(quiet)
    try:
        yield
    finally:
        logger.removeFilter(quiet)


@contextlib.contextmanager
def _cluster_errors(address: str, note: str = "") -> Iterator[None]:
    """Turns the Jobs API's exceptions into rlstack errors that say what to do (then ``note``)."""
    import requests
    from ray.exceptions import AuthenticationError

    try:
        yield
    except AuthenticationError as exc:
        raw = exc.message
        if raw.startswith("Authentication required"):
            if os.environ.get("RAY_AUTH_MODE", "").lower() == "token":
                reason = "no token was found to send"
            else:
                reason = "no token was sent because RAY_AUTH_MODE is not 'token' in this shell"
            raise ClusterAuthenticationError(
                f"The Ray cluster at {address} requires token authentication and {reason}. {_AUTH_HELP}{note}"
            ) from None
        raise ClusterAuthenticationError(
            f"The Ray cluster at {address} refused this client's authentication token (HTTP 403: it is not "
            f"the cluster's token). {_AUTH_HELP} Ray reads RAY_AUTH_TOKEN first, then RAY_AUTH_TOKEN_PATH, "
            f"then ~/.ray/auth_token.{note}"
        ) from None
    except (ConnectionError, requests.RequestException) as exc:
        raise ClusterConnectionError(
            f"Cannot reach the Ray Jobs API at {address} ({exc}). Give the dashboard's HTTP address, "
            "e.g. --address http://HEAD:8265; the head must run the dashboard (pip install 'ray[default]'), and "
            "its port must be reachable from here: with the dashboard on the head's 127.0.0.1 (as the cluster "
            "files start it), forward it first (ray dashboard cluster.yaml, or ssh -L 8265:127.0.0.1:8265 HEAD) "
            f"and give --address http://127.0.0.1:8265.{note}"
        ) from None
    except (RuntimeError, ValueError, TypeError) as exc:
        # Ray raises these for a refused request ("Request failed with status code 400: ..."),
        # a package over its size limit, or a runtime env it cannot parse.
        raise JobSubmissionError(f"The Ray Jobs API at {address} refused the request: {exc}"
                                 f"{_size_hint(str(exc))}{note}") from None


def _size_hint(message: str) -> str:
    """What to do when the uploaded working directory is too big for Ray (empty otherwise)."""
    if not re.search(r"status code 413|request body size|exceeds the maximum size|too large", message, re.I):
        return ""
    return (" The job's working directory is uploaded with it, and Ray leaves out only what its .gitignore "
            "files and the runtime env's 'excludes' list (not .git/info/exclude). Add the large files or "
            "folders to .gitignore, or pass --runtime-env-json '{\"excludes\": [\"data/\", \"*.ckpt\"]}', "
            "or point --working-dir at a smaller folder.")


def _follow_logs(client: JobSubmissionClient, job_id: str, out: TextIO) -> str:
    """Writes the job's logs to ``out`` as they come; returns the job's final status.

    Streams over the Jobs API's websocket, then fetches the whole log once and writes
    what the stream missed: the stream can drop the last lines of a job
    (ray-project/ray#46413, #48701). If the stream breaks, polls the full log instead.
    """
    streamed: list[str] = []

    async def stream() -> None:
        async for chunk in client.tail_job_logs(job_id):
            streamed.append(chunk)
            out.write(chunk)
            out.flush()

    try:
        asyncio.run(stream())
    except Exception as exc:  # aiohttp and Ray raise several types for a lost websocket
        print(f"rlstack: log stream of job {job_id} broke ({exc!r}); polling its logs instead",
              file=sys.stderr, flush=True)
    written = "".join(streamed)
    while True:
        status = client.get_job_status(job_id)
        # Fetched after the status: once that is terminal, the driver has exited and the
        # log is complete. Both sides read the file in text mode, so offsets agree.
        logs = client.get_job_logs(job_id)
        if logs.startswith(written):
            out.write(logs[len(written):])
            out.flush()
            written = logs
        if status.is_terminal():
            return str(status)
        time.sleep(POLL_INTERVAL_S)
