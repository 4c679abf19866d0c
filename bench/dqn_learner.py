"""DQN learner throughput: replayed rows/s through ``learn_on_batch``.

    python bench/dqn_learner.py [--repeats 5]

One ``learn_on_batch`` call on 64 gradient steps x 32 rows (DQN's ``train_batch_size``,
as ``training_intensity`` hands the learner several steps at once), torch and tf, for
plain DQN on a 256x256 ReLU net with ``grad_clip`` 10 (RL-Zoo's CartPole-v1 settings,
bench/dqn_cartpole.py) and for DQN's classic defaults (double Q, dueling, [256] head).
Prints one JSON line: the median, min and max of ``--repeats`` timed calls.
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

STEPS, ROWS = 64, 32
OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
ACTION_SPACE = gym.spaces.Discrete(2)

SETTINGS = {
    "rl-zoo": {"double_q": False, "dueling": False, "hiddens": [], "grad_clip": 10,
               "model": {"fcnet_hiddens": [256, 256], "fcnet_activation": "relu"}},
    "dqn-defaults": {},
}


def make_policy(framework: str, overrides: dict):
    from rlstack.trainers.common.config import merge_config
    from rlstack.trainers.dqn import DEFAULT_CONFIG

    config = merge_config(DEFAULT_CONFIG, {"seed": 0, "train_batch_size": ROWS, **overrides}, "DQN")
    if framework == "torch":
        from rlstack.trainers.dqn.dqn_torch_policy import DQNTorchPolicy as cls
    else:
        from rlstack.trainers.dqn.dqn_tf_policy import DQNTFPolicy as cls
    return cls(OBS_SPACE, ACTION_SPACE, config)


def replayed_batch(n: int):
    from rlstack.sample_batch import SampleBatch

    rng = np.random.default_rng(0)
    return SampleBatch({
        SampleBatch.OBS: rng.uniform(-1, 1, (n, 4)).astype(np.float32),
        SampleBatch.ACTIONS: rng.integers(0, 2, n),
        SampleBatch.REWARDS: rng.normal(size=n).astype(np.float32),
        SampleBatch.NEXT_OBS: rng.uniform(-1, 1, (n, 4)).astype(np.float32),
        SampleBatch.TERMINATEDS: rng.random(n) < 0.05,
        SampleBatch.DISCOUNTS: np.full(n, 0.99, np.float32),
        SampleBatch.WEIGHTS: np.ones(n, np.float32),
    })


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--frameworks", default="torch,tf", help="comma-separated: torch, tf")
    args = parser.parse_args()
    batch = replayed_batch(STEPS * ROWS)
    out = {}
    for framework in args.frameworks.split(","):
        for name, overrides in SETTINGS.items():
            policy = make_policy(framework, overrides)
            policy.learn_on_batch(batch)  # warm-up (and TF tracing)
            rates = []
            for _ in range(args.repeats):
                start = time.perf_counter()
                policy.learn_on_batch(batch)
                rates.append(batch.count / (time.perf_counter() - start))
            out[f"{framework}/{name}"] = summarise(rates)
    print(json.dumps({"benchmark": "dqn_learner", "unit": "replayed rows / s", "steps": STEPS, "rows": ROWS,
                      "summary": out}))


if __name__ == "__main__":
    main()
