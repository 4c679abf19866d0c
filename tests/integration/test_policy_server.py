"""Simulators that drive themselves (serving): ExternalEnv's episode API,
PolicyServerInput behind a trainer without an env, PolicyClient in remote and local
inference, and what the server answers to bad requests. The learning bar (CartPole to 150
from a client process) is tests/learning/test_policy_server_learning.py."""

from __future__ import annotations

import http.client
import json
import threading
import time

import gymnasium as gym
import numpy as np
import pytest

from rlstack.env import ExternalEnv, PolicyClient, PolicyServerInput
from rlstack.env.external_env import ExternalEnvError
from rlstack.env.policy_client import PolicyClientError
from rlstack.errors import ConfigError
from rlstack.evaluation.external_sampler import ExternalEnvSampler
from rlstack.sample_batch import SampleBatch
from rlstack.trainers.ppo import PPOTrainer

OBS_SPACE = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)
SMALL = {"num_workers": 0, "framework": "torch", "seed": 0, "rollout_fragment_length": 50, "train_batch_size": 200,
         "sgd_minibatch_size": 64, "num_sgd_iter": 1, "off_policy_estimation_methods": {}}


_STARTED: list = []


@pytest.fixture(autouse=True)
def _stop_trainers():
    """Every trainer a test made stops, passed or failed (servers free their ports)."""
    yield
    while _STARTED:
        _STARTED.pop().stop()


def serving_trainer(**overrides):
    """A PPO trainer without an env whose driver worker serves on a free loopback port;
    returns ``(trainer, server)``; it is stopped after the test."""
    servers = []

    def _input(ioctx):
        servers.append(PolicyServerInput(ioctx, "127.0.0.1", 0))
        return servers[-1]

    config = {**SMALL, "env": None, "observation_space": OBS_SPACE, "action_space": gym.spaces.Discrete(2),
              "input": _input, **overrides}
    trainer = PPOTrainer(config=config)
    _STARTED.append(trainer)
    return trainer, servers[0]


def run_cartpole(client, stop: threading.Event, seed: int = 0, off_policy: bool = False) -> list[float]:
    """Steps CartPole through ``client`` until ``stop``; returns the episodes' returns."""
    env = gym.make("CartPole-v1")
    returns = []
    obs, _ = env.reset(seed=seed)
    eid, total = client.start_episode(), 0.0
    while not stop.is_set():
        if off_policy:
            action = env.action_space.sample()
            client.log_action(eid, obs, action)
        else:
            action = client.get_action(eid, obs)
        obs, reward, terminated, truncated, _ = env.step(action)
        total += reward
        client.log_returns(eid, reward)
        if terminated or truncated:
            client.end_episode(eid, obs)
            returns.append(total)
            obs, _ = env.reset()
            eid, total = client.start_episode(), 0.0
    return returns


def in_thread(fn, *args):
    result: dict = {}

    def target():
        try:
            result["value"] = fn(*args)
        except BaseException as err:  # re-raised by the test
            result["error"] = err

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, result


def post(port: int, body: bytes | str, method: str = "POST") -> tuple[int, dict]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request(method, "/", body if method == "POST" else None)
    response = connection.getresponse()
    data = response.read()
    connection.close()
    return response.status, json.loads(data)


def test_remote_clients_episodes_train_a_trainer_without_env():
    trainer, server = serving_trainer()
    before = trainer.get_policy().get_weights()
    stop = threading.Event()
    thread, result = in_thread(run_cartpole, PolicyClient(f"http://127.0.0.1:{server.server_port}", "remote"), stop)
    try:
        first = trainer.train()
        second = trainer.train()
    finally:
        stop.set()
        thread.join(timeout=60)
    assert "error" not in result, result.get("error")
    assert second["timesteps_total"] >= 400
    assert first["episodes_this_iter"] + second["episodes_this_iter"] > 0
    assert np.isfinite(second["episode_reward_mean"])
    after = trainer.get_policy().get_weights()
    assert any(not np.array_equal(before[key], after[key]) for key in before)
    trainer.stop()


