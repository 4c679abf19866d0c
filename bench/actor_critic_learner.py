"""SAC, TD3 and DDPG torch learner cost: milliseconds per ``learn_on_batch`` gradient step,
closed-form gradient (``use_fused_sgd``, models/torch/fused_actor_critic.py) against
autograd of ``loss()``.

    python bench/actor_critic_learner.py [--only sac,td3,ddpg] [--rounds 8] [--threads 2]

RL-Zoo's Pendulum-v1 settings (bench/pendulum_offpolicy.py's presets: 256 rows per step,
256x256 networks for SAC, 400x300 for TD3 and DDPG), one gradient step per call as the
trainers take them. The two paths run in one process, alternating round by round (this
machine is shared, so their conditions stay alike); each round times 40 calls. Prints
one JSON line: per algorithm and path, the min and median ms per step over the rounds,
and the autograd / fused ratio of the medians.
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

from pendulum_offpolicy import RL_ZOO  # noqa: E402

ROWS = 256
CALLS_PER_ROUND = 40
OBS_SPACE = gym.spaces.Box(-8.0, 8.0, (3,), np.float32)
ACTION_SPACE = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)


def make_policy(algorithm: str, fused: bool):
    from rlstack.trainers.common.config import merge_config

    if algorithm == "SAC":
        from rlstack.trainers.sac.sac import DEFAULT_CONFIG
        from rlstack.trainers.sac.sac_torch_policy import SACTorchPolicy as policy_class
    else:
        from rlstack.trainers.ddpg.ddpg import DEFAULT_CONFIG
        from rlstack.trainers.ddpg.ddpg_torch_policy import DDPGTorchPolicy as policy_class
    config = merge_config(DEFAULT_CONFIG, dict(RL_ZOO[algorithm], framework="torch", seed=0), algorithm)
    policy = policy_class(OBS_SPACE, ACTION_SPACE, config)
    policy.use_fused_sgd = fused
    return policy


def replayed_rows(seed: int = 0):
    from rlstack.sample_batch import SampleBatch as B

    rng = np.random.default_rng(seed)
    return B({B.OBS: rng.normal(size=(ROWS, 3)).astype(np.float32),
              B.ACTIONS: rng.uniform(-1, 1, (ROWS, 1)).astype(np.float32),
              B.REWARDS: rng.normal(size=ROWS).astype(np.float32),
              B.NEXT_OBS: rng.normal(size=(ROWS, 3)).astype(np.float32),
              B.TERMINATEDS: rng.random(ROWS) < 0.01,
              B.DISCOUNTS: np.full(ROWS, 0.99, np.float32),
              B.WEIGHTS: np.ones(ROWS, np.float32)})


def measure(algorithm: str, rounds: int) -> dict:
    policies = {"fused": make_policy(algorithm, True), "autograd": make_policy(algorithm, False)}
    batch = replayed_rows()
    for policy in policies.values():  # warm-up: allocations, Adam state
        for _ in range(20):
            policy.learn_on_batch(batch)
    times: dict[str, list[float]] = {path: [] for path in policies}
    for _ in range(rounds):
        for path, policy in policies.items():
            start = time.perf_counter()
            for _ in range(CALLS_PER_ROUND):
                policy.learn_on_batch(batch)
            times[path].append((time.perf_counter() - start) / CALLS_PER_ROUND * 1e3)
    result = {path: {"min_ms": round(min(values), 2), "median_ms": round(float(np.median(values)), 2)}
              for path, values in times.items()}
    result["autograd_over_fused"] = round(result["autograd"]["median_ms"] / result["fused"]["median_ms"], 2)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="sac,td3,ddpg", help="comma-separated algorithms (sac, td3, ddpg)")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads (the trainers' default: 2 here)")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    algorithms = [name.strip().upper() for name in args.only.split(",") if name.strip()]
    print(json.dumps({"benchmark": "actor_critic_learner", "rows": ROWS, "threads": args.threads,
                      "results": {algorithm: measure(algorithm, args.rounds) for algorithm in algorithms}}))


if __name__ == "__main__":
    main()
