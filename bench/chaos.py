"""Chaos runs: training under repeated worker kills and env errors, against a clean run.

    python bench/chaos.py [--minutes 10] [--kill-every 30] [--env-error-every 2000] [--target 150]
                          [--algorithms PPO,IMPALA] [--framework torch] [--seed 0] [--json out.json]

For each algorithm, with the tuned example's config (``tune_configs/cartpole-<algo>.yaml``:
2 rollout workers on CartPole-v1) plus ``recreate_failed_workers: True`` and
``restart_failed_sub_environments: True`` (and, for IMPALA, a report every 2,000 sampled
steps rather than every 10 s, see ``REPORTING``):

* **clean run**: trains until ``episode_reward_mean >= --target`` (or ``--max-steps``) and
  records the env steps it took;
* **chaos run** of ``--minutes``: every ``--kill-every`` seconds a thread picks a rollout
  worker at random and ``os.kill(pid, SIGKILL)``s its OS process (not ``ray.kill``: the
  process dies as it would from the OOM killer). The pids come from the actors
  themselves (``worker.apply(os.getpid)``), asked again after every iteration for a
  worker that was recreated; a pid is only killed while ``/proc/<pid>/cmdline`` still
  names a RolloutWorker. Meanwhile every env step raises with probability
  ``1 / --env-error-every`` (seeded per worker process), so some sub-env of some worker
  raises every ``--env-error-every`` env steps on average. When the time is up the
  killer stops and one more iteration runs, so the last kill is seen. A checkpoint is
  saved after every iteration; afterwards each one is loaded into a fresh trainer
  (``Trainer.from_checkpoint``, no remote workers) which must report the checkpoint's
  iteration and compute a valid action.

Every env counts its steps and the errors it raised in a memory-mapped file (which a
killed process cannot take back), so "env steps taken" includes steps lost with a killed
worker or a dropped fragment; "env steps sampled" is ``timesteps_total``, what reached
the driver. Prints one JSON document (the figures) and the Markdown table for
RELIABILITY.md. Not part of ``make test``.
"""

from __future__ import annotations

import argparse
import datetime
import faulthandler
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import gymnasium as gym
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from harness import tuned_example  # noqa: E402

ENV_NAME = "chaos_cartpole"
TUNED = {"PPO": "cartpole-ppo.yaml", "IMPALA": "cartpole-impala.yaml"}
# IMPALA reports every 10 s by default (~45,000 env steps here), too coarse to measure the
# steps to the bar; a report every 2,000 sampled steps changes what is measured, not how
# it learns. PPO reports after each train batch (4,000 steps).
REPORTING = {"IMPALA": {"min_time_s_per_reporting": 0, "min_sample_timesteps_per_reporting": 2000}}

# Per worker process and run: the step/error counter file and the error RNG, shared by
# every sub-env of the worker (and by the sub-envs rebuilt after an error). Keyed by
# (count_dir, pid): this module runs as __main__, so cloudpickle ships the dict by value
# with the env creator, holding whatever the driver had put in it.
_PROCESS: dict[tuple[str, int], dict] = {}


class InjectedEnvError(RuntimeError):
    """The error a chaos env raises from ``step``."""


def _process_state(config: dict, worker_index: int) -> dict:
    key = (config["count_dir"], os.getpid())
    if key not in _PROCESS:
        count_dir = Path(config["count_dir"])
        # The incarnation (how many processes of this worker index came before) seeds the
        # RNG, so a recreated worker does not replay its predecessor's errors.
        incarnation = len(list(count_dir.glob(f"w{worker_index}_*.cnt")))
        path = count_dir / f"w{worker_index}_{incarnation}_{os.getpid()}.cnt"
        counts = np.memmap(path, dtype=np.int64, mode="w+", shape=(3,))  # [steps taken, errors raised, envs built]
        seed = np.random.SeedSequence([config.get("seed", 0), worker_index, incarnation])
        _PROCESS[key] = {"counts": counts, "rng": np.random.default_rng(seed)}
    return _PROCESS[key]


class ChaosCartPole(gym.Wrapper):
    """CartPole-v1 whose ``step`` raises :class:`InjectedEnvError` with probability
    ``1 / env_config["error_every"]`` (0: never), counting steps and errors per process."""

    def __init__(self, env_context):
        super().__init__(gym.make("CartPole-v1"))
        self.worker_index = getattr(env_context, "worker_index", 0)
        self.error_every = env_context.get("error_every", 0)
        self.state = _process_state(dict(env_context), self.worker_index)
        self.state["counts"][2] += 1  # a sub-env rebuilt after an error is built here too

    def step(self, action):
        counts = self.state["counts"]
        if self.error_every and self.state["rng"].random() < 1.0 / self.error_every:
            counts[1] += 1
            raise InjectedEnvError(f"chaos: injected env error in worker {self.worker_index}")
        out = self.env.step(action)
        counts[0] += 1
        return out