def test_rows_record_what_the_external_env_did():
    trainer, server = serving_trainer()
    worker = trainer.workers.local_worker()
    env = ExternalEnv(gym.spaces.Discrete(2), OBS_SPACE)
    sampler = ExternalEnvSampler(worker, env)
    observations = [np.full(4, k / 10, dtype=np.float32) for k in range(4)]

    def episode():
        eid = env.start_episode()
        first = env.get_action(eid, observations[0])
        env.log_returns(eid, 1.0)
        env.log_action(eid, observations[1], 1)  # an action taken outside the policy
        env.log_returns(eid, 2.0)
        env.log_returns(eid, 0.5)  # rewards of one step add up
        second = env.get_action(eid, observations[2])
        env.log_returns(eid, 3.0)
        env.end_episode(eid, observations[3])
        hidden = env.start_episode(training_enabled=False)  # acted for and reported, never trained on
        env.get_action(hidden, observations[0])
        env.log_returns(hidden, 7.0)
        env.end_episode(hidden, observations[1])
        return first, second

    thread, result = in_thread(episode)
    batch = sampler.collect(3)
    # collect(3) may return before the untrained episode's action is asked for: answered here.
    deadline = time.monotonic() + 30
    while thread.is_alive() and time.monotonic() < deadline:
        sampler.poll(timeout=0.1)
    thread.join(timeout=1)
    first, second = result["value"]
    assert batch.count == 3
    np.testing.assert_allclose(batch[SampleBatch.OBS], observations[:3])
    np.testing.assert_allclose(batch[SampleBatch.NEXT_OBS], observations[1:])
    np.testing.assert_array_equal(batch[SampleBatch.ACTIONS], [first, 1, second])
    np.testing.assert_allclose(batch[SampleBatch.REWARDS], [1.0, 2.5, 3.0])
    np.testing.assert_array_equal(batch[SampleBatch.TERMINATEDS], [False, False, True])
    assert len(set(batch[SampleBatch.EPS_ID].tolist())) == 1
    # The logged action's log-likelihood is the policy's, not the one it would have sampled.
    policy = worker.sampling_policy
    expected = policy.compute_log_likelihoods(np.array([1]), observations[1][None])
    np.testing.assert_allclose(batch[SampleBatch.ACTION_LOGP][1], expected[0], rtol=1e-5)
    assert "advantages" in batch  # the policy's trajectory postprocessing ran
    # Both episodes are reported, the untrained one included.
    while sampler.poll(timeout=1.0):
        pass
    returns = sorted(stats.episode_return for stats in sampler.drain_metrics())
    assert returns == [6.5, 7.0]
    trainer.stop()


def test_an_external_env_refuses_calls_that_do_not_fit_the_episode():
    env = ExternalEnv(gym.spaces.Discrete(2), OBS_SPACE, max_concurrent=1)
    eid = env.start_episode("a")
    with pytest.raises(ExternalEnvError, match="already been started"):
        env.start_episode("a")
    with pytest.raises(ExternalEnvError, match="max_concurrent=1"):
        env.start_episode()
    with pytest.raises(ExternalEnvError, match="never started"):
        env.log_returns("nope", 1.0)
    env.end_episode(eid, np.zeros(4, np.float32))
    with pytest.raises(ExternalEnvError, match="has ended"):
        env.get_action(eid, np.zeros(4, np.float32))
    with pytest.raises(NotImplementedError, match="run"):
        env.run()


def test_bad_requests_get_a_4xx_answer_and_the_server_goes_on():
    trainer, server = serving_trainer()
    port = server.server_port
    client = PolicyClient(f"http://127.0.0.1:{port}", "remote")
    stop = threading.Event()
    thread, result = in_thread(run_cartpole, client, stop)
    try:
        cases = [
            ("{not json", 400, "not JSON"),
            (json.dumps([1, 2]), 400, "JSON object"),
            (json.dumps({"command": "FLY"}), 400, "unknown command 'FLY'"),
            (json.dumps({"command": "GET_ACTION", "observation": [0, 0, 0, 0]}), 400, "'episode_id'"),
            (json.dumps({"command": "GET_ACTION", "episode_id": "nope", "observation": [0, 0, 0, 0]}), 409,
             "never started"),
        ]
        for body, status, fragment in cases:
            code, answer = post(port, body)
            assert (code, fragment in answer["error"]) == (status, True), (body, code, answer)
        eid = PolicyClient(f"http://127.0.0.1:{port}", "remote").start_episode()
        code, answer = post(port, json.dumps({"command": "GET_ACTION", "episode_id": eid, "observation": [0, 1]}))
        assert code == 422 and "shape" in answer["error"], answer
        code, answer = post(port, json.dumps({"command": "GET_ACTION", "episode_id": eid,
                                              "observation": [0, float("nan"), 0, 0]}).replace("NaN", "NaN"))
        assert code == 422 and "NaN" in answer["error"], answer
        code, answer = post(port, b"", method="GET")
        assert code == 405
        with pytest.raises(PolicyClientError, match="409"):
            client.end_episode("nope", np.zeros(4, np.float32))
        # The good client played on through all of it, and the trainer learns from it.
        assert trainer.train()["timesteps_total"] >= 200
    finally:
        stop.set()
        thread.join(timeout=60)
    assert "error" not in result, result.get("error")
    trainer.stop()


