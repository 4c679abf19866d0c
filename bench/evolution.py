"""ES and ARS on CartPole-v1: evaluations (perturbed episodes) per second with 1, 2 and 4
evaluation actors, and the memory the shared noise table costs as actors are added.

    python bench/evolution.py --runs 3 --workers 1,2,4 --memory-runs 1

Throughput: each run is a fresh process that builds the trainer from the tuned example
(tune_configs/cartpole-es.yaml, cartpole-ars.yaml) with ``num_workers`` set, trains one
warm-up iteration, then more for ``--seconds``; it reports the episodes (noisy and
noise-free) and env steps the actors ran per second of those iterations. ``ray.init`` gets
max(2, workers + 1) CPUs, so 4 actors share the 2 cores of the benchmark machine.

Memory (``--noise-size``, default 250,000,000 entries as 1.13's default: 954 MiB of
float32): after the first iteration, the machine's used memory above what it was before
``ray.init``, the object store's used bytes, and each evaluation actor's unique memory
(USS: pages no other process maps) and RSS. A table copied into each actor would add its
size to every actor's USS; read from the object store, it is counted once per node (in the
object store) and shows in each actor's RSS only as shared pages.

One JSON line with medians and min-max per case.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import run_child, summarise, tuned_example  # noqa: E402

MIB = 2**20


def actor_processes() -> list:
    """The live evaluation actors' processes (Ray titles an actor's process ``ray::Class``)."""
    import psutil

    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(proc.info.get("cmdline") or [])
        if cmdline.startswith("ray::EvolutionWorker"):
            found.append(proc)
    return found


def child(args: argparse.Namespace) -> None:
    import psutil
    import ray

    from rlstack.trainers.common.registry import get_trainer_class

    spec = tuned_example(f"cartpole-{args.algo.lower()}.yaml")
    config = {**spec["config"], "num_workers": args.workers, "seed": args.seed}
    if args.noise_size:
        config["noise_size"] = args.noise_size
    used_before = psutil.virtual_memory().used
    from rlstack.trainers.common.ray_start import init_local_ray

    init_local_ray(num_cpus=max(2, args.workers + 1), include_dashboard=False, log_to_driver=False)
    trainer = get_trainer_class(args.algo)(config, "CartPole-v1")
    trainer.train()  # warm-up: actors started, first episodes run
    record: dict = {}
    if args.noise_size:
        actors = actor_processes()
        uss = [p.memory_full_info().uss / MIB for p in actors]
        rss = [p.memory_info().rss / MIB for p in actors]
        store = ray.available_resources().get("object_store_memory"), ray.cluster_resources().get("object_store_memory")
        record.update({
            "noise_table_mib": round(config["noise_size"] * 4 / MIB, 1),
            "actors_found": len(actors),
            "machine_used_above_start_mib": round((psutil.virtual_memory().used - used_before) / MIB, 1),
            "object_store_used_mib": round((store[1] - store[0]) / MIB, 1) if None not in store else None,
            "actor_uss_mib_max": round(max(uss), 1) if uss else None,
            "actor_rss_mib_max": round(max(rss), 1) if rss else None,
        })
    else:
        start = time.perf_counter()
        episodes = steps = 0
        while time.perf_counter() - start < args.seconds:
            result = trainer.train()
            episodes += result["episodes_this_iter"]
            steps += result["timesteps_this_iter"]
        elapsed = time.perf_counter() - start
        record.update({"evaluations_per_s": round(episodes / elapsed, 1), "env_steps_per_s": round(steps / elapsed, 1),
                       "episodes": episodes, "seconds": round(elapsed, 2),
                       "reward_mean": round(result["episode_reward_mean"], 1)})
    print(json.dumps(record))
    trainer.stop()
    ray.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", default="1,2,4", help="comma-separated evaluation actor counts")
    parser.add_argument("--algos", default="ES,ARS")
    parser.add_argument("--seconds", type=float, default=15.0,
                        help="timed iterations run until this many seconds have passed (after the warm-up one)")
    parser.add_argument("--noise-size", type=int, default=250_000_000,
                        help="entries of the table in the memory runs (0: no memory runs)")
    parser.add_argument("--memory-runs", type=int, default=1, help="rounds of memory runs (they vary little)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--algo", default="ES", help=argparse.SUPPRESS)
    parser.add_argument("--num-workers", dest="num_workers_child", type=int, default=2, help=argparse.SUPPRESS)
    parser.add_argument("--child-noise-size", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        args.workers, args.noise_size = args.num_workers_child, args.child_noise_size
        child(args)
        return
    workers = [int(w) for w in args.workers.split(",")]
    algos = args.algos.split(",")
    records: dict[str, list[dict]] = {}
    for run in range(max(args.runs, args.memory_runs)):
        kinds = ([("throughput", 0)] if run < args.runs else []) + (
            [("memory", args.noise_size)] if args.noise_size and run < args.memory_runs else [])
        for kind, noise_size in kinds:
            for algo in algos:
                for count in workers:
                    label = f"{kind}/{algo}/{count}"
                    record = run_child([os.path.abspath(__file__), "--child", "--algo", algo, "--num-workers",
                                        str(count), "--seed", str(args.seed + run), "--seconds",
                                        str(args.seconds), "--child-noise-size", str(noise_size)], timeout=600)
                    print(f"round {run + 1}/{args.runs} {label}: {record}", file=sys.stderr, flush=True)
                    records.setdefault(label, []).append(record)
    summary = {}
    for label, runs in records.items():
        summary[label] = {}
        for key in sorted({k for r in runs for k in r}):
            values = [r[key] for r in runs if isinstance(r.get(key), (int, float)) and not isinstance(r[key], bool)]
            if values:
                summary[label][key] = summarise(values)
    print(json.dumps({"benchmark": "evolution", "summary": summary, "runs": records}))


if __name__ == "__main__":
    main()
