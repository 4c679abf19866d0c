"""A Ray that the learning pool's runs of one kind share (tests/learning/pool.py: one for
the one-slot runs, one for the multi-slot runs).

``python -m tests.learning.ray_host NUM_CPUS`` starts a single-node Ray on 127.0.0.1 (as
every rlstack entry point does: ``init_local_ray``) with ``NUM_CPUS`` logical CPUs,
prints its address on one line, and keeps it up until its standard input closes: the
pool closes it when the runs of its kind are done, and the pipe also closes when the
pool's process dies, so no Ray outlives the session.

Each run then joins it with ``rlstack train --ray-address ADDRESS``, a user's command for
an existing cluster, and is spared a Ray start of its own: the daemons of a fresh Ray cost
~7 CPU s before its first trial (the dashboard and its agents, the log and autoscaler
monitors, two pre-started workers), more over a run that lasts minutes.
"""

from __future__ import annotations

import sys

import ray

from rlstack.trainers.ray_start import init_local_ray

START_ATTEMPTS = 3


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not argv[0].isdigit() or int(argv[0]) < 1:
        print("usage: python -m tests.learning.ray_host NUM_CPUS", file=sys.stderr)
        return 2
    for attempt in range(START_ATTEMPTS):
        try:
            init_local_ray(num_cpus=int(argv[0]), include_dashboard=False, log_to_driver=False)
            break
        except Exception as exc:  # noqa: BLE001 - Ray raises a bare Exception for this
            # Ray gives its raylet a fixed 30 s to register; at nice 19 on two cores
            # busy with the other tests that can run out ("The current node timed out
            # during startup"). The start is tried again; no run has used it yet.
            print(f"Ray start {attempt + 1} of {START_ATTEMPTS} failed: {exc}", file=sys.stderr, flush=True)
            ray.shutdown()
            if attempt + 1 == START_ATTEMPTS:
                return 1
    print(ray.get_runtime_context().gcs_address, flush=True)
    sys.stdin.read()  # returns once the pool closes the pipe, or dies
    ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