def env_counts(count_dir: str, envs_per_worker: int = 1) -> tuple[int, int, int]:
    """(env steps taken, env errors raised, sub-envs rebuilt) by every env process that
    wrote to ``count_dir`` (rebuilt: envs built beyond each process's first ``envs_per_worker``)."""
    steps = errors = rebuilt = 0
    for path in Path(count_dir).glob("*.cnt"):
        counts = np.memmap(path, dtype=np.int64, mode="r", shape=(3,))
        steps, errors = steps + int(counts[0]), errors + int(counts[1])
        rebuilt += max(0, int(counts[2]) - envs_per_worker)
    return steps, errors, rebuilt


def _getpid(worker) -> int:  # runs in the worker (RolloutWorker.apply)
    return os.getpid()


def is_rollout_worker(pid: int) -> bool:
    """Whether ``pid`` is still a Ray RolloutWorker process (guards against a reused pid)."""
    try:
        return b"RolloutWorker" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


class Killer(threading.Thread):
    """SIGKILLs a random rollout worker's process every ``every`` seconds.

    ``pids`` (position -> pid) is filled by the main thread (:meth:`refresh`); a killed
    worker's entry is removed until its replacement's pid is known, and a kill whose
    turn comes while no pid is known waits for one (it is delayed, never skipped).
    """

    def __init__(self, every: float, seed: int) -> None:
        super().__init__(daemon=True, name="chaos-killer")
        self.every = every
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.pids: dict[int, int] = {}
        self.known: dict[int, object] = {}  # position -> actor id whose pid is (or was) in pids
        self.kills: list[dict] = []
        self.stale = 0  # picked pids that were no longer a RolloutWorker
        self.done = threading.Event()
        self.start_time = time.monotonic()

    def refresh(self, trainer, timeout: float = 60.0) -> None:
        import ray

        for position, handle in enumerate(trainer.workers.remote_workers()):
            actor_id = handle._actor_id
            if self.known.get(position) == actor_id:
                continue
            try:
                pid = ray.get(handle.apply.remote(_getpid), timeout=timeout)
            except Exception:  # noqa: BLE001 - died before answering: its successor is asked next time
                continue
            with self.lock:
                self.known[position] = actor_id
                self.pids[position] = pid

    def run(self) -> None:
        due = self.start_time + self.every
        while not self.done.wait(max(0.0, due - time.monotonic())):
            while not self.done.is_set():
                with self.lock:
                    candidates = sorted(self.pids.items())
                    if candidates:
                        position, pid = self.rng.choice(candidates)
                        del self.pids[position]
                if not candidates:
                    self.done.wait(0.5)
                    continue
                if not is_rollout_worker(pid):
                    self.stale += 1
                    continue
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    self.stale += 1
                    continue
                self.kills.append({"t": round(time.monotonic() - self.start_time, 1), "worker": position + 1,
                                   "pid": pid})
                break
            due += self.every


def base_config(algorithm: str, framework: str, seed: int) -> dict:
    experiment = tuned_example(TUNED[algorithm])
    config = dict(experiment.get("config") or {})
    config.update(framework=framework, seed=seed, num_workers=2, recreate_failed_workers=True,
                  restart_failed_sub_environments=True, **REPORTING.get(algorithm, {}))
    return config


def make_trainer(algorithm: str, config: dict, env_config: dict):
    from rlstack.trainers.common.registry import get_trainer_class

    return get_trainer_class(algorithm)({**config, "env_config": env_config}, ENV_NAME)


def clean_run(algorithm: str, config: dict, args) -> dict:
    count_dir = tempfile.mkdtemp(prefix="rlstack_chaos_clean_")
    trainer = make_trainer(algorithm, config, {"count_dir": count_dir, "error_every": 0, "seed": args.seed})
    start, result = time.perf_counter(), {}
    try:
        while True:
            result = trainer.train()
            if result["episode_reward_mean"] >= args.target or result["timesteps_total"] >= args.max_steps:
                break
    finally:
        trainer.stop()
    taken = env_counts(count_dir)[0]
    reached = result["episode_reward_mean"] >= args.target
    return {"reached": reached, "return": round(float(result["episode_reward_mean"]), 1),
            "iterations": result["training_iteration"], "steps_sampled": result["timesteps_total"],
            "steps_taken": taken, "wall_s": round(time.perf_counter() - start, 1)}


