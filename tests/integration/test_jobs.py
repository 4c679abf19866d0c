"""`rlstack submit` against a private Ray head with the dashboard and token authentication.

The head is started with `ray start --head --block` in its own session, on free ports and a
temp dir of its own, with ``RAY_AUTH_MODE=token`` in its environment only; teardown kills
exactly the processes it started (never `ray stop`: other Ray instances may share the machine).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import secrets
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import requests
from ray.job_submission import JobStatus, JobSubmissionClient  # ray[default], a dependency

from rlstack import jobs
from rlstack.cli import main
from rlstack.errors import ConfigError
from rlstack.trainers.common import checkpoint_files as ckpt

pytestmark = pytest.mark.timeout(420)

REPO = Path(__file__).resolve().parents[2]
TRAIN_ONE_ITERATION = [
    "train", "--run", "PPO", "--env", "CartPole-v1", "--stop", '{"training_iteration": 1}',
    "--config", '{"num_workers": 0, "train_batch_size": 200, "sgd_minibatch_size": 64, "num_sgd_iter": 1}',
]


@dataclasses.dataclass
class Head:
    address: str
    token: str
    temp_dir: str

    def client(self) -> JobSubmissionClient:
        # This process runs with RAY_AUTH_MODE=disabled (conftest), so Ray adds no token:
        # pass it as the header Ray would send.
        return JobSubmissionClient(self.address, headers={"Authorization": f"Bearer {self.token}"})


def _free_ports(n: int) -> list[int]:
    sockets = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _started_by(root_pid: int, temp_dir: str) -> list[psutil.Process]:
    """The `ray start` process, its descendants, and anything else naming our temp dir."""
    procs: dict[int, psutil.Process] = {}
    try:
        root = psutil.Process(root_pid)
        procs[root.pid] = root
        procs.update((p.pid, p) for p in root.children(recursive=True))
    except psutil.NoSuchProcess:
        pass
    for p in psutil.process_iter(["cmdline"]):
        if temp_dir in " ".join(p.info["cmdline"] or []):
            procs.setdefault(p.pid, p)
    return list(procs.values())


def _stop_head(proc: subprocess.Popen, temp_dir: str) -> None:
    procs = _started_by(proc.pid, temp_dir)  # collected before anything dies and is reparented
    proc.terminate()  # `ray start --block` shuts its node down on SIGTERM
    _, alive = psutil.wait_procs(procs, timeout=20)
    for p in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()  # psutil checks the process's create time: never a recycled pid
    psutil.wait_procs(alive, timeout=10)
    proc.wait(timeout=10)


@pytest.fixture(scope="module")
def head() -> Iterator[Head]:
    # Short: Ray's unix socket paths under the session dir must stay below ~107 chars.
    temp_dir = tempfile.mkdtemp(prefix="rlj", dir="/tmp")
    gcs, dashboard, agent_http, agent_grpc, metrics, runtime_env_agent, client_server = _free_ports(7)
    token = secrets.token_hex(32)
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS")}
    env.update(
        RAY_AUTH_MODE="token",
        RAY_AUTH_TOKEN=token,
        # The job's `python` is the first on the head's PATH: make it this venv's.
        PATH=os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", ""),
    )
    ray_cli = os.path.join(os.path.dirname(sys.executable), "ray")
    cmd = [
        ray_cli, "start", "--head", "--block", "--disable-usage-stats",
        "--node-ip-address=127.0.0.1", f"--port={gcs}", "--num-cpus=2", "--num-gpus=0",
        "--include-dashboard=true", "--dashboard-host=127.0.0.1", f"--dashboard-port={dashboard}",
        f"--dashboard-agent-listen-port={agent_http}", f"--dashboard-agent-grpc-port={agent_grpc}",
        f"--metrics-export-port={metrics}", f"--runtime-env-agent-port={runtime_env_agent}",
        f"--ray-client-server-port={client_server}", "--min-worker-port=0", "--max-worker-port=0",
        f"--temp-dir={temp_dir}",
    ]
    log_path = os.path.join(temp_dir, "ray_start.log")
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    address = f"http://127.0.0.1:{dashboard}"
    try:
        deadline = time.monotonic() + 90
        while True:
            if proc.poll() is not None:
                pytest.fail(f"ray start exited with {proc.returncode}:\n{Path(log_path).read_text()[-3000:]}")
            try:
                r = requests.get(f"{address}/api/version", headers={"Authorization": f"Bearer {token}"}, timeout=2)
                if r.status_code == 200:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"the dashboard at {address} did not come up:\n{Path(log_path).read_text()[-3000:]}")
            time.sleep(0.5)
        yield Head(address, token, temp_dir)
    finally:
        _stop_head(proc, temp_dir)
        shutil.rmtree(temp_dir, ignore_errors=True)


def _submit(head: Head, *args: str, cwd: Path = REPO, token: str | None = "head's", **extra_env: str):
    """`python -m rlstack submit --address HEAD ARGS` with the head's token (or another, or none)."""
    env = {**os.environ, **extra_env}
    if token is None:
        env["RAY_AUTH_MODE"] = "disabled"
        env.pop("RAY_AUTH_TOKEN", None)
    else:
        env["RAY_AUTH_MODE"] = "token"
        env["RAY_AUTH_TOKEN"] = head.token if token == "head's" else token
    return subprocess.run([sys.executable, "-m", "rlstack", "submit", "--address", head.address, *args],
                          capture_output=True, text=True, timeout=300, cwd=cwd, env=env)


