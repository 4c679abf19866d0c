"""Soak test: does any process of a long run grow? RELIABILITY.md's memory table.

    python bench/soak.py [--steps 1000000] [--algos PPO,IMPALA,APEX] [--framework torch]
                         [--interval 10] [--out /tmp/soak] [--max-wall SECONDS] [--tracemalloc]
    python bench/soak.py --report --out /tmp/soak   # the tables again, from the CSVs

(``make soak`` runs it with the defaults; it is not part of ``make test``.) One after
another, each in a fresh Python process with its own local Ray, it trains on CartPole-v1
for ``--steps`` env steps (``timesteps_total``):

* PPO: tune_configs/cartpole-ppo.yaml's config, 2 rollout workers;
* IMPALA: tune_configs/cartpole-impala.yaml's config, 2 rollout workers;
* APEX (Ape-X DQN): tune_configs/cartpole-apex.yaml's config with 2 rollout workers and 2
  replay shards (the learner thread lives in the driver).

The tuned examples' ``stop`` bars are ignored: every run goes the full ``--steps``, or
stops after ``--max-wall`` seconds of training (the JSON line and the table then say so).
Every ``--interval`` seconds a thread of the run's driver samples the RSS (and USS) of
every process of the run's tree (the driver and its descendants: gcs_server, raylet,
the dashboard and its agents, Ray's monitors, each actor) and the object store's use
(bytes and objects, from the raylets' store stats through the GCS). Processes are grouped
by kind from their command lines (Ray sets an actor's process title to ``ray::Class``):
``driver``, ``rollout worker`` (``ray::RolloutWorker``), ``replay shard``
(``ray::ReplayActor``), ``raylet``, ``gcs``, ``dashboard/agent`` (dashboard.py,
``ray::DashboardAgent``, ``ray::RuntimeEnvAgent``), ``other Ray`` (monitor.py,
log_monitor.py, idle pooled workers ``ray::IDLE``, anything else). A last sample is taken
right after the last ``train()`` returns.

Growth is measured from the end of warm-up (the first sample at or past 10% of
``--steps``: buffers filled, workers' Python heaps and Ray's caches settled) to the last
sample, per kind (RSS summed over that kind's processes), in MiB and %. The issue's goal
is at most 5% for every kind.

The table adds the growth of the summed USS (private pages): RSS growth without USS growth
is shared pages touched for the first time (library code, the object store's mapping).
USS can also swing with no change in RSS when pages turn shared or private again (a
fork of the process shares its pages until the child exits); RSS is the criterion.

Output: a JSON line per algorithm, then a Markdown table per algorithm; the raw samples
go to ``--out``/``<algo>-<framework>.csv`` (one row per process per sample, plus a row of
kind ``object store`` per sample whose ``rss_mib`` is the store's use and ``pid`` 0).

``--tracemalloc`` starts tracemalloc in the driver at the end of warm-up and adds its ten
largest growths by source line to the JSON line (to find what grows in the driver; it
slows the driver's Python).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from harness import tuned_example  # noqa: E402

TUNED = {"PPO": "cartpole-ppo.yaml", "IMPALA": "cartpole-impala.yaml", "APEX": "cartpole-apex.yaml"}
OVERRIDES: dict[str, dict[str, Any]] = {
    "PPO": {"num_workers": 2},
    "IMPALA": {"num_workers": 2},
    "APEX": {"num_workers": 2, "num_replay_buffer_shards": 2},
}
KINDS = ["driver", "rollout worker", "replay shard", "raylet", "gcs", "dashboard/agent", "other Ray"]
OBJECT_STORE = "object store"
WARMUP_FRACTION = 0.1
FIELDS = ["algo", "framework", "t_s", "env_steps", "pid", "kind", "title", "rss_mib", "uss_mib"]


def classify(proc: psutil.Process, driver_pid: int) -> tuple[str, str]:
    """(kind, title) of one process of the run's tree."""
    if proc.pid == driver_pid:
        return "driver", "driver"
    try:
        cmdline = " ".join(proc.cmdline())
        name = proc.name()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return "other Ray", "?"
    title = cmdline.split()[0] if cmdline.strip() else name
    if "ray::RolloutWorker" in cmdline:
        return "rollout worker", "ray::RolloutWorker"
    if "ray::ReplayActor" in cmdline:
        return "replay shard", "ray::ReplayActor"
    if name == "raylet" or "/raylet/raylet" in cmdline:
        return "raylet", "raylet"
    if name == "gcs_server" or "gcs_server" in title:
        return "gcs", "gcs_server"
    for marker in ("dashboard/dashboard.py", "dashboard/agent.py", "ray::DashboardAgent", "ray::RuntimeEnvAgent",
                   "runtime_env/agent"):
        if marker in cmdline:
            return "dashboard/agent", marker.split("/")[-1]
    for marker in ("log_monitor.py", "monitor.py", "ray::IDLE"):
        if marker in cmdline:
            return "other Ray", marker
    return "other Ray", title[:60]


