"""Serving throughput: actions/s and latency of ``rlstack serve`` (Ray Serve, one replica,
request batching) under concurrent single-observation CartPole requests on loopback,
against the same policy called in-process (the reference) and against a Serve deployment
that does no work (the floor Serve's own request path sets on this machine).

    python bench/serve.py [--clients 64] [--requests-per-client 300] [--max-wall 60] [--repeats 1]
    python bench/serve.py --modes direct-ingress   # some of the ways of serving only
    python bench/serve.py --checkpoint PATH        # serve a checkpoint instead of training one
    python bench/serve.py --obs-per-request 8      # clients that send batches of 8 observations

Without ``--checkpoint`` it first trains PPO on CartPole-v1 for one tiny iteration (PPO's
default 256x256 model, torch) and saves a checkpoint in a temporary directory: the
figures measure serving, not what the policy learned. Then, for each of ``--modes``, it
starts one server with its own local Ray (one replica of ``--num-cpus-per-replica``
CPUs) on a free loopback port:

* ``proxy``: ``rlstack.serve.start_server`` as ``rlstack serve`` runs it by default: Serve's
  HTTP proxy actor in front of the replica;
* ``direct-ingress``: ``rlstack serve --direct-ingress``: the replica answers HTTP itself
  (Serve's throughput-optimized mode);
* ``noop-proxy`` / ``noop-direct-ingress``: the same two paths to a deployment that reads
  the body, passes it through ``@serve.batch`` with the same batch settings and answers a
  fixed ``{"actions": 0}``: what Serve alone costs (its errors column counts the answers
  that differ from the policy's, and means nothing);

and, ``--repeats`` times:

* **load**: ``--clients`` concurrent clients, each on its own keep-alive connection,
  each sending ``--requests-per-client`` single-observation requests one after another
  (``{"obs": [4 floats]}``; the observations were recorded from CartPole with random
  actions; with ``--obs-per-request k`` > 1, ``{"obs": [k observations], "batch": true}``
  instead), stopping early at ``--max-wall`` seconds. The clients are coroutines of one
  asyncio loop in this process, a minimal HTTP/1.1 client over asyncio streams
  (pre-encoded requests, the answer read by its Content-Length): a load generator kept
  cheap, as the server shares this machine's cores with it. Reports actions/s (answered
  observations / wall time of the phase), p50 / p99 latency per request, errors (non-200
  answers, or actions that differ from the in-process greedy ones for those
  observations), and the mean batch size (requests per ``compute_actions`` call) the
  replica reports (its GET description).
* **reference**: ``compute_single_action(obs, explore=False)`` in a loop in this
  process on the same observations (actions/s), and ``compute_actions`` on batches of
  ``--max-batch-size`` (actions/s): what the policy costs without HTTP.

Prints one JSON line: per mode and figure the median (min-max) over the repeats, and each
repeat's figures with the machine's 1-minute load average before and after its load phase
(another process's work shows there). Run it several times for medians over processes.
"""

from __future__ import annotations

import os

# A Ray actor with num_cpus=1 runs with OMP_NUM_THREADS=1 (Ray sets it): the in-process
# reference runs under the same condition as the replica.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")

import argparse
import asyncio
import json
import socket
import sys
import tempfile
import time
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import summarise  # noqa: E402

MODES = ("proxy", "direct-ingress", "noop-proxy", "noop-direct-ingress")
KEYS = ("actions_per_s", "p50_ms", "p99_ms", "errors", "mean_batch_size", "in_process_single_actions_per_s",
        "in_process_batch_actions_per_s")


def train_checkpoint(directory: str) -> str:
    from rlstack.trainers.ppo import PPOTrainer

    trainer = PPOTrainer({"framework": "torch", "num_workers": 0, "train_batch_size": 200, "sgd_minibatch_size": 100,
                          "num_sgd_iter": 1, "seed": 0}, "CartPole-v1")
    trainer.train()
    path = trainer.save(os.path.join(directory, "checkpoint"))
    trainer.stop()
    return path


def record_observations(n: int, seed: int = 0) -> list[list[float]]:
    import gymnasium as gym

    env = gym.make("CartPole-v1")
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    out = []
    while len(out) < n:
        out.append([float(x) for x in obs])
        obs, _, terminated, truncated, _ = env.step(int(rng.integers(2)))
        if terminated or truncated:
            obs, _ = env.reset()
    return out


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def http_request(method: str, path: str, body: bytes = b"") -> bytes:
    # Pre-encoded HTTP/1.1 request (keep-alive is HTTP/1.1's default).
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" \
           f"Content-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    length = 0
    for line in head.split(b"\r\n")[1:]:
        if line[:15].lower() == b"content-length:":
            length = int(line[15:])
            break
    return status, await reader.readexactly(length)