def chaos_run(algorithm: str, config: dict, args) -> dict:
    count_dir = tempfile.mkdtemp(prefix="rlstack_chaos_")
    checkpoint_root = tempfile.mkdtemp(prefix="rlstack_chaos_ckpt_")
    trainer = make_trainer(algorithm, config, {"count_dir": count_dir, "error_every": args.env_error_every,
                                               "seed": args.seed})
    killer = Killer(args.kill_every, args.seed)
    killer.refresh(trainer)
    run = {"iterations_run": 0, "iterations_reported": 0, "reported_in_order": True, "error": None,
           "checkpoints": [], "reach": None, "min_healthy_workers": 2, "max_iteration_s": 0.0, "timeline": []}
    result: dict = {}
    start = time.perf_counter()
    killer.start()
    last = False
    try:
        while True:
            if time.perf_counter() - start >= 60 * args.minutes and not last:
                # Time is up: no more kills, and one more iteration so that the last is seen.
                killer.done.set()
                last = True
            run["iterations_run"] += 1
            # A hang prints every thread's stack (and the run goes on waiting, to be seen).
            faulthandler.dump_traceback_later(args.hang_s, exit=False)
            began = time.perf_counter()
            result = trainer.train()
            faulthandler.cancel_dump_traceback_later()
            took = round(time.perf_counter() - began, 1)
            run["max_iteration_s"] = max(run["max_iteration_s"], took)
            run["timeline"].append([round(began - start, 1), took, result["timesteps_total"],
                                    round(float(result["episode_reward_mean"]), 1),
                                    result["num_remote_worker_restarts"], result["num_env_restarts"]])
            run["iterations_reported"] += 1
            if result["training_iteration"] != run["iterations_reported"]:
                run["reported_in_order"] = False
            run["min_healthy_workers"] = min(run["min_healthy_workers"], result["num_healthy_workers"])
            if run["reach"] is None and result["episode_reward_mean"] >= args.target:
                run["reach"] = {"steps_sampled": result["timesteps_total"], "steps_taken": env_counts(count_dir)[0],
                                "iteration": result["training_iteration"],
                                "wall_s": round(time.perf_counter() - start, 1)}
            run["checkpoints"].append((result["training_iteration"],
                                       trainer.save(os.path.join(checkpoint_root,
                                                                 f"checkpoint_{result['training_iteration']:06d}"))))
            if last:
                break
            killer.refresh(trainer)
    except Exception as exc:  # noqa: BLE001 - what broke is the finding
        faulthandler.cancel_dump_traceback_later()
        run["error"] = f"{type(exc).__name__}: {str(exc)[:400]}"
    finally:
        killer.done.set()
        killer.join()
        run["wall_s"] = round(time.perf_counter() - start, 1)
        trainer.stop()
    time.sleep(1.0)  # let the last steps of killed and stopped workers land in their counters
    taken, errors, rebuilt = env_counts(count_dir, config.get("num_envs_per_worker", 1))
    run.update(kills=len(killer.kills), kill_log=killer.kills, stale_pids=killer.stale, env_errors=errors,
               envs_rebuilt=rebuilt, worker_processes=len(list(Path(count_dir).glob("*.cnt"))),
               steps_taken=taken, steps_sampled=result.get("timesteps_total", 0),
               worker_restarts=result.get("num_remote_worker_restarts", 0),
               env_restarts=result.get("num_env_restarts", 0),
               final_return=round(float(result.get("episode_reward_mean", float("nan"))), 1))
    run["checkpoints_loadable"], run["checkpoint_failures"], run["checkpoint_check_s"] = check_checkpoints(
        algorithm, run.pop("checkpoints"), args)
    run["checkpoints_total"] = run["iterations_reported"]
    return run