def object_store_use(gcs_address: str) -> tuple[float, int]:
    """(MiB used, number of objects) of the object store, summed over the cluster's nodes.

    Ray 2.60's ``ray.available_resources()["object_store_memory"]`` does not follow the
    store's use, and ``memory_summary()`` without an address attaches to the latest Ray
    of the machine (another helper's, on a shared one); the raylets' store stats through
    our own GCS are exact.
    """
    from ray._private.internal_api import get_memory_info_reply, get_state_from_address

    reply = get_memory_info_reply(get_state_from_address(gcs_address))
    stats = reply.store_stats
    return stats.object_store_bytes_used / 2**20, int(stats.num_local_objects)


class Sampler(threading.Thread):
    """Samples the run's process tree and object store every ``interval`` seconds."""

    def __init__(self, algo: str, framework: str, interval: float, gcs_address: str, writer: csv.DictWriter) -> None:
        super().__init__(name="soak-sampler", daemon=True)
        self.algo, self.framework, self.interval = algo, framework, interval
        self.gcs_address, self.writer = gcs_address, writer
        self.env_steps = 0
        self.start_time = time.time()
        self.stop_event = threading.Event()
        self.lock = threading.Lock()
        self.root = psutil.Process()

    def run(self) -> None:
        while not self.stop_event.wait(self.interval):
            self.sample()

    def sample(self) -> None:
        with self.lock:
            t_s = round(time.time() - self.start_time, 1)
            base = {"algo": self.algo, "framework": self.framework, "t_s": t_s, "env_steps": self.env_steps}
            for proc in [self.root, *self.root.children(recursive=True)]:
                kind, title = classify(proc, self.root.pid)
                try:
                    info = proc.memory_full_info()
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
                self.writer.writerow({**base, "pid": proc.pid, "kind": kind, "title": title,
                                      "rss_mib": round(info.rss / 2**20, 2), "uss_mib": round(info.uss / 2**20, 2)})
            used_mib, objects = object_store_use(self.gcs_address)
            self.writer.writerow({**base, "pid": 0, "kind": OBJECT_STORE, "title": f"{objects} objects",
                                  "rss_mib": round(used_mib, 3), "uss_mib": ""})