async def load(port: int, requests: list[bytes], expected: list[int], clients: int, per_client: int,
               max_wall: float) -> dict[str, Any]:
    latencies: list[float] = []
    errors = 0
    deadline = time.perf_counter() + max_wall

    async def client(index: int) -> None:
        nonlocal errors
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            for k in range(per_client):
                if time.perf_counter() > deadline:
                    break
                i = (index * per_client + k) % len(requests)
                start = time.perf_counter()
                writer.write(requests[i])
                status, body = await read_response(reader)
                latencies.append(time.perf_counter() - start)
                if status != 200 or json.loads(body)["actions"] != expected[i]:
                    errors += 1
        finally:
            writer.close()

    start = time.perf_counter()
    await asyncio.gather(*(client(i) for i in range(clients)))
    wall = time.perf_counter() - start
    latencies.sort()
    return {"actions_per_s": len(latencies) / wall, "p50_ms": 1000 * latencies[len(latencies) // 2],
            "p99_ms": 1000 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))],
            "requests": len(latencies), "errors": errors, "wall_s": wall}


def in_process(trainer: Any, observations: list[list[float]], batch_size: int) -> dict[str, float]:
    arrays = [np.asarray(obs, dtype=np.float32) for obs in observations]
    start = time.perf_counter()
    for obs in arrays:
        trainer.compute_single_action(obs, explore=False)
    single = len(arrays) / (time.perf_counter() - start)
    batches = [arrays[i:i + batch_size] for i in range(0, len(arrays) - batch_size + 1, batch_size)]
    start = time.perf_counter()
    for batch in batches:
        trainer.compute_actions(batch, explore=False)
    batched = len(batches) * batch_size / (time.perf_counter() - start)
    return {"in_process_single_actions_per_s": single, "in_process_batch_actions_per_s": batched}


class NoopServer:
    """A Serve deployment that does what PolicyServer does around the policy (read the
    body, one ``@serve.batch`` call, a JSON answer) and nothing else."""

    def __init__(self, max_batch_size: int, batch_wait_timeout_s: float) -> None:
        from collections import Counter

        from ray import serve

        self._batch_sizes: Counter[int] = Counter()
        self._act_batched = serve.batch(max_batch_size=max_batch_size,
                                        batch_wait_timeout_s=batch_wait_timeout_s)(self._act_on_batch)

    async def _act_on_batch(self, bodies: list[bytes]) -> list[bytes]:
        self._batch_sizes[len(bodies)] += 1
        return [b'{"actions":0}'] * len(bodies)

    async def __call__(self, request: Any) -> Any:
        from starlette.responses import Response

        if request.method == "GET":
            stats = {"requests": sum(n * c for n, c in self._batch_sizes.items()),
                     "batches": sum(self._batch_sizes.values())}
            return Response(json.dumps({"replica_stats": stats}), media_type="application/json")
        return Response(await self._act_batched(await request.body()), media_type="application/json")


def start_noop(port: int, direct_ingress: bool, args: argparse.Namespace) -> dict[str, str | None]:
    import ray
    from ray import serve

    from rlstack.serve import server as rlstack_server

    # The same Ray and Serve settings as start_server (its private helpers: this is a
    # measurement of them).
    changed = rlstack_server._direct_ingress_env(port, 1) if direct_ingress else {}
    saved = {key: os.environ.get(key) for key in changed}
    os.environ.update(changed)
    from rlstack.trainers.common.ray_start import init_local_ray

    init_local_ray(include_dashboard=False, log_to_driver=False)
    quiet = {"enable_access_log": False, "log_level": "WARNING"}
    serve.start(http_options={"host": "127.0.0.1", "port": free_port() if direct_ingress else port},
                logging_config=quiet)
    deployment = serve.deployment(NoopServer, ray_actor_options={"num_cpus": args.num_cpus_per_replica},
                                  max_ongoing_requests=max(2 * args.max_batch_size, 8), logging_config=quiet)
    serve.run(deployment.bind(args.max_batch_size, args.batch_wait_timeout_s), name="noop", route_prefix="/")
    return saved