def check_checkpoints(algorithm: str, checkpoints: list, args) -> tuple[int, list[str], float]:
    """Loads each checkpoint into a fresh trainer (no remote workers, no faults) that must
    report the checkpoint's iteration and compute a valid action."""
    from rlstack.trainers.common.registry import get_trainer_class

    cls = get_trainer_class(algorithm)
    env_config = {"count_dir": tempfile.mkdtemp(prefix="rlstack_chaos_check_"), "error_every": 0}
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=args.seed)
    ok, failures, start = 0, [], time.perf_counter()
    for iteration, path in checkpoints:
        trainer = None
        try:
            trainer = cls.from_checkpoint(path, config_overrides={"num_workers": 0, "env_config": env_config})
            action = trainer.compute_single_action(obs, explore=False)
            if trainer.iteration != iteration:
                raise AssertionError(f"restored iteration {trainer.iteration}, saved at {iteration}")
            if not env.action_space.contains(int(action)):
                raise AssertionError(f"action {action!r} outside {env.action_space}")
            ok += 1
        except Exception as exc:  # noqa: BLE001 - counted and reported
            failures.append(f"{path}: {type(exc).__name__}: {str(exc)[:200]}")
        finally:
            if trainer is not None:
                trainer.stop()
    return ok, failures, round(time.perf_counter() - start, 1)


def _fmt(n) -> str:
    return f"{n:,}" if isinstance(n, int) else str(n)


def markdown(rows: list[dict], args) -> str:
    lines = [
        "| algorithm | worker kills (SIGKILL) | env errors injected | workers recreated | sub-envs restarted: "
        "`num_env_restarts` (rebuilt, counted by the envs) | iterations reported / run | clean run: env steps to the bar (taken) | chaos run: env steps to the bar "
        "(taken) | chaos / clean | checkpoints loadable |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        clean, chaos = row["clean"], row["chaos"]
        if chaos["reach"] and clean["reached"]:
            ratio = f"{chaos['reach']['steps_sampled'] / clean['steps_sampled']:.2f}"
            chaos_steps = f"{_fmt(chaos['reach']['steps_sampled'])} ({_fmt(chaos['reach']['steps_taken'])})"
        else:
            ratio, chaos_steps = "—", "not reached"
        clean_steps = (f"{_fmt(clean['steps_sampled'])} ({_fmt(clean['steps_taken'])})" if clean["reached"]
                       else f"not reached in {_fmt(clean['steps_sampled'])}")
        broke = f" — stopped: {chaos['error']}" if chaos["error"] else ""
        lines.append(
            f"| {row['algorithm']} | {chaos['kills']} | {_fmt(chaos['env_errors'])} | {chaos['worker_restarts']} "
            f"| {_fmt(chaos['env_restarts'])} ({_fmt(chaos['envs_rebuilt'])}) | {chaos['iterations_reported']} / {chaos['iterations_run']}{broke} "
            f"| {clean_steps} | {chaos_steps} | {ratio} "
            f"| {chaos['checkpoints_loadable']} of {chaos['checkpoints_total']} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="length of each chaos run")
    parser.add_argument("--kill-every", type=float, default=30.0, help="seconds between worker kills")
    parser.add_argument("--env-error-every", type=float, default=2000.0, help="mean env steps between env errors")
    parser.add_argument("--target", type=float, default=150.0, help="episode_reward_mean the runs are measured to")
    parser.add_argument("--max-steps", type=int, default=500_000, help="a clean run gives up after this many steps")
    parser.add_argument("--algorithms", default="PPO,IMPALA")
    parser.add_argument("--framework", default="torch", choices=["torch", "tf"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--hang-s", type=float, default=300.0, help="an iteration this long dumps every stack")
    parser.add_argument("--json", help="also write the figures here")
    parser.add_argument("--table", nargs="+", metavar="JSON", help="only print the table of earlier --json files")
    args = parser.parse_args()
    if args.table:
        reports = [json.loads(Path(path).read_text()) for path in args.table]
        print(markdown([row for report in reports for row in report["rows"]], args))
        return

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    from rlstack.env.registry import register_env
    from rlstack.trainers.common.ray_start import init_local_ray

    init_local_ray(num_cpus=max(2, os.cpu_count() or 1), include_dashboard=False, log_to_driver=False)
    register_env(ENV_NAME, lambda ctx: ChaosCartPole(ctx))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    rows = []
    for algorithm in args.algorithms.split(","):
        config = base_config(algorithm, args.framework, args.seed)
        row = {"algorithm": algorithm, "clean": clean_run(algorithm, config, args)}
        print(json.dumps(row), file=sys.stderr, flush=True)
        row["chaos"] = chaos_run(algorithm, config, args)
        print(json.dumps(row), file=sys.stderr, flush=True)
        rows.append(row)
    report = {"benchmark": "chaos", "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="minutes"),
              "commit": commit, "cpus": os.cpu_count(), "args": vars(args), "rows": rows}
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    print(json.dumps(report))
    print(markdown(rows, args))


if __name__ == "__main__":
    main()
