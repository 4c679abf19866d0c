"""`rlstack serve`: a checkpoint's policy behind an HTTP JSON endpoint on Ray Serve.

One Serve instance for the module, on a free loopback port, with three applications:
PPO on CartPole-v1 at ``/``, PPO with ``use_lstm`` at ``/lstm`` and PPO on a Dict
observation env at ``/dict`` (each trained one tiny iteration, torch). Answers are
compared with the same checkpoint's trainer acting in this process.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from rlstack.cli import main
from rlstack.env.registry import register_env
from rlstack.trainers.ppo import PPOTrainer
from tests.helpers.envs import DictObsEnv

pytest.importorskip("ray.serve")
pytest.importorskip("torch")

TINY = {"framework": "torch", "num_workers": 0, "train_batch_size": 200, "sgd_minibatch_size": 100,
        "num_sgd_iter": 1, "seed": 0}
LSTM = {"use_lstm": True, "lstm_cell_size": 16, "max_seq_len": 10, "fcnet_hiddens": [16]}
DICT_ENV = "rlstack-test-serve-dict"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _trained(tmp_path_factory, name, env, **config):
    trainer = PPOTrainer({**TINY, **config}, env)
    trainer.train()
    path = trainer.save(str(tmp_path_factory.mktemp("serve") / name))
    return trainer, path


@pytest.fixture(scope="module")
def server(ray_local, tmp_path_factory):
    """``(port, {"cartpole" | "lstm" | "dict": trainer})``: Serve with the three applications."""
    from rlstack.serve import start_server, stop_server

    register_env(DICT_ENV, lambda ctx: DictObsEnv(ctx))
    trainers, paths = {}, {}
    try:
        trainers["cartpole"], paths["cartpole"] = _trained(tmp_path_factory, "cartpole", "CartPole-v1")
        trainers["lstm"], paths["lstm"] = _trained(tmp_path_factory, "lstm", "CartPole-v1", model=LSTM)
        trainers["dict"], paths["dict"] = _trained(tmp_path_factory, "dict", DICT_ENV, model={"fcnet_hiddens": [16]})
        port = _free_port()
        # A longer batch wait than the default, so that concurrent test requests meet in a batch.
        common = {"port": port, "num_cpus_per_replica": 0.5, "max_body_bytes": 4096, "batch_wait_timeout_s": 0.02}
        start_server(paths["cartpole"], name="cartpole", **common)
        start_server(paths["lstm"], name="lstm", route_prefix="/lstm", **common)
        start_server(paths["dict"], name="dict", route_prefix="/dict", **common)
        yield port, trainers
    finally:
        stop_server()  # Serve runs only these applications: it shuts Serve down
        for trainer in trainers.values():
            trainer.stop()


def _request(port, method="POST", path="/", body=None, raw=None, headers=None):
    """``(status, decoded JSON answer)``."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        payload = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        connection.request(method, path, body=payload, headers={"Content-Type": "application/json", **(headers or {})})
        answer = connection.getresponse()
        return answer.status, json.loads(answer.read() or b"null")
    finally:
        connection.close()


def _cartpole_observations(n, seed=0):
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        out.append(obs)
        obs, _, terminated, truncated, _ = env.step(int(rng.integers(2)))
        if terminated or truncated:
            obs, _ = env.reset()
    return out


# ----- answers ------------------------------------------------------------------------------

def test_single_and_batch_answers_are_the_greedy_in_process_actions(server):
    port, trainers = server
    observations = _cartpole_observations(16)
    expected = [int(trainers["cartpole"].compute_single_action(obs, explore=False)) for obs in observations]
    singles = [_request(port, body={"obs": obs.tolist()}) for obs in observations]
    assert singles == [(200, {"actions": action}) for action in expected]
    status, answer = _request(port, body={"obs": [obs.tolist() for obs in observations], "batch": True})
    assert status == 200 and answer == {"actions": expected}


def test_get_describes_the_policy(server):
    port, _ = server
    status, answer = _request(port, "GET")
    assert status == 200
    assert answer["algorithm"] == "PPO" and answer["framework"] == "torch"
    assert answer["policy_id"] == "default_policy" and answer["explore"] is False
    assert answer["observation_space"] == {"type": "Box", "shape": [4], "dtype": "float32"}
    assert answer["action_space"]["type"] == "Discrete" and answer["action_space"]["n"] == 2
    assert answer["recurrent"] is False and answer["max_body_bytes"] == 4096


