"""Sampling throughput: env steps/s of one RolloutWorker with the policy in the loop,
against raw gymnasium stepping random actions (the ceiling for a Python env).

    python bench/sampling.py [--repeats 5] [--steps 20000] [--callbacks] [--only TEXT]

Prints one JSON line. rlstack is measured with PPO's default model (256x256 tanh, separate
value network) for num_envs_per_worker 1, 8, 32, acting in numpy (the default) and in
torch; the raw figures use gymnasium's CartPole-v1 alone and in SyncVectorEnv(8 / 32).
With ``--callbacks`` it adds rows (numpy acting) with a callbacks class whose
``on_episode_step`` does a small thing each step (the custom-metrics example's append
of the pole angle), and the ratio of those to the rows without callbacks: the price of
Episode objects and a Python call per sub-env step.
"""

from __future__ import annotations

import os

# A Ray rollout worker with num_cpus=1 runs with OMP_NUM_THREADS=1 (Ray sets it), so its
# numpy BLAS is single-threaded; measure the in-process worker under the same condition.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import json
import os
import sys
import time

import gymnasium as gym
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import summarise  # noqa: E402


def raw_single(steps: int) -> float:
    env = gym.make("CartPole-v1")
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    actions = rng.integers(0, 2, steps)
    start = time.perf_counter()
    for action in actions:
        _, _, terminated, truncated, _ = env.step(int(action))
        if terminated or truncated:
            env.reset()
    return steps / (time.perf_counter() - start)


def raw_sync_vector(num_envs: int, steps: int) -> float:
    envs = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1") for _ in range(num_envs)])
    envs.reset(seed=0)
    rng = np.random.default_rng(0)
    rounds = max(1, steps // num_envs)
    start = time.perf_counter()
    for _ in range(rounds):
        envs.step(rng.integers(0, 2, num_envs))
    return rounds * num_envs / (time.perf_counter() - start)


def _step_callbacks() -> type:
    from rlstack.trainers.callbacks import DefaultCallbacks

    class PoleAngleStep(DefaultCallbacks):
        """Appends |pole angle| each step (the custom-metrics example's step hook)."""

        def on_episode_start(self, *, episode, **kwargs):
            episode.user_data["pole_angles"] = []

        def on_episode_step(self, *, episode, **kwargs):
            episode.user_data["pole_angles"].append(abs(episode.last_observation_for()[2]))

    return PoleAngleStep


def rlstack_worker(num_envs: int, steps: int, inference: str, callbacks: bool = False) -> float:
    from rlstack.evaluation.rollout_worker import RolloutWorker
    try:
        from rlstack.trainers.common.config import merge_config
    except ImportError:  # bench/check.py's REF builds from before trainers/common/
        from rlstack.trainers.config import merge_config
    from rlstack.trainers.ppo import DEFAULT_CONFIG, PPOTrainer

    fragment = 128  # steps per sub-env per sample() call
    extra = {"callbacks": _step_callbacks()} if callbacks else {}
    config = merge_config(DEFAULT_CONFIG, {"num_envs_per_worker": num_envs, "rollout_fragment_length": fragment,
                                           "rollout_inference": inference, "seed": 0, **extra}, "PPO")
    # worker_index=1: a rollout worker as Ray would build it (one thread), in this process.
    worker = RolloutWorker("CartPole-v1", "rlstack.trainers.ppo.ppo_torch_policy:PPOTorchPolicy", config,
                           worker_index=1, num_workers=1, postprocess_fn=PPOTrainer.postprocess_fn)
    worker.sample()  # warm-up
    done = 0
    start = time.perf_counter()
    while done < steps:
        done += worker.sample().count
    return done / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--callbacks", action="store_true",
                        help="add rows with a per-step on_episode_step callback")
    parser.add_argument("--only", help="run only the cases whose name contains this text (e.g. 'numpy acting'; "
                                       "bench/ab.py compares two builds on a few cases this way)")
    args = parser.parse_args()
    cases = {
        "gymnasium CartPole-v1, 1 env, random actions": lambda: raw_single(args.steps),
        "gymnasium SyncVectorEnv 8 envs, random actions": lambda: raw_sync_vector(8, args.steps),
        "gymnasium SyncVectorEnv 32 envs, random actions": lambda: raw_sync_vector(32, args.steps),
    }
    for n in (1, 8, 32):
        cases[f"rlstack RolloutWorker {n} envs, numpy acting"] = lambda n=n: rlstack_worker(n, args.steps, "numpy")
        cases[f"rlstack RolloutWorker {n} envs, torch acting"] = lambda n=n: rlstack_worker(n, args.steps, "framework")
        if args.callbacks:
            cases[f"rlstack RolloutWorker {n} envs, numpy acting, on_episode_step callback"] = (
                lambda n=n: rlstack_worker(n, args.steps, "numpy", callbacks=True))
    if args.only:
        cases = {name: case for name, case in cases.items() if args.only in name}
    results: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.repeats):  # interleaved, so noise hits every case alike
        for name, case in cases.items():
            results[name].append(case())
    summary = {name: summarise(values) for name, values in results.items()}
    line = {"benchmark": "sampling", "unit": "env steps/s", "summary": summary}
    if {"rlstack RolloutWorker 32 envs, numpy acting", "gymnasium SyncVectorEnv 32 envs, random actions"} <= set(results):
        ratio = [a / b for a, b in zip(results["rlstack RolloutWorker 32 envs, numpy acting"],
                                       results["gymnasium SyncVectorEnv 32 envs, random actions"])]
        line["rlstack_32_over_sync_vector_32"] = summarise(ratio)
    if args.callbacks:
        # Throughput with the step callback over throughput without, per env count.
        line["callbacks_over_none"] = {
            str(n): summarise([a / b for a, b in zip(
                results[f"rlstack RolloutWorker {n} envs, numpy acting, on_episode_step callback"],
                results[f"rlstack RolloutWorker {n} envs, numpy acting"])])
            for n in (1, 8, 32)}
    print(json.dumps(line))


if __name__ == "__main__":
    main()
