"""A script or notebook that ends without trainer.stop() exits quietly: trainers still
running at interpreter exit stop their workers before Ray shuts down."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    from rlstack.evaluation.worker_set import WorkerSet
    from rlstack.trainers.ppo import PPOTrainer

    stop = WorkerSet.stop
    def announced_stop(self):
        print("workers stopped", flush=True)
        stop(self)
    WorkerSet.stop = announced_stop

    trainer = PPOTrainer({"num_workers": 1, "train_batch_size": 400, "sgd_minibatch_size": 100,
                          "num_sgd_iter": 1}, "CartPole-v1")
    print("trained", trainer.train()["timesteps_total"], flush=True)
    other = PPOTrainer({"num_workers": 0, "train_batch_size": 200}, "CartPole-v1")
    other.stop()                         # stopped by the script: not stopped again at exit
    print("end of script", flush=True)   # no trainer.stop() for the first one
""")


def test_a_script_that_never_stops_its_trainer_exits_quietly():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0] == "trained 400"
    # The second trainer's stop() during the script, then the first one's at exit.
    assert lines[1:] == ["workers stopped", "end of script", "workers stopped"], done.stdout
    for trouble in ("Traceback", "Check failed", "was not stored", "Error"):
        assert trouble not in done.stderr, done.stderr[-3000:]