def stop_noop(saved: dict[str, str | None]) -> None:
    import ray
    from ray import serve

    serve.shutdown()
    ray.shutdown()
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", help="serve this checkpoint (default: train a tiny CartPole PPO one)")
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}")
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--requests-per-client", type=int, default=300)
    parser.add_argument("--max-wall", type=float, default=60.0, help="seconds at most per load phase")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--max-batch-size", type=int, default=64)
    parser.add_argument("--batch-wait-timeout-s", type=float, default=0.002)
    parser.add_argument("--num-cpus-per-replica", type=float, default=1.0)
    parser.add_argument("--obs-per-request", type=int, default=1,
                        help="observations per request: more than 1 sends {\"obs\": [...], \"batch\": true}")
    parser.add_argument("--reference-steps", type=int, default=5000,
                        help="observations per in-process reference measurement")
    args = parser.parse_args()
    modes = args.modes.split(",")
    unknown = sorted(set(modes) - set(MODES))
    if unknown:
        parser.error(f"unknown mode(s) {unknown}; choose from {', '.join(MODES)}")

    from rlstack.serve import start_server, stop_server
    from rlstack.trainers.ppo import PPOTrainer

    tmp = tempfile.TemporaryDirectory(prefix="rlstack-bench-serve-")
    os.environ.setdefault("RLSTACK_RESULTS_DIR", tmp.name)
    checkpoint = args.checkpoint or train_checkpoint(tmp.name)  # (no rollout workers: Ray is not started)
    trainer = PPOTrainer.from_checkpoint(checkpoint, config_overrides={"num_workers": 0})
    observations = record_observations(max(args.reference_steps, 1000))
    expected = [int(trainer.compute_single_action(np.asarray(obs, np.float32), explore=False))
                for obs in observations]
    k = args.obs_per_request
    if k == 1:
        requests = [http_request("POST", "/", json.dumps({"obs": obs}).encode()) for obs in observations]
    else:  # each request a batch of k consecutive observations, answered by a list of k actions
        requests = [http_request("POST", "/", json.dumps({"obs": observations[i:i + k], "batch": True}).encode())
                    for i in range(0, len(observations) - k + 1)]
        expected = [expected[i:i + k] for i in range(0, len(observations) - k + 1)]
    summary: dict[str, Any] = {}
    all_runs: dict[str, list[dict[str, Any]]] = {}
    for mode in modes:
        port = free_port()
        direct_ingress = mode.endswith("direct-ingress")
        saved_env = None
        if mode.startswith("noop"):
            saved_env = start_noop(port, direct_ingress, args)
        else:
            start_server(checkpoint, port=port, max_batch_size=args.max_batch_size,
                         batch_wait_timeout_s=args.batch_wait_timeout_s,
                         num_cpus_per_replica=args.num_cpus_per_replica, direct_ingress=direct_ingress)
        runs: list[dict[str, Any]] = []
        try:
            asyncio.run(load(port, requests, expected, 8, 20, 10.0))  # warm-up
            for _ in range(args.repeats):
                before = _replica_stats(port)
                load_before = os.getloadavg()[0]
                record = asyncio.run(load(port, requests, expected, args.clients, args.requests_per_client,
                                          args.max_wall))
                record["actions_per_s"] *= k
                record["loadavg_1min_before_after"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
                after = _replica_stats(port)
                record["mean_batch_size"] = (after["requests"] - before["requests"]) / max(
                    after["batches"] - before["batches"], 1)
                record.update(in_process(trainer, observations[:args.reference_steps], args.max_batch_size))
                runs.append(record)
        finally:
            if saved_env is not None:
                stop_noop(saved_env)
            else:
                stop_server()
        summary[mode] = {key: summarise([run[key] for run in runs]) for key in KEYS}
        summary[mode]["served_over_in_process_single"] = summarise(
            [run["actions_per_s"] / run["in_process_single_actions_per_s"] for run in runs])
        all_runs[mode] = [{key: (round(value, 3) if isinstance(value, float) else value)
                           for key, value in run.items()} for run in runs]
    trainer.stop()
    print(json.dumps({
        "benchmark": "serve",
        "unit": "actions/s (observations answered per second), latency in ms per request",
        "settings": {"clients": args.clients, "requests_per_client": args.requests_per_client,
                     "obs_per_request": args.obs_per_request,
                     "max_batch_size": args.max_batch_size, "batch_wait_timeout_s": args.batch_wait_timeout_s,
                     "num_cpus_per_replica": args.num_cpus_per_replica, "replicas": 1},
        "summary": summary,
        "runs": all_runs,
    }))


def _replica_stats(port: int) -> dict[str, Any]:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as answer:
        return json.loads(answer.read())["replica_stats"]


if __name__ == "__main__":
    main()
