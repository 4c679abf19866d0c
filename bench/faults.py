"""Faults injected into training runs, and what the trainer lost: RELIABILITY.md's table.

    python bench/faults.py [--iterations 8] [--algorithms PPO,IMPALA,APEX]

For each algorithm, a run without faults and one run per fault x setting:

* ``env-error``: worker 1's env raises once, at its 60th step;
* ``kill``: worker 1's actor is killed with ``ray.kill`` after the second iteration;

under ``recreate_failed_workers`` and under ``ignore_worker_failures``. Every env counts
the steps it takes in a memory-mapped file (which survives a killed process), so

    steps lost = env steps taken - env steps that reached the driver

is measured, not derived: before a run stops, the sample requests still in flight
(IMPALA and ApeX keep two per worker) are awaited and counted as delivered, so a run
without faults loses 0. Prints one JSON line with a row per run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

import gymnasium as gym
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

FAIL_AT_STEP = 60
SMALL_MODEL = {"fcnet_hiddens": [16]}
CONFIGS = {
    "PPO": {"num_workers": 2, "num_cpus_per_worker": 0.5, "rollout_fragment_length": 50, "train_batch_size": 200,
            "sgd_minibatch_size": 100, "num_sgd_iter": 1, "seed": 0, "model": SMALL_MODEL},
    "IMPALA": {"num_workers": 2, "num_cpus_per_worker": 0.5, "rollout_fragment_length": 10, "train_batch_size": 40,
               "min_time_s_per_reporting": 0, "min_sample_timesteps_per_reporting": 200, "seed": 0,
               "model": SMALL_MODEL},
    "APEX": {"num_workers": 2, "num_cpus_per_worker": 0.5, "num_replay_buffer_shards": 1, "seed": 0,
             "min_time_s_per_reporting": 0, "min_sample_timesteps_per_reporting": 200, "rollout_fragment_length": 10,
             "learning_starts": 100, "buffer_size": 2000, "train_batch_size": 16, "max_weight_sync_delay": 40,
             "target_network_update_freq": 200, "hiddens": [16], "model": SMALL_MODEL},
}


class CountingCartPole(gym.Wrapper):
    """CartPole that counts its steps in a memory-mapped file and, in chosen workers, raises
    once at a chosen step (who failed is kept in a named actor)."""

    def __init__(self, config):
        super().__init__(gym.make("CartPole-v1"))
        self.worker_index = getattr(config, "worker_index", 0)
        path = Path(config["count_dir"]) / f"w{self.worker_index}_{uuid.uuid4().hex[:8]}.cnt"
        self.count = np.memmap(path, dtype=np.int64, mode="w+", shape=(1,))
        self.fail = self.worker_index in config.get("bad_workers", ())
        self.fault_log = config.get("fault_log")
        self.steps = 0

    def step(self, action):
        self.steps += 1
        if self.fail and self.steps == FAIL_AT_STEP:
            import ray

            if ray.get(ray.get_actor(self.fault_log).claim.remote()):
                raise RuntimeError(f"injected failure in worker {self.worker_index}")
        self.count[0] += 1
        return self.env.step(action)


class FaultLog:
    def __init__(self):
        self.claimed = False

    def claim(self) -> bool:
        first, self.claimed = not self.claimed, True
        return first


def steps_taken(count_dir: str) -> int:
    return int(sum(np.memmap(p, dtype=np.int64, mode="r", shape=(1,))[0] for p in Path(count_dir).glob("*.cnt")))


def drain_in_flight(trainer) -> int:
    """Waits for the sample requests an asynchronous trainer still has out and returns
    their env steps (reaching into IMPALA's and ApeX's request tables)."""
    import ray

    steps = 0
    for ref in list(getattr(trainer, "_in_flight", {})):  # IMPALA: ref -> (worker, version)
        try:
            steps += ray.get(ref, timeout=30).count
        except Exception:  # noqa: BLE001 - a request to a dead worker delivers nothing
            pass
    for ref in list(getattr(trainer, "_samples_in_flight", {})):  # ApeX: count ref -> (worker, batch ref)
        try:
            steps += int(ray.get(ref, timeout=30))
        except Exception:  # noqa: BLE001
            pass
    return steps


def run(algorithm: str, fault: str | None, setting: str | None, iterations: int) -> dict:
    import ray

    from rlstack.env.registry import register_env
    from rlstack.errors import WorkerFailureError
    from rlstack.trainers.common.registry import get_trainer_class

    register_env("counting_cartpole", lambda ctx: CountingCartPole(ctx))
    count_dir = tempfile.mkdtemp(prefix="rlstack_faults_")
    log_name = f"fault_log_{uuid.uuid4().hex[:8]}"
    log = ray.remote(num_cpus=0)(FaultLog).options(name=log_name).remote()
    env_config = {"count_dir": count_dir, "fault_log": log_name,
                  "bad_workers": [1] if fault == "env-error" else []}
    config = {**CONFIGS[algorithm], "env_config": env_config}
    if setting:
        config[setting] = True
    trainer = get_trainer_class(algorithm)(config, "counting_cartpole")
    row = {"algorithm": algorithm, "fault": fault or "none", "setting": setting or "-"}
    start = time.perf_counter()
    result = None
    try:
        for i in range(iterations):
            if fault == "kill" and i == 2:
                ray.kill(trainer.workers.remote_workers()[0])
            result = trainer.train()
        row["recovered"] = True
    except WorkerFailureError as exc:
        row["recovered"] = False
        row["error"] = str(exc)[:160]
    row["wall_s"] = round(time.perf_counter() - start, 2)
    delivered = trainer._counters["num_env_steps_sampled"] + drain_in_flight(trainer)
    trainer.stop()
    time.sleep(0.5)  # let killed workers' last steps land in their counters
    row.update(iterations=result["training_iteration"] if result else 0, steps_delivered=delivered,
               steps_taken=steps_taken(count_dir), healthy_workers=result["num_healthy_workers"] if result else None,
               restarts=result["num_remote_worker_restarts"] if result else None)
    ray.kill(log)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=8)
    parser.add_argument("--algorithms", default="PPO,IMPALA,APEX")
    args = parser.parse_args()

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    from rlstack.trainers.common.ray_start import init_local_ray

    init_local_ray(num_cpus=2, include_dashboard=False, log_to_driver=False)
    rows = []
    for algorithm in args.algorithms.split(","):
        for fault, setting in [(None, None)] + [(f, s) for f in ("env-error", "kill") for s in
                                                 ("recreate_failed_workers", "ignore_worker_failures", None)]:
            row = run(algorithm, fault, setting, args.iterations)
            row["steps_lost"] = row["steps_taken"] - row["steps_delivered"]
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    print(json.dumps({"benchmark": "faults", "iterations": args.iterations, "fail_at_step": FAIL_AT_STEP,
                      "rows": rows}))


if __name__ == "__main__":
    main()