def test_a_local_client_acts_with_the_servers_weights_and_reports_its_samples():
    trainer, server = serving_trainer()
    client = PolicyClient(f"http://127.0.0.1:{server.server_port}", "local", update_interval=None)
    local = client.rollout_worker.get_weights()
    remote = trainer.get_policy().get_weights()
    assert all(np.array_equal(local[key], remote[key]) for key in remote)
    stop = threading.Event()
    thread, result = in_thread(run_cartpole, client, stop)
    try:
        reported = trainer.train()
        client.update_policy_weights()
    finally:
        stop.set()
        thread.join(timeout=60)
    client.close()
    assert "error" not in result, result.get("error")
    assert reported["timesteps_total"] >= 200 and reported["episodes_this_iter"] > 0
    trained = trainer.get_policy().get_weights()
    fetched = client.rollout_worker.get_weights()
    assert all(np.array_equal(fetched[key], trained[key]) for key in trained)
    assert any(not np.array_equal(local[key], trained[key]) for key in trained)
    trainer.stop()


def test_a_trainer_without_env_says_what_it_needs():
    with pytest.raises(ConfigError, match="observation_space and action_space"):
        PPOTrainer(config={**SMALL, "env": None})
    with pytest.raises(ConfigError, match="input 'sampler'"):
        PPOTrainer(config={**SMALL, "env": None, "observation_space": OBS_SPACE,
                           "action_space": gym.spaces.Discrete(2)})


def test_a_client_that_cannot_reach_its_server_says_so():
    with pytest.raises(PolicyClientError, match="cannot reach the policy server"):
        PolicyClient("http://127.0.0.1:9", "remote").start_episode()
    with pytest.raises(ValueError, match="inference_mode"):
        PolicyClient("http://127.0.0.1:9", "both")


class CartPoleLoop(ExternalEnv):
    """1.13's pattern: an ExternalEnv subclass whose run() plays CartPole itself."""

    def __init__(self, env_config):
        self.cartpole = gym.make("CartPole-v1")
        super().__init__(self.cartpole.action_space, self.cartpole.observation_space)
        self.seed = env_config.get("seed", 0)

    def run(self):
        obs, _ = self.cartpole.reset(seed=self.seed)
        eid = self.start_episode()
        while True:
            action = self.get_action(eid, obs)
            obs, reward, terminated, truncated, _ = self.cartpole.step(action)
            self.log_returns(eid, reward)
            if terminated or truncated:
                self.end_episode(eid, obs)
                obs, _ = self.cartpole.reset()
                eid = self.start_episode()


def test_an_external_env_subclass_is_a_trainers_env(ray_local):
    # On the driver's worker and on a remote one (each runs its own loop).
    for num_workers in (0, 1):
        trainer = PPOTrainer({**SMALL, "num_workers": num_workers}, env=CartPoleLoop)
        first, second = trainer.train(), trainer.train()
        assert second["timesteps_total"] >= 400
        assert first["episodes_this_iter"] + second["episodes_this_iter"] > 0
        assert 8 <= second["episode_reward_mean"] <= 500
        trainer.stop()


def test_a_recurrent_policy_carries_a_state_per_external_episode():
    trainer, server = serving_trainer(model={"use_lstm": True, "lstm_cell_size": 8, "max_seq_len": 10,
                                             "lstm_use_prev_action": True})
    worker = trainer.workers.local_worker()
    env = ExternalEnv(gym.spaces.Discrete(2), OBS_SPACE)
    sampler = ExternalEnvSampler(worker, env)
    obs = np.full(4, 0.1, dtype=np.float32)

    def two_episodes():
        a, b = env.start_episode(), env.start_episode()
        for eid in (a, b, a, b, a):
            env.get_action(eid, obs)
            env.log_returns(eid, 1.0)
        env.end_episode(a, obs)
        env.end_episode(b, obs)

    thread, result = in_thread(two_episodes)
    batch = sampler.collect(5)
    thread.join(timeout=30)
    assert "error" not in result, result.get("error")
    assert batch.count == 5 and "state_in_0" in batch and "prev_actions" in batch
    for eps_id in set(batch[SampleBatch.EPS_ID].tolist()):
        rows = batch[SampleBatch.EPS_ID] == eps_id
        states_in, states_out = batch["state_in_0"][rows], batch["state_out_0"][rows]
        np.testing.assert_allclose(states_in[0], 0.0)  # each episode starts from the initial state
        np.testing.assert_allclose(states_in[1:], states_out[:-1])  # and moves on from its own last one
        np.testing.assert_array_equal(batch["prev_actions"][rows][1:], batch[SampleBatch.ACTIONS][rows][:-1])
    assert trainer.get_policy().learn_on_batch(batch) is not None
    trainer.stop()