def test_concurrent_requests_are_answered_in_shared_batches(server):
    port, trainers = server
    observations = _cartpole_observations(64, seed=1)
    expected = [int(trainers["cartpole"].compute_single_action(obs, explore=False)) for obs in observations]
    before = _request(port, "GET")[1]["replica_stats"]

    def client(index):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)  # keep-alive
        answers = []
        for i in range(index, len(observations), 16):
            connection.request("POST", "/", body=json.dumps({"obs": observations[i].tolist()}))
            answer = connection.getresponse()
            answers.append((i, answer.status, json.loads(answer.read())))
        connection.close()
        return answers

    with ThreadPoolExecutor(16) as pool:
        answers = [a for chunk in pool.map(client, range(16)) for a in chunk]
    assert sorted(answers) == [(i, 200, {"actions": expected[i]}) for i in range(len(observations))]
    after = _request(port, "GET")[1]["replica_stats"]
    assert after["requests"] - before["requests"] == len(observations)
    assert after["largest_batch"] > 1, after  # 16 clients at once: some requests shared a compute_actions call


# ----- bad requests: a 4xx naming the problem, and the server keeps serving ------------------

@pytest.mark.parametrize(("method", "path", "raw", "status", "fragments"), [
    ("POST", "/", b"{not json", 400, ["not JSON"]),
    ("POST", "/", b"[1, 2]", 400, ["JSON object", '"obs"']),
    ("POST", "/", b'{"observation": [0, 0, 0, 0]}', 400, ['no "obs" key', "'observation'"]),
    ("POST", "/", b'{"obs": [0, 0, 0, 0], "explore": true}', 400, ["Unknown key", "'explore'"]),
    ("POST", "/", b'{"obs": [0.1, 0.2, 0.3]}', 422, ["shape (3,)", "expected shape (4,)"]),
    ("POST", "/", b'{"obs": [[0.1, 0.2, 0.3, 0.4]]}', 422, ["shape (1, 4)", "expected shape (4,)"]),
    ("POST", "/", b'{"obs": ["a", "b", "c", "d"]}', 422, ["strings", "expected numbers", "float32"]),
    ("POST", "/", b'{"obs": [0.1, NaN, 0.3, 0.4]}', 422, ["NaN or infinity"]),
    ("POST", "/", b'{"obs": [0.1, Infinity, 0.3, 0.4]}', 422, ["NaN or infinity"]),
    ("POST", "/", b'{"obs": [[0, 0, 0, 0], [1, 2]], "batch": true}', 422, ["obs[1]", "shape (2,)"]),
    ("POST", "/", b'{"obs": [0, 0, 0, 0], "batch": "yes"}', 400, ['"batch" must be true or false']),
    ("POST", "/", b'{"obs": [0, 0, 0, 0], "state": [[0.0]]}', 422, ["no recurrent state"]),
    ("POST", "/", b'{"obs": [' + b"0.123456789, " * 400 + b"0]}", 413, ["at most 4096", "--max-body-bytes"]),
    ("PUT", "/", b'{"obs": [0, 0, 0, 0]}', 405, ["Method PUT is not allowed"]),
    ("DELETE", "/", None, 405, ["Method DELETE is not allowed"]),
    ("GET", "/lstm/deeper", None, 404, ["No endpoint at /lstm/deeper"]),
], ids=["not-json", "not-object", "no-obs", "unknown-key", "short-obs", "batched-obs", "strings", "nan", "inf",
        "ragged-batch", "batch-flag", "state-without-rnn", "too-large", "put", "delete", "sub-path"])
def test_bad_request_answers_4xx_and_serving_goes_on(server, method, path, raw, status, fragments):
    port, trainers = server
    got_status, answer = _request(port, method, path, raw=raw)
    assert got_status == status, answer
    assert set(answer) == {"error"} and all(fragment in answer["error"] for fragment in fragments), answer
    obs = _cartpole_observations(1, seed=2)[0]
    expected = int(trainers["cartpole"].compute_single_action(obs, explore=False))
    assert _request(port, body={"obs": obs.tolist()}) == (200, {"actions": expected})


def test_a_chunked_body_over_the_limit_answers_413(server):
    port, _ = server  # (no Content-Length: the replica counts the chunks as they come)
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    chunks = iter([b'{"obs": ['] + [b"0.123456789, "] * 400 + [b"0]}"])
    connection.request("POST", "/", body=chunks, encode_chunked=True)
    answer = connection.getresponse()
    assert answer.status == 413 and "over 4096 bytes" in json.loads(answer.read())["error"]
    connection.close()


