"""Learner throughput on the CPU against the GPU (``num_gpus=1``): samples/s through one
``learn_on_batch`` of PPO and IMPALA, torch, on batches sampled from real envs.

    python bench/gpu_learner.py [--repeats 5] [--cases ppo-cartpole,impala-cartpole,impala-pong,ppo-pong]

Prints one JSON line. Needs a CUDA GPU for the GPU rows (it prints only CPU rows without
one) and ale-py for the Pong cases. Each case builds a trainer with ``num_workers=0``,
samples its train batch once, then times ``learn_on_batch`` (after a warm-up call) on
that batch; PPO counts samples x SGD epochs per second, IMPALA samples x passes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import summarise  # noqa: E402

# name: (algorithm, env, config overrides, train batch size)
CASES = {
    # RLlib's PPO defaults: batch 4000, minibatch 128, 30 epochs, 256x256 tanh.
    "ppo-cartpole": ("PPO", "CartPole-v1", {}, 4000),
    # The pong-impala.yaml learner: batches of 500 (84x84x4 screens, default CNN).
    "impala-pong": ("IMPALA", "PongNoFrameskip-v4", {"rollout_fragment_length": 50}, 500),
    "impala-cartpole": ("IMPALA", "CartPole-v1", {"rollout_fragment_length": 50}, 500),
    # PPO on screens: batch 5000, minibatch 500, 10 epochs (classic atari-ppo settings).
    "ppo-pong": ("PPO", "PongNoFrameskip-v4", {"sgd_minibatch_size": 500, "num_sgd_iter": 10,
                                               "rollout_fragment_length": 100}, 5000),
}


def sampled_batch(trainer, size: int):
    from rlstack.sample_batch import concat_samples

    worker = trainer.workers.local_worker()
    batches, count = [], 0
    while count < size:
        batch = worker.sample()
        batches.append(batch)
        count += batch.count
    batch = concat_samples(batches)
    return batch.slice(0, size) if batch.count > size else batch


def measure(case: str, num_gpus: int, repeats: int) -> dict:
    from rlstack.sample_batch import SampleBatch
    from rlstack.policies.postprocessing import standardize
    from rlstack.trainers.common.registry import get_trainer_class

    algorithm, env, overrides, size = CASES[case]
    config = {"framework": "torch", "num_workers": 0, "num_gpus": num_gpus, "seed": 0,
              "train_batch_size": size, **overrides}
    trainer = get_trainer_class(algorithm)(config, env)
    batch = sampled_batch(trainer, size)
    if algorithm == "PPO":
        batch = standardize(batch, SampleBatch.ADVANTAGES)
    policy = trainer.get_policy()
    passes = trainer.config.get("num_sgd_iter", 1)
    policy.learn_on_batch(batch)  # warm-up: allocations, cuDNN autotuning
    rates = []
    for _ in range(repeats):
        if num_gpus:
            import torch

            torch.cuda.synchronize()
        start = time.perf_counter()
        policy.learn_on_batch(batch)
        if num_gpus:
            torch.cuda.synchronize()
        rates.append(batch.count * passes / (time.perf_counter() - start))
    device = policy.device_name
    trainer.stop()
    return {"device": device, "batch": batch.count, "passes": passes, **summarise(rates)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cases", default=",".join(CASES))
    args = parser.parse_args()
    import torch

    gpu = torch.cuda.is_available()
    out = {}
    for case in args.cases.split(","):
        out[f"{case}/cpu"] = measure(case, 0, args.repeats)
        if gpu:
            out[f"{case}/gpu"] = measure(case, 1, args.repeats)
            out[f"{case}/gpu_over_cpu"] = round(out[f"{case}/gpu"]["median"] / out[f"{case}/cpu"]["median"], 2)
        print(json.dumps({case: {k: v for k, v in out.items() if k.startswith(case)}}), file=sys.stderr, flush=True)
    print(json.dumps({
        "benchmark": "gpu_learner", "unit": "samples x passes / s",
        "gpu": torch.cuda.get_device_name(0) if gpu else None, "torch": torch.__version__,
        "cpu_threads": torch.get_num_threads(), "summary": out,
    }))


if __name__ == "__main__":
    main()