def child(args: argparse.Namespace) -> None:
    """One algorithm's run, in this process (the driver)."""
    import ray

    from rlstack.trainers.common.ray_start import init_local_ray
    from rlstack.trainers.common.registry import get_trainer_class

    algo = args.child
    spec = tuned_example(TUNED[algo])
    config = {**spec["config"], **OVERRIDES[algo], "framework": args.framework}
    for attempt in range(3):  # on a loaded machine the raylet can miss ray.init's start-up deadline
        try:
            init_local_ray(num_cpus=max(2, os.cpu_count() or 1), include_dashboard=False, log_to_driver=False)
            break
        except Exception as exc:  # noqa: BLE001 - Ray raises a bare Exception for a start-up timeout
            ray.shutdown()
            if attempt == 2:
                raise
            print(f"ray.init failed ({exc}); retrying", file=sys.stderr, flush=True)
            time.sleep(10)
    gcs_address = ray.get_runtime_context().gcs_address
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    csv_path = out / f"{algo.lower()}-{args.framework}.csv"
    with csv_path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        trainer = get_trainer_class(algo)(config, spec["env"])
        sampler = Sampler(algo, args.framework, args.interval, gcs_address, writer)
        sampler.sample()
        sampler.start()
        traced = None
        start = time.time()
        iterations = 0
        result: dict[str, Any] = {}
        while sampler.env_steps < args.steps and (args.max_wall is None or time.time() - start < args.max_wall):
            result = trainer.train()
            iterations += 1
            sampler.env_steps = int(result["timesteps_total"])
            if args.tracemalloc and traced is None and sampler.env_steps >= WARMUP_FRACTION * args.steps:
                import tracemalloc

                tracemalloc.start(10)
                traced = tracemalloc.take_snapshot()
        sampler.stop_event.set()
        sampler.join()
        sampler.sample()
        f.flush()
        line = {"algo": algo, "framework": args.framework, "env_steps": sampler.env_steps,
                "iterations": iterations, "train_s": round(time.time() - start, 1),
                "stopped_by": "steps" if sampler.env_steps >= args.steps else "max_wall",
                "episode_reward_mean": result.get("episode_reward_mean"), "csv": str(csv_path)}
        if traced is not None:
            import tracemalloc

            growth = tracemalloc.take_snapshot().compare_to(traced, "lineno")
            line["tracemalloc_top"] = [str(stat) for stat in growth[:10]]
            tracemalloc.stop()
        trainer.stop()
    ray.shutdown()
    print("SOAK-RUN " + json.dumps(line), flush=True)


def summarise(csv_path: Path, steps: int) -> dict[str, Any]:
    """Per kind: summed RSS at the end of warm-up and at the end, growth in MiB and %, and
    the growth of the summed USS (private pages: RSS growth that USS lacks is shared pages
    touched for the first time, such as library code or the object store's mapping)."""
    samples: dict[float, dict[str, Any]] = {}
    with csv_path.open() as f:
        for row in csv.DictReader(f):
            t_s = float(row["t_s"])
            sample = samples.setdefault(t_s, {"env_steps": int(row["env_steps"]), "kinds": {}})
            kind = sample["kinds"].setdefault(row["kind"], {"mib": 0.0, "uss": 0.0, "procs": 0, "objects": None})
            kind["mib"] += float(row["rss_mib"])
            kind["uss"] += float(row["uss_mib"] or 0.0)
            kind["procs"] += 1
            if row["kind"] == OBJECT_STORE:
                kind["objects"] = int(row["title"].split()[0])
    ordered = [samples[t] | {"t_s": t} for t in sorted(samples)]
    warm = next((s for s in ordered if s["env_steps"] >= WARMUP_FRACTION * steps), ordered[0])
    end = ordered[-1]
    kinds: dict[str, Any] = {}
    for kind in [*KINDS, OBJECT_STORE]:
        if kind not in warm["kinds"] and kind not in end["kinds"]:
            continue
        before = warm["kinds"].get(kind, {"mib": 0.0, "uss": 0.0, "procs": 0, "objects": 0})
        after = end["kinds"].get(kind, {"mib": 0.0, "uss": 0.0, "procs": 0, "objects": 0})
        grow = after["mib"] - before["mib"]
        entry = {"procs": [before["procs"], after["procs"]], "warm_mib": round(before["mib"], 1),
                 "end_mib": round(after["mib"], 1), "growth_mib": round(grow, 1),
                 "growth_pct": round(100 * grow / before["mib"], 1) if before["mib"] > 0 else None,
                 "uss_growth_mib": round(after["uss"] - before["uss"], 1)}
        if kind == OBJECT_STORE:
            entry["objects"] = [before["objects"], after["objects"]]
            entry["warm_mib"], entry["end_mib"], entry["growth_mib"] = (round(before["mib"], 3),
                                                                          round(after["mib"], 3), round(grow, 3))
        kinds[kind] = entry
    peak = max(sum(v["mib"] for k, v in s["kinds"].items() if k != OBJECT_STORE) for s in ordered)
    return {"samples": len(ordered), "warm_end": {"t_s": warm["t_s"], "env_steps": warm["env_steps"]},
            "end": {"t_s": end["t_s"], "env_steps": end["env_steps"]}, "peak_tree_rss_mib": round(peak, 1),
            "kinds": kinds}


