"""Learner throughput: samples/s through PPO's SGD epochs (samples x epochs / second).

    python bench/learner.py [--repeats 3] [--only torch/rllib-defaults,tf/rl-zoo,...]

Prints one JSON line, torch and tf, for RLlib's default PPO learner settings (batch 4000,
minibatch 128, 30 epochs, 256x256) and RL-Zoo's (batch 256, minibatch 256, 20 epochs, 64x64)
with Discrete actions, and RLlib's defaults with one Box action (a Gaussian policy).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import gymnasium as gym
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import summarise  # noqa: E402

DISCRETE = gym.spaces.Discrete(2)
# One continuous action, as Pendulum's: a diagonal Gaussian over [mean, log std].
BOX = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)

# name: (config overrides, batch size, action space)
SETTINGS = {
    "rllib-defaults": ({}, 4000, DISCRETE),
    "rl-zoo": ({"sgd_minibatch_size": 256, "num_sgd_iter": 20, "train_batch_size": 256,
                "model": {"fcnet_hiddens": [64, 64]}}, 256, DISCRETE),
    "rllib-defaults-box": ({}, 4000, BOX),
}


def make_policy(framework: str, overrides: dict, action_space: gym.Space = DISCRETE):
    try:
        from rlstack.trainers.common.config import merge_config
    except ImportError:  # bench/check.py's REF builds from before trainers/common/
        from rlstack.trainers.config import merge_config
    from rlstack.trainers.ppo import DEFAULT_CONFIG

    config = merge_config(DEFAULT_CONFIG, {"seed": 0, **overrides}, "PPO")
    if framework == "torch":
        from rlstack.trainers.ppo.ppo_torch_policy import PPOTorchPolicy as cls
    else:
        from rlstack.trainers.ppo.ppo_tf_policy import PPOTFPolicy as cls
    return cls(gym.spaces.Box(-1, 1, (4,), np.float32), action_space, config), config


def batch_for(policy, n: int):
    from rlstack.sample_batch import SampleBatch

    rng = np.random.default_rng(0)
    obs = rng.normal(size=(n, 4)).astype(np.float32)
    actions, extras = policy.compute_actions(obs)
    return SampleBatch({"obs": obs, "actions": actions, "action_logp": extras["action_logp"],
                        "action_dist_inputs": extras["action_dist_inputs"],
                        "advantages": rng.normal(size=n).astype(np.float32),
                        "value_targets": rng.normal(size=n).astype(np.float32)})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", help="comma-separated framework/setting pairs (default: all)")
    args = parser.parse_args()
    wanted = set(args.only.split(",")) if args.only else None
    out = {}
    for framework in ("torch", "tf"):
        for name, (overrides, n, action_space) in SETTINGS.items():
            if wanted is not None and f"{framework}/{name}" not in wanted:
                continue
            policy, config = make_policy(framework, overrides, action_space)
            batch = batch_for(policy, n)
            policy.learn_on_batch(batch)  # warm-up (and TF tracing)
            rates = []
            for _ in range(args.repeats):
                start = time.perf_counter()
                policy.learn_on_batch(batch)
                rates.append(n * config["num_sgd_iter"] / (time.perf_counter() - start))
            out[f"{framework}/{name}"] = summarise(rates)
    print(json.dumps({"benchmark": "learner", "unit": "samples x epochs / s", "summary": out}))


if __name__ == "__main__":
    main()