def _job_id(stdout: str) -> str:
    last = stdout.strip().splitlines()[-1]
    assert last.startswith("Job raysubmit_"), stdout[-3000:]
    return last.split()[1].rstrip(":")


def test_submit_trains_and_checkpoints(head, tmp_path):
    storage = tmp_path / "results"
    # RAY_ADDRESS pointing elsewhere must not override --address (Ray's client alone would).
    proc = _submit(head, "--", *TRAIN_ONE_ITERATION, "--storage-path", str(storage),
                   RAY_ADDRESS="http://127.0.0.1:1")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    job_id = _job_id(proc.stdout)
    assert proc.stdout.strip().endswith(f"Job {job_id} SUCCEEDED")
    assert "| experiment" in proc.stdout and "TERMINATED" in proc.stdout  # the streamed results table

    client = head.client()
    assert client.get_job_status(job_id) == JobStatus.SUCCEEDED
    logs = client.get_job_logs(job_id)
    assert "| experiment" in logs and "TERMINATED" in logs
    assert client.get_job_info(job_id).entrypoint.startswith("python -m rlstack train --run PPO")

    checkpoints = sorted(storage.glob("default/PPO_*/checkpoint_*"))
    assert len(checkpoints) == 1, sorted(str(p) for p in storage.rglob("*"))
    metadata, _ = ckpt.read_checkpoint(checkpoints[0])
    assert metadata["algorithm"] == "PPO" and metadata["iteration"] == 1


def test_job_runs_the_uploaded_copy_without_venv_or_git(head):
    client = head.client()
    job_id = client.submit_job(entrypoint='python -c "import rlstack; print(rlstack.__file__)"',
                               runtime_env=jobs.build_runtime_env(str(REPO)))
    deadline = time.monotonic() + 120
    while not client.get_job_status(job_id).is_terminal():
        assert time.monotonic() < deadline, client.get_job_logs(job_id)
        time.sleep(0.5)
    assert client.get_job_status(job_id) == JobStatus.SUCCEEDED, client.get_job_logs(job_id)
    package = Path(client.get_job_logs(job_id).strip().splitlines()[-1]).parents[1]
    assert package != REPO and str(package).startswith(head.temp_dir), package
    uploaded = {p.name for p in package.iterdir()}
    assert {"rlstack", "tests", "pyproject.toml"} <= uploaded
    assert not uploaded & {".git", ".venv", "ray_results"}, uploaded
    assert not list(package.rglob("__pycache__"))