def _in_process_server(checkpoint):
    """The deployment class in this process, without a Serve replica (so without
    ``@serve.batch``: each request is a batch of its own), and a function that POSTs a
    JSON body to it as a Starlette request: ``post(body) -> (status, answer)``."""
    from starlette.requests import Request

    from rlstack.serve.deployment import PolicyServer

    policy_server = PolicyServer(checkpoint)

    async def unbatched(parsed):
        return (await policy_server._act_on_batch([parsed]))[0]

    policy_server._act_batched = unbatched

    def post(body):
        raw = json.dumps(body).encode()

        async def receive():
            return {"type": "http.request", "body": raw, "more_body": False}

        scope = {"type": "http", "method": "POST", "path": "/", "root_path": "", "query_string": b"",
                 "headers": [(b"content-length", str(len(raw)).encode())]}
        response = asyncio.run(policy_server(Request(scope, receive)))
        return response.status_code, json.loads(response.body)

    return policy_server, post


def test_an_exception_in_a_batch_answers_500_to_that_batch_only(server):
    port, trainers = server
    policy_server, post = _in_process_server(trainers["cartpole"].save())
    obs = [0.01, 0.02, 0.03, 0.04]
    original = policy_server.trainer.compute_actions
    policy_server.trainer.compute_actions = lambda *args, **kwargs: 1 / 0
    status, answer = post({"obs": obs})
    assert status == 500 and "The policy failed on this batch: ZeroDivisionError" in answer["error"]
    policy_server.trainer.compute_actions = original
    expected = int(trainers["cartpole"].compute_single_action(np.asarray(obs, np.float32), explore=False))
    assert post({"obs": obs}) == (200, {"actions": expected})


# ----- recurrent and Dict observation policies ------------------------------------------------

def test_recurrent_policy_takes_and_returns_state(server):
    port, trainers = server
    trainer = trainers["lstm"]
    status, described = _request(port, "GET", "/lstm")
    assert status == 200 and described["recurrent"] is True and described["state_shapes"] == [[16], [16]]
    state = trainer.get_policy().get_initial_state()
    served_state = None
    for obs in _cartpole_observations(5, seed=3):
        action, state, _ = trainer.compute_single_action(obs, state, explore=False)
        body = {"obs": obs.tolist()} if served_state is None else {"obs": obs.tolist(), "state": served_state}
        status, answer = _request(port, path="/lstm", body=body)  # no state at the start: the initial one
        assert status == 200 and answer["actions"] == int(action)
        np.testing.assert_allclose(np.asarray(answer["state_out"][0]), state[0], atol=1e-5)
        np.testing.assert_allclose(np.asarray(answer["state_out"][1]), state[1], atol=1e-5)
        served_state = answer["state_out"]
    # A batch carries one state row per observation.
    observations = _cartpole_observations(3, seed=4)
    rows = [np.random.default_rng(i).normal(size=16).astype(np.float32) * 0.1 for i in range(3)]
    expected = trainer.compute_actions(observations, state=[np.stack(rows), np.stack(rows)], explore=False)
    status, answer = _request(port, path="/lstm", body={
        "obs": [obs.tolist() for obs in observations], "batch": True,
        "state": [np.stack(rows).tolist(), np.stack(rows).tolist()]})
    assert status == 200 and answer["actions"] == expected[0].tolist()
    np.testing.assert_allclose(np.asarray(answer["state_out"][0]), expected[1][0], atol=1e-5)
    status, answer = _request(port, path="/lstm", body={"obs": observations[0].tolist(), "state": [[0.0] * 16]})
    assert status == 422 and "list of 2 arrays" in answer["error"]


