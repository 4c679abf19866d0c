"""Node loss on a simulated 3-node Ray cluster (Ray's own ``ray.cluster_utils.Cluster``:
three raylets on this machine, every one on 127.0.0.1, 1 CPU each).

- ``placement_strategy: "SPREAD"`` puts a trainer's rollout workers on different nodes
  (PPO, IMPALA), read from each worker actor's node id.
- Removing a node mid-run (a pre-emption: its processes are SIGKILLed) costs the workers
  on it; with ``recreate_failed_workers`` they come back on the nodes that are left and
  training goes on with the full worker count.
- A Tune trial with ``max_failures`` survives losing the node its trainable (the driver
  of its trainer) ran on: it resumes from its last checkpoint elsewhere and ends
  TERMINATED with its planned iterations.

The cluster is this module's own: a Ray the session already runs (``ray_local``) is shut
down first and started again, as conftest.py starts it, when the module ends.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import ray
from ray._private import ray_constants
from ray.cluster_utils import Cluster
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from ray import tune

from rlstack.trainers.callbacks import DefaultCallbacks
from rlstack.trainers.impala import IMPALATrainer
from rlstack.trainers.ppo import PPOTrainer

LOOPBACK = "127.0.0.1"
NODE = {"num_cpus": 1, "node_ip_address": LOOPBACK}
# Ray's default health checks (a raylet is dead after 5 missed checks 3 s apart): shorter
# ones declare live raylets of a busy 2-core machine dead.
HEAD = {**NODE, "include_dashboard": False}

SMALL_MODEL = {"fcnet_hiddens": [16]}
# Half a CPU per worker: both workers would fit on one node, so only SPREAD separates them.
SPREAD = {"num_workers": 2, "num_cpus_per_worker": 0.5, "placement_strategy": "SPREAD",
          "recreate_failed_workers": True, "seed": 0, "model": SMALL_MODEL}
CONFIGS = {
    "PPO": (PPOTrainer, {**SPREAD, "rollout_fragment_length": 50, "train_batch_size": 100,
                         "sgd_minibatch_size": 50, "num_sgd_iter": 1}),
    "IMPALA": (IMPALATrainer, {**SPREAD, "rollout_fragment_length": 50, "train_batch_size": 100,
                               "min_time_s_per_reporting": 0, "min_sample_timesteps_per_reporting": 100}),
}

# The module's cluster, for the Tune callback (which Tune pickles with its run config).
_STATE: dict = {}


@pytest.fixture(scope="module")
def cluster():
    was_running = ray.is_initialized()
    if was_running:
        ray.shutdown()
    # Ray turns a 127.0.0.1 address into the machine's routable IP (where nothing of this
    # loopback cluster listens) unless ENABLE_RAY_CLUSTER is false: as init_local_ray does,
    # keep it false while the nodes start and the driver connects.
    enable_cluster = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    cluster = None
    try:
        cluster = Cluster(initialize_head=True, head_node_args=HEAD)
        for _ in range(2):
            cluster.add_node(**NODE)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False)
        _STATE["cluster"] = cluster
        yield cluster
    finally:
        _STATE.clear()
        ray.shutdown()
        if cluster is not None:
            cluster.shutdown()
        ray_constants.ENABLE_RAY_CLUSTER = enable_cluster
        if was_running:  # the session's shared Ray, as tests/conftest.py starts it
            from rlstack.trainers.common.ray_start import init_local_ray

            init_local_ray(num_cpus=2, include_dashboard=False, log_to_driver=False)


@pytest.fixture
def three_nodes(cluster):
    """The cluster with its 3 nodes (a node an earlier test removed is replaced)."""
    while len(cluster.worker_nodes) < 2:
        cluster.add_node(**NODE)
    cluster.wait_for_nodes()
    return cluster


def _alive_nodes() -> set[str]:
    return {node["NodeID"] for node in ray.nodes() if node["Alive"]}


def _worker_nodes(trainer) -> list[str]:
    """The node id of each remote rollout worker, by position."""
    return ray.get([worker.apply.remote(lambda w: ray.get_runtime_context().get_node_id())
                    for worker in trainer.workers.remote_workers()])


def _preempt(cluster, node_id: str) -> None:
    """Removes the node as a cloud pre-emption does: its processes get SIGTERM (the raylet
    then tells the head it is going), whatever still runs after that SIGKILL."""
    node = next(node for node in cluster.worker_nodes if node.node_id == node_id)
    cluster.remove_node(node, allow_graceful=True)
    deadline = time.monotonic() + 60
    while node_id in _alive_nodes():  # until the head has missed its health checks
        assert time.monotonic() < deadline, f"node {node_id} still alive 60 s after its removal"
        time.sleep(0.2)


@pytest.mark.parametrize("algorithm", list(CONFIGS))
def test_spread_workers_survive_the_loss_of_a_node(three_nodes, algorithm):
    cluster = three_nodes
    trainer_class, config = CONFIGS[algorithm]
    trainer = trainer_class(config, "CartPole-v1")
    try:
        # SPREAD: two workers, two nodes (PACK would put both half-CPU workers on one).
        nodes = _worker_nodes(trainer)
        assert len(set(nodes)) == 2 and set(nodes) <= _alive_nodes(), nodes
        result = trainer.train()
        assert result["num_healthy_workers"] == 2

        # Pre-empt a node that holds a worker (not the head: the driver lives there).
        head = cluster.head_node.node_id
        victim = next(node for node in nodes if node != head)
        lost = [position for position, node in enumerate(nodes) if node == victim]
        _preempt(cluster, victim)

        for _ in range(15):
            result = trainer.train()
            if result["num_remote_worker_restarts"] >= len(lost):
                break
        assert result["num_remote_worker_restarts"] == len(lost)
        assert result["num_healthy_workers"] == 2
        new_nodes = _worker_nodes(trainer)
        assert victim not in new_nodes and set(new_nodes) <= _alive_nodes(), new_nodes

        # Training goes on with both workers, and nothing else fails.
        before = result["timesteps_total"]
        for _ in range(2):
            result = trainer.train()
        assert result["timesteps_total"] > before
        assert result["num_healthy_workers"] == 2
        assert result["num_remote_worker_restarts"] == len(lost)
    finally:
        trainer.stop()


class _RecordNode(DefaultCallbacks):
    """Puts the node of the trainer (the Tune trial's actor) in each result."""

    def on_train_result(self, *, trainer, result, **kwargs):
        result["node_id"] = ray.get_runtime_context().get_node_id()


class _PreemptDriverNode(tune.Callback):
    """After the checkpoint of iteration ``preempt_after``, removes the node the
    trial's trainable runs on; records how the trial went on. (At module level: Tune
    pickles its callbacks, and by reference they leave the cluster behind.)"""

    def __init__(self, preempt_after: int):
        self.preempt_after = preempt_after
        self.nodes, self.preempted, self.recovered, self.final = [], [], [], []

    def on_trial_result(self, iteration, trials, trial, result, **info):
        self.nodes.append((result["training_iteration"], result["node_id"]))

    def on_checkpoint(self, iteration, trials, trial, checkpoint, **info):
        iteration_done, node = self.nodes[-1]
        if not self.preempted and iteration_done == self.preempt_after:
            _preempt(_STATE["cluster"], node)
            self.preempted.append(node)

    def on_trial_recover(self, iteration, trials, trial, **info):
        self.recovered.append(trial.trial_id)

    def on_experiment_end(self, trials, **info):
        self.final = [trial.status for trial in trials]


def test_tune_trial_survives_the_loss_of_its_driver_node(three_nodes, tmp_path):
    cluster = three_nodes
    iterations, preempt_after = 4, 2

    # The head's CPU is taken, so the trial (learner and its one worker, SPREAD) goes to
    # the two other nodes, which can be removed.
    head = cluster.head_node.node_id
    hold = ray.remote(num_cpus=1)(_Hold).options(
        scheduling_strategy=NodeAffinitySchedulingStrategy(head, soft=False)).remote()
    ray.get(hold.ready.remote())
    callback = _PreemptDriverNode(preempt_after)
    try:
        tuner = tune.Tuner(
            "PPO",
            param_space={**CONFIGS["PPO"][1], "env": "CartPole-v1", "num_workers": 1, "num_cpus_for_driver": 0.5,
                         "callbacks": _RecordNode},
            run_config=tune.RunConfig(
                stop={"training_iteration": iterations}, storage_path=str(tmp_path), name="node_loss", verbose=0,
                callbacks=[callback], failure_config=tune.FailureConfig(max_failures=1),
                checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=1)),
        )
        results = tuner.fit()
    finally:
        ray.kill(hold)
    assert not results.errors, results.errors
    result = results[0]
    assert len(callback.preempted) == 1 and callback.recovered, (callback.nodes, callback.recovered)
    assert callback.final == ["TERMINATED"]
    lost = callback.preempted[0]
    assert lost != head
    # It ran on elsewhere from the checkpoint of iteration 2, to its planned iteration.
    assert result.metrics["training_iteration"] == iterations
    assert result.metrics["iterations_since_restore"] == iterations - preempt_after
    assert result.metrics["node_id"] != lost and result.metrics["node_id"] in _alive_nodes()
    assert result.metrics["timesteps_total"] == iterations * CONFIGS["PPO"][1]["train_batch_size"]
    errors = (Path(result.path) / "error.txt").read_text()
    assert errors.count("Failure # ") == 1
    frame = result.metrics_dataframe
    assert list(frame["training_iteration"]) == list(range(1, iterations + 1))


class _Hold:
    """An actor that only holds its CPU."""

    def ready(self):
        return True
