"""Writing experience from your own loop (1.13's rllib/examples/saving_experiences.py after the
renames, stepping gymnasium's 5-tuple API): 100 episodes of a random CartPole policy, one
batch per episode, into $TMPDIR/demo-out. Learn from them with
``rlstack train --run BC --env CartPole-v1 --config '{"input": "/tmp/demo-out"}'``."""

from __future__ import annotations

import os
import tempfile

import gymnasium as gym
import numpy as np

from rlstack.evaluation.sample_batch_builder import SampleBatchBuilder
from rlstack.models.preprocessors import get_preprocessor
from rlstack.offline.json_writer import JsonWriter

if __name__ == "__main__":
    batch_builder = SampleBatchBuilder()
    writer = JsonWriter(os.path.join(tempfile.gettempdir(), "demo-out"))
    env = gym.make("CartPole-v1")
    prep = get_preprocessor(env.observation_space)(env.observation_space)
    print("The preprocessor is", prep)
    for eps_id in range(100):
        obs, _ = env.reset()
        prev_action = np.zeros_like(env.action_space.sample())
        prev_reward = 0
        done = False
        t = 0
        while not done:
            action = env.action_space.sample()
            new_obs, rew, terminated, truncated, info = env.step(action)
            done = terminated or truncated
            batch_builder.add_values(
                t=t, eps_id=eps_id, agent_index=0, obs=prep.transform(obs), actions=action,
                action_prob=1.0, action_logp=0.0, rewards=rew, prev_actions=prev_action,
                prev_rewards=prev_reward, dones=done, infos=info, new_obs=prep.transform(new_obs))
            obs = new_obs
            prev_action = action
            prev_reward = rew
            t += 1
        writer.write(batch_builder.build_and_reset())