def markdown(run: dict[str, Any]) -> str:
    summary = run["summary"]
    warm, end = summary["warm_end"], summary["end"]
    lines = [f"**{run['algo']}** ({run['framework']}): warm-up end at {warm['env_steps']:,} env steps "
             f"({warm['t_s']:.0f} s), end at {end['env_steps']:,} ({end['t_s']:.0f} s); "
             f"{summary['samples']} samples"
             + ("" if run["stopped_by"] == "steps" else f"; stopped by --max-wall before {run['steps']:,} steps"),
             "",
             "| process kind | processes | RSS at warm-up end (MiB) | RSS at end (MiB) | growth (MiB) | growth (%) "
             "| USS growth (MiB) |",
             "|---|---|---|---|---|---|---|"]
    for kind, entry in summary["kinds"].items():
        procs = entry["procs"]
        procs_text = str(procs[0]) if procs[0] == procs[1] else f"{procs[0]} → {procs[1]}"
        pct = "—" if entry["growth_pct"] is None else f"{entry['growth_pct']:+.1f}"
        if kind == OBJECT_STORE:
            objects = entry["objects"]
            lines.append(f"| object store (used) | {objects[0]} → {objects[1]} objects | {entry['warm_mib']:.2f} | "
                         f"{entry['end_mib']:.2f} | {entry['growth_mib']:+.2f} | {pct} | — |")
        else:
            lines.append(f"| {kind} | {procs_text} | {entry['warm_mib']:.1f} | {entry['end_mib']:.1f} | "
                         f"{entry['growth_mib']:+.1f} | {pct} | {entry['uss_growth_mib']:+.1f} |")
    return "\n".join(lines)


def report(args: argparse.Namespace) -> None:
    """The tables of runs already made (their CSVs under ``--out``)."""
    tables = []
    for algo in [a.strip().upper() for a in args.algos.split(",") if a.strip()]:
        csv_path = Path(args.out) / f"{algo.lower()}-{args.framework}.csv"
        if not csv_path.exists():
            continue
        summary = summarise(csv_path, args.steps)
        run = {"algo": algo, "framework": args.framework, "steps": args.steps, "summary": summary,
               "stopped_by": "steps" if summary["end"]["env_steps"] >= args.steps else "max_wall"}
        tables.append(markdown(run))
    print("\n\n".join(tables))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--algos", default="PPO,IMPALA,APEX")
    parser.add_argument("--framework", default="torch", choices=["torch", "tf"])
    parser.add_argument("--interval", type=float, default=10.0)
    parser.add_argument("--out", default="/tmp/soak")
    parser.add_argument("--max-wall", type=float, default=None, help="seconds of training per algorithm")
    parser.add_argument("--tracemalloc", action="store_true")
    parser.add_argument("--report", action="store_true",
                        help="only print the tables of the CSVs already in --out (of --algos, --framework, --steps)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    if args.report:
        report(args)
        return
    algos = [a.strip().upper() for a in args.algos.split(",") if a.strip()]
    unknown = [a for a in algos if a not in TUNED]
    if unknown:
        parser.error(f"unknown algorithm(s) {unknown} in --algos; available: {', '.join(TUNED)}")
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "RAY_AUTH_MODE": "disabled"}
    tables = []
    for algo in algos:
        cmd = [sys.executable, __file__, "--child", algo, "--steps", str(args.steps), "--framework", args.framework,
               "--interval", str(args.interval), "--out", args.out, *(["--tracemalloc"] if args.tracemalloc else []),
               *(["--max-wall", str(args.max_wall)] if args.max_wall is not None else [])]
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        run_lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("SOAK-RUN ")]
        if proc.returncode != 0 or not run_lines:
            sys.stderr.write(proc.stderr[-4000:])
            raise SystemExit(f"soak run of {algo} failed (exit {proc.returncode})")
        run = json.loads(run_lines[-1][len("SOAK-RUN "):])
        run["steps"] = args.steps
        run["summary"] = summarise(Path(run["csv"]), args.steps)
        run["max_growth_pct"] = max((e["growth_pct"] or 0.0) for k, e in run["summary"]["kinds"].items()
                                    if k != OBJECT_STORE)
        print(json.dumps(run), flush=True)
        tables.append(markdown(run))
    print()
    print("\n\n".join(tables))


if __name__ == "__main__":
    main()