def test_a_call_that_timed_out_is_dropped_and_never_answers_a_later_one(monkeypatch):
    import rlstack.env.external_env as external_env

    trainer, _ = serving_trainer()
    try:
        env = ExternalEnv(gym.spaces.Discrete(2), OBS_SPACE)
        sampler = ExternalEnvSampler(trainer.workers.local_worker(), env)
        eid = env.start_episode()
        monkeypatch.setattr(external_env, "ACTION_TIMEOUT_S", 0.2)
        with pytest.raises(ExternalEnvError, match="not sampling"):
            env.get_action(eid, np.zeros(4, np.float32))  # nobody samples yet
        assert sampler.poll(timeout=0.1)  # takes the abandoned call and drops it
        assert not sampler._tracks  # no step recorded for it
        monkeypatch.setattr(external_env, "ACTION_TIMEOUT_S", 30)
        thread, result = in_thread(env.get_action, eid, np.ones(4, np.float32))
        sampler.poll(timeout=5)
        thread.join(timeout=30)
        assert result["value"] in (0, 1)
        np.testing.assert_allclose(next(iter(sampler._tracks.values())).pending[0], np.ones(4))
    finally:
        trainer.stop()


def test_a_cut_episode_bootstraps_from_the_value_of_its_next_observation():
    trainer, _ = serving_trainer()
    try:
        worker = trainer.workers.local_worker()
        env = ExternalEnv(gym.spaces.Discrete(2), OBS_SPACE)
        sampler = ExternalEnvSampler(worker, env)
        observations = [np.full(4, k / 7, dtype=np.float32) for k in range(3)]

        def steps():
            eid = env.start_episode()
            for obs in observations:
                env.get_action(eid, obs)
                env.log_returns(eid, 1.0)

        thread, _ = in_thread(steps)
        batch = sampler.collect(2)
        thread.join(timeout=30)
        expected = worker.sampling_policy.compute_values(observations[2][None])[0]
        np.testing.assert_allclose(batch[SampleBatch.BOOTSTRAP_VALUE], [0.0, expected], rtol=1e-5)
    finally:
        trainer.stop()


def test_what_a_client_sends_is_checked_before_the_trainer_sees_it():
    trainer, server = serving_trainer()
    port = server.server_port
    try:
        eid = PolicyClient(f"http://127.0.0.1:{port}", "remote").start_episode()
        cases = [
            ({"command": "LOG_ACTION", "episode_id": eid, "observation": [0, 0, 0, 0], "action": 7},
             "not in Discrete(2"),
            ({"command": "LOG_RETURNS", "episode_id": eid, "reward": float("inf")}, "finite"),
            ({"command": "REPORT_SAMPLES", "samples": {"obs": [[0, 0, 0, 0]], "actions": [0], "rewards": [1, 2]}},
             "different lengths"),
            ({"command": "REPORT_SAMPLES", "samples": {"obs": [[0, 0]], "actions": [0], "rewards": [1.0]}},
             "shape"),
            ({"command": "REPORT_SAMPLES", "samples": {"obs": [[0, 0, 0, 0]], "actions": [0],
                                                       "rewards": [float("nan")]}}, "NaN"),
        ]
        for body, fragment in cases:
            code, answer = post(port, json.dumps(body))
            assert code == 422 and fragment in answer["error"], (body, code, answer)
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        connection.putrequest("POST", "/")
        connection.putheader("Content-Length", "-1")
        connection.endheaders()
        assert connection.getresponse().status == 400
    finally:
        trainer.stop()
    # A stopped trainer's server answers nothing more.
    with pytest.raises(PolicyClientError):
        PolicyClient(f"http://127.0.0.1:{port}", "remote").start_episode()


class BrokenLoop(CartPoleLoop):
    def run(self):
        eid = self.start_episode()
        self.get_action(eid, self.cartpole.reset(seed=0)[0])
        raise RuntimeError("the simulator crashed")


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_an_external_env_whose_loop_ends_fails_the_trainer_with_a_message():
    trainer = PPOTrainer(SMALL, env=BrokenLoop)
    try:
        with pytest.raises(Exception, match=r"run\(\) has ended"):
            trainer.train()
    finally:
        trainer.stop()
