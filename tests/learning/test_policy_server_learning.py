"""Learning from a simulator in another process: a PPO trainer
without an env, its input a PolicyServerInput on loopback, learns CartPole to a mean
return >= 150 from a client process that steps the env itself — 1.13's serving example
pair run as a user runs the client (``python -m rlstack.examples.serving.cartpole_client``),
in local inference (the client acts with the policy's weights, fetched every 2 s, and
sends what it recorded) and in remote inference (every action a request).
"""

from __future__ import annotations

import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

from rlstack.env.policy_server_input import PolicyServerInput
from rlstack.trainers.ppo import PPOTrainer

STOP_REWARD = 150
MAX_STEPS = {"local": 100_000, "remote": 60_000}
CONFIG = {"num_workers": 0, "seed": 0, "lr": 1e-3, "rollout_fragment_length": 500, "train_batch_size": 2000,
          "sgd_minibatch_size": 256, "num_sgd_iter": 15, "off_policy_estimation_methods": {},
          "env": None, "observation_space": gym.spaces.Box(-np.inf, np.inf, (4,), np.float32),
          "action_space": gym.spaces.Discrete(2)}


@pytest.mark.parametrize(("inference_mode", "framework"), [("local", "torch"), ("remote", "tf")])
def test_learns_cartpole_from_a_client_process(inference_mode, framework):
    servers = []

    def _input(ioctx):
        servers.append(PolicyServerInput(ioctx, "127.0.0.1", 0))
        return servers[-1]

    trainer = PPOTrainer(config={**CONFIG, "framework": framework, "input": _input})
    client = subprocess.Popen(
        [sys.executable, "-m", "rlstack.examples.serving.cartpole_client", "--port", str(servers[0].server_port),
         "--inference-mode", inference_mode, "--seed", "0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    history = []
    try:
        while True:
            result = trainer.train()
            history.append((result["timesteps_total"], round(result["episode_reward_mean"], 1)))
            if result["episode_reward_mean"] >= STOP_REWARD or result["timesteps_total"] >= MAX_STEPS[inference_mode]:
                break
            assert client.poll() is None, f"the client exited: {client.stderr.read()[-2000:]}"
    finally:
        client.kill()
        client.wait(timeout=30)
        trainer.stop()
    print(inference_mode, framework, history)
    assert history[-1][1] >= STOP_REWARD, f"(timesteps, reward mean) per iteration: {history}"