def test_previous_action_and_reward_for_a_model_that_reads_them(tmp_path_factory):
    # In this process (see _in_process_server): a request may carry prev_action /
    # prev_reward (none: zeros, an episode's start), and a batch mixing both kinds of
    # request answers each as the trainer would.
    model = {**LSTM, "lstm_use_prev_action": True, "lstm_use_prev_reward": True}
    trainer, path = _trained(tmp_path_factory, "prev", "CartPole-v1", model=model)
    policy_server, post = _in_process_server(path)
    assert policy_server.describe()["reads_prev"] == ["prev_action", "prev_reward"]
    obs = _cartpole_observations(1, seed=5)[0]
    initial = trainer.get_policy().get_initial_state()
    with_prev = trainer.compute_single_action(obs, initial, prev_action=1, prev_reward=1.0, explore=False)
    at_start = trainer.compute_single_action(obs, initial, explore=False)
    status, answer = post({"obs": obs.tolist(), "prev_action": 1, "prev_reward": 1.0})
    assert status == 200 and answer["actions"] == int(with_prev[0])
    np.testing.assert_allclose(np.asarray(answer["state_out"][0]), with_prev[1][0], atol=1e-5)
    parsed = [policy_server.parser.parse(json.dumps(body).encode()) for body in
              ({"obs": obs.tolist()}, {"obs": obs.tolist(), "prev_action": 1, "prev_reward": 1.0})]
    answers = asyncio.run(policy_server._act_on_batch(parsed))
    for answer, expected in zip(answers, (at_start, with_prev)):
        assert answer["actions"] == int(expected[0])
        np.testing.assert_allclose(np.asarray(answer["state_out"][0]), expected[1][0], atol=1e-5)
    status, answer = post({"obs": obs.tolist(), "prev_action": 5})
    assert status == 422 and "not in the action space" in answer["error"]
    status, answer = post({"obs": obs.tolist(), "prev_action": [1, 0]})
    assert status == 422 and "prev_action has shape (2,)" in answer["error"]


def test_dict_observations_are_json_objects(server):
    port, trainers = server
    env = DictObsEnv()
    for seed in range(3):
        obs, _ = env.reset(seed=seed)
        expected = int(trainers["dict"].compute_single_action(obs, explore=False))
        body = {"obs": {key: np.asarray(value).tolist() for key, value in obs.items()}}
        assert _request(port, path="/dict", body=body) == (200, {"actions": expected})
    del body["obs"]["choice"]
    status, answer = _request(port, path="/dict", body=body)
    assert status == 422 and "missing ['choice']" in answer["error"]


# ----- the command ------------------------------------------------------------------------------

@pytest.mark.parametrize(("options", "fragment"), [
    ({"direct_ingress": True}, "needs the local Ray that rlstack serve starts"),
    ({"port": 1}, "Serve already runs in this process on 127.0.0.1:"),
    ({"policy_id": "nope"}, "Policy 'nope' is not in the checkpoint; its policies: default_policy"),
    ({"route_prefix": "cartpole"}, "route_prefix must start with '/'"),
    ({"max_batch_size": 0}, "max_batch_size must be at least 1"),
])
def test_start_server_refuses_what_it_cannot_serve(server, options, fragment):
    from rlstack.errors import ConfigError
    from rlstack.serve import start_server

    port, trainers = server
    with pytest.raises(ConfigError, match=re.escape(fragment)):
        start_server(trainers["cartpole"].save(), **{"port": port, "name": "refused", **options})


def test_cli_refuses_a_missing_checkpoint(tmp_path, capsys):
    assert main(["serve", str(tmp_path / "nowhere"), "--port", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rlstack: error: No checkpoint directory at ") and "nowhere" in err


def test_cli_serves_on_a_running_cluster_until_sigint(server, tmp_path):
    # `rlstack serve --ray-address` in its own process, on this module's Ray and Serve (as
    # on a shared cluster): it prints the URL, answers beside the other applications, and
    # on Ctrl-C takes down its own application only and exits 0.
    import ray

    port, trainers = server
    checkpoint = trainers["cartpole"].save(str(tmp_path / "checkpoint"))
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "RAY_AUTH_MODE": "disabled"}
    stderr_path = tmp_path / "stderr.txt"
    with open(stderr_path, "w") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "rlstack", "serve", checkpoint, "--port", str(port),
                                 "--route-prefix", "/cli", "--num-cpus-per-replica", "0.25",
                                 "--ray-address", ray.get_runtime_context().gcs_address],
                                stdout=subprocess.PIPE, stderr=stderr, text=True, env=env,
                                cwd=Path(__file__).parents[2])
    watchdog = threading.Timer(180, proc.kill)  # a hung start fails the test instead of blocking it
    watchdog.start()
    try:
        line = proc.stdout.readline()
        assert line.startswith("Serving ") and f"http://127.0.0.1:{port}/cli" in line, \
            (line, stderr_path.read_text()[-3000:])
        obs = [0.01, -0.02, 0.03, 0.01]
        expected = int(trainers["cartpole"].compute_single_action(np.asarray(obs, np.float32), explore=False))
        assert _request(port, path="/cli", body={"obs": obs}) == (200, {"actions": expected})
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0, stderr_path.read_text()[-3000:]
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "Stopping the server." in proc.stdout.read()
    assert _request(port, "GET", "/cli")[0] == 404  # its application is gone ...
    assert _request(port, body={"obs": obs}) == (200, {"actions": expected})  # ... and the others serve on