def test_failing_job_exits_1_with_the_error_in_its_logs(head, tmp_path):
    (tmp_path / "bad.yaml").write_text(textwrap.dedent(
        """
        bad:
            run: PPO
            env: CartPole-v1
            chekpoint_freq: 1
        """
    ))
    # The working dir is the project with the YAML file; the job's -f path is relative to it.
    proc = _submit(head, "--working-dir", str(tmp_path), "--", "train", "-f", "bad.yaml", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    job_id = _job_id(proc.stdout)
    assert f"Job {job_id} FAILED" in proc.stdout
    assert "Experiment key 'chekpoint_freq'" in proc.stdout  # streamed

    client = head.client()
    assert client.get_job_status(job_id) == JobStatus.FAILED
    assert "Experiment key 'chekpoint_freq'" in client.get_job_logs(job_id)


def test_no_wait_prints_only_the_job_id(head, tmp_path):
    proc = _submit(head, "--working-dir", str(tmp_path), "--no-wait", "--", "ls")
    assert proc.returncode == 0, proc.stderr[-3000:]
    job_id = proc.stdout.strip()
    assert job_id.startswith("raysubmit_") and "\n" not in job_id
    assert head.client().get_job_info(job_id).entrypoint == "python -m rlstack ls"


@pytest.mark.parametrize(("token", "fragment"), [
    (None, "no token was sent because RAY_AUTH_MODE is not 'token'"),
    ("not-the-token", "refused this client's authentication token"),
])
def test_missing_or_wrong_token_is_refused(head, tmp_path, token, fragment):
    before = len(head.client().list_jobs())
    proc = _submit(head, "--working-dir", str(tmp_path), "--", "ls", token=token)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert fragment in proc.stderr and "RAY_AUTH_TOKEN" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(head.client().list_jobs()) == before


def test_unreachable_address_and_missing_working_dir(tmp_path):
    port, = _free_ports(1)
    proc = subprocess.run([sys.executable, "-m", "rlstack", "submit", "--address", f"http://127.0.0.1:{port}",
                           "--working-dir", str(tmp_path), "--", "ls"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "Cannot reach the Ray Jobs API at http://127.0.0.1:" in proc.stderr, proc.stderr

    proc = subprocess.run([sys.executable, "-m", "rlstack", "submit", "--address", f"http://127.0.0.1:{port}",
                           "--working-dir", str(tmp_path / "nope"), "--", "ls"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and "Working directory" in proc.stderr and "does not exist" in proc.stderr


@pytest.mark.parametrize(("refusal", "hinted"), [
    ("Request failed with status code 413: Maximum request body size 104857600 exceeded", True),
    ("Request failed with status code 400: runtime_env field 'pip' is malformed", False),
])
def test_a_refused_submission_says_why_and_how_to_shrink_the_upload(monkeypatch, tmp_path, refusal, hinted):
    class RefusingClient:  # Ray's client raises RuntimeError with the Jobs API's answer
        def submit_job(self, **kwargs):
            raise RuntimeError(refusal)

    monkeypatch.setattr(jobs, "_client", lambda address: RefusingClient())
    with pytest.raises(jobs.JobSubmissionError) as info:
        jobs.submit("http://127.0.0.1:1", ["train", "-f", "x.yaml"], working_dir=str(tmp_path))
    message = str(info.value)
    assert refusal in message
    assert (".gitignore" in message and "--runtime-env-json" in message and "excludes" in message) == hinted


def test_runtime_env_keeps_user_excludes_and_env_vars(tmp_path):
    env = jobs.build_runtime_env(str(tmp_path), {"excludes": ["data/"], "env_vars": {"A": "1"}}, {"B": "2"})
    assert env["working_dir"] == str(tmp_path)
    assert env["excludes"] == ["data/", *jobs.DEFAULT_EXCLUDES]
    assert env["env_vars"] == {"A": "1", "B": "2"}
    assert jobs.build_runtime_env("s3://bucket/pkg.zip") == {"working_dir": "s3://bucket/pkg.zip"}


def test_entrypoint_quotes_each_argument_for_the_shell():
    args = [*TRAIN_ONE_ITERATION, "--storage-path", "/tmp/my results"]
    assert shlex.split(jobs.build_entrypoint(args)) == ["python", "-m", "rlstack", *args]


class _FakeClient:
    """Scripted Jobs API: a log stream that ends early or breaks, then full logs per status call."""

    def __init__(self, streamed: list[str], breaks: bool, polls: list[tuple[str, str]]):
        self.streamed, self.breaks, self.polls, self.calls = streamed, breaks, polls, 0

    async def tail_job_logs(self, job_id):
        for chunk in self.streamed:
            yield chunk
        if self.breaks:
            raise RuntimeError("WebSocket connection closed unexpectedly with close code 1006")

    def get_job_status(self, job_id):
        self.calls = min(self.calls + 1, len(self.polls))
        return JobStatus(self.polls[self.calls - 1][0])

    def get_job_logs(self, job_id):
        return self.polls[self.calls - 1][1]


@pytest.mark.parametrize(("breaks", "polls"), [
    (False, [("SUCCEEDED", "a\nb\nc\n")]),  # the stream missed the last lines (ray#46413)
    (True, [("RUNNING", "a\nb\n"), ("RUNNING", "a\nb\n"), ("FAILED", "a\nb\nc\n")]),  # broke: poll
])
def test_logs_are_written_once_and_completely(monkeypatch, breaks, polls):
    monkeypatch.setattr(jobs, "POLL_INTERVAL_S", 0)
    out = io.StringIO()
    status = jobs._follow_logs(_FakeClient(["a\n"], breaks, polls), "raysubmit_x", out)
    assert out.getvalue() == "a\nb\nc\n"
    assert status == polls[-1][0]


class RecordingClient:
    """Stands for Ray's JobSubmissionClient: records what would be submitted."""

    submitted: list = []

    def submit_job(self, **kwargs):
        self.submitted.append(kwargs)
        return "raysubmit_test"


def test_submit_refuses_secret_looking_files_and_oversized_uploads_unless_forced(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(jobs, "_client", lambda address: RecordingClient())
    RecordingClient.submitted = []
    (tmp_path / "train.py").write_text("print(1)\n")
    (tmp_path / ".env.example").write_text("TOKEN=\n")          # a template, not a secret
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    (tmp_path / ".env").write_text("TOKEN=abc\n")
    args = ("http://127.0.0.1:1", ["ls"])
    with pytest.raises(ConfigError) as info:
        jobs.submit(*args, working_dir=str(tmp_path), no_wait=True)
    assert ".env," in str(info.value) and "keys/id_rsa" in str(info.value) and "--force" in str(info.value)
    assert ".env.example" not in str(info.value) and not RecordingClient.submitted
    # Left out by .gitignore (Ray would not upload them), they are no reason to refuse.
    (tmp_path / ".gitignore").write_text(".env\nkeys/\n")
    assert jobs.submit(*args, working_dir=str(tmp_path), no_wait=True) == 0
    assert len(RecordingClient.submitted) == 1

    big = tmp_path / "data" / "replay.bin"
    big.parent.mkdir()
    with open(big, "wb") as f:  # sparse: 101 MiB long, nothing written to disk
        f.truncate(101 * 2**20)
    with pytest.raises(ConfigError) as info:
        jobs.submit(*args, working_dir=str(tmp_path), no_wait=True)
    assert "data/replay.bin (101.0 MiB)" in str(info.value) and "100 MiB" in str(info.value)
    assert jobs.submit(*args, working_dir=str(tmp_path), no_wait=True, force=True) == 0
    assert len(RecordingClient.submitted) == 2
    # The command line's --force reaches submit().
    assert main(["submit", "--address", "http://127.0.0.1:1", "--working-dir", str(tmp_path), "--no-wait", "--",
                 "ls"]) == 2
    assert "replay.bin" in capsys.readouterr().err
    assert main(["submit", "--address", "http://127.0.0.1:1", "--working-dir", str(tmp_path), "--no-wait",
                 "--force", "--", "ls"]) == 0
