"""WorkerSet: the driver's local RolloutWorker plus the remote ones, as Ray actors."""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable
from typing import Any

import ray

from rlstack.env.registry import registered_envs
from rlstack.evaluation.metrics import EpisodeStats
from rlstack.evaluation.rollout_worker import RolloutWorker, class_path
from rlstack.models.catalog import ModelCatalog
from rlstack.policies.policy import Policy
from rlstack.sample_batch import SampleBatch, concat_samples

logger = logging.getLogger(__name__)


def worker_resources(config: dict) -> dict[str, float]:
    """The Ray resources of one remote worker: ``{"CPU": .., "GPU": .., **custom}``
    (no GPU under ``_fake_gpus``, whose policies stay on the CPU)."""
    return {"CPU": config["num_cpus_per_worker"],
            "GPU": 0 if config.get("_fake_gpus") else config["num_gpus_per_worker"],
            **(config.get("custom_resources_per_worker") or {})}


class WorkerSet:
    """A local worker (the learner's policy) and ``num_workers`` remote rollout workers.

    With ``num_workers=0`` the local worker has envs and samples in the driver;
    otherwise it holds only the policy and the remote workers sample.

    Args:
        env_spec: The env (name, class or creator).
        policy_class: The policy class for the configured framework, or its import path
            ``"module:Class"`` (then the driver imports it only after starting the workers).
        config: The merged config these workers run with.
        num_workers: Number of remote workers.
        local_env: Give the local worker envs even when there are remote workers.
        name: What the workers are for, in logs and errors ("rollout", "evaluation").
        postprocess_fn: The algorithm's framework-free trajectory postprocessing, for
            workers that act in numpy.
        numpy_policy_class: Import path of the algorithm's numpy acting policy (None:
            ``NumpyPolicy``).
    """

    def __init__(
        self,
        env_spec: Any,
        policy_class: type[Policy] | str,
        config: dict,
        num_workers: int,
        local_env: bool = False,
        name: str = "rollout",
        postprocess_fn: Any = None,
        numpy_policy_class: str | None = None,
    ) -> None:
        self.config = config
        self.name = name
        self._remote_workers: list[Any] = []
        self._placement_group: Any = None
        if num_workers > 0:
            resources = worker_resources(config)
            options = {"num_cpus": resources.pop("CPU"), "num_gpus": resources.pop("GPU"),
                       "resources": resources or None, "max_concurrency": 1}
            remote_cls = ray.remote(RolloutWorker)
            registry, models = registered_envs(), ModelCatalog.registered_models()
            placements = self._placements(config, num_workers)
            # The class travels as an import path: a worker acting in numpy never imports it.
            self._remote_workers = [
                remote_cls.options(**options, scheduling_strategy=placements[i - 1]).remote(
                    env_spec, policy_class if isinstance(policy_class, str) else class_path(policy_class), config, worker_index=i, num_workers=num_workers,
                    env_registry=registry, model_registry=models, num_gpus=config["num_gpus_per_worker"],
                    postprocess_fn=postprocess_fn, numpy_policy_class=numpy_policy_class,
                )
                for i in range(1, num_workers + 1)
            ]
        spaces = None
        if num_workers > 0 and not local_env:
            # The driver holds no env: ask the first worker for the spaces (this also
            # waits until the workers are up, surfacing env construction errors here).
            spaces = ray.get(self._remote_workers[0].get_spaces.remote())
        self._local_worker = RolloutWorker(
            env_spec, policy_class, config, worker_index=0, num_workers=num_workers,
            spaces=spaces, num_gpus=config.get("num_gpus", 0) if name == "rollout" else 0,
            postprocess_fn=postprocess_fn, numpy_policy_class=numpy_policy_class,
        )
        if self._remote_workers:
            ray.get([w.ping.remote() for w in self._remote_workers])

    def _placements(self, config: dict, num_workers: int) -> list[Any]:
        """Where each remote worker goes: a bundle of a placement group.

        Under Tune the trial's placement group (``default_resource_request``: bundle 0 is
        the driver's, then one per rollout worker, then one per evaluation worker) is
        the current one; a standalone trainer makes its own for its workers, with
        ``placement_strategy``, so that SPREAD puts them on different nodes of a cluster.
        """
        from ray.util.placement_group import get_current_placement_group, placement_group, remove_placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        group = get_current_placement_group()
        if group is not None:
            first = 1 + (config["num_workers"] if self.name == "evaluation" else 0)
            if first + num_workers > group.bundle_count:
                # A placement group that is not ours: let Ray pick bundles in it.
                return [None] * num_workers
        else:
            group = placement_group([worker_resources(config) for _ in range(num_workers)],
                                    strategy=config["placement_strategy"])
            self._placement_group = group
            # Freed with the set even when nobody calls stop() (a dropped trainer).
            self._release_group = weakref.finalize(self, _remove_quietly, remove_placement_group, group)
            _wait_until_placed(group, config, num_workers, self.name)
            first = 0
        return [PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=first + i,
                                                 placement_group_capture_child_tasks=True)
                for i in range(num_workers)]

    def local_worker(self) -> RolloutWorker:
        """The worker in the driver process (its policy is the learner's)."""
        return self._local_worker

    def remote_workers(self) -> list[Any]:
        """Handles of the remote worker actors."""
        return list(self._remote_workers)

    @property
    def num_remote_workers(self) -> int:
        """How many remote workers the set has."""
        return len(self._remote_workers)

    def sample(self) -> list[SampleBatch]:
        """One ``sample()`` from every sampling worker, gathered in parallel."""
        if not self._remote_workers:
            return [self._local_worker.sample()]
        return ray.get([w.sample.remote() for w in self._remote_workers])

    def sync_weights(self, global_timestep: int | None = None) -> None:
        """Sends the local policy's weights to every remote worker.

        The weights go into the object store once and every worker reads that copy;
        the call returns without waiting (each worker applies them before its next
        ``sample``, since an actor runs its calls in order).
        """
        weights = self._local_worker.get_weights()
        self._local_worker.refresh_sampling_policy(weights)
        if not self._remote_workers:
            return
        weights_ref = ray.put(weights)
        for worker in self._remote_workers:
            worker.set_weights.remote(weights_ref, global_timestep)

    def sync_filters(self, broadcast: bool = True) -> None:
        """Merges what every worker's observation filter saw into the local filter and
        sends the merged statistics back to all of them.

        Args:
            broadcast: False (``synchronize_filters=False``) leaves each worker with its
                own statistics and only copies the first worker's into the local filter,
                which acting, evaluation and checkpoints use.
        """
        if not self._remote_workers or self.config["observation_filter"] == "NoFilter":
            return
        if not broadcast:
            self._local_worker.set_filter_state(ray.get(self._remote_workers[0].get_filter_state.remote()))
            return
        local_filter = self._local_worker.filter
        for buffer in ray.get([w.flush_filter.remote() for w in self._remote_workers]):
            local_filter.apply_buffer(buffer)
        state_ref = ray.put(local_filter.get_state())
        for worker in self._remote_workers:
            worker.set_filter_state.remote(state_ref)

    def set_filter_state(self, state: dict) -> None:
        """Sets the same filter statistics on every worker (after a restore)."""
        self._local_worker.set_filter_state(state)
        if self._remote_workers:
            ray.get([w.set_filter_state.remote(state) for w in self._remote_workers])

    def collect_episodes(self) -> list[EpisodeStats]:
        """Episodes every worker finished since the last call."""
        episodes = self._local_worker.get_metrics()
        if self._remote_workers:
            for worker_episodes in ray.get([w.get_metrics.remote() for w in self._remote_workers]):
                episodes.extend(worker_episodes)
        return episodes

    def sampler_perf(self) -> dict[str, float]:
        """Sampling time breakdown (ms per env step), averaged over the sampling workers."""
        if not self._remote_workers:
            return self._local_worker.get_sampler_perf()
        perfs = ray.get([w.get_sampler_perf.remote() for w in self._remote_workers])
        return {key: sum(p[key] for p in perfs) / len(perfs) for key in perfs[0]}

    def foreach_worker(self, func: Callable[[RolloutWorker], Any], local: bool = True) -> list[Any]:
        """Calls ``func(worker)`` on the local worker (if ``local``) and every remote one.

        Returns:
            The results, local worker's first.
        """
        results = [func(self._local_worker)] if local else []
        if self._remote_workers:
            results.extend(ray.get([w.apply.remote(func) for w in self._remote_workers]))
        return results

    def stop(self) -> None:
        """Closes the local envs and ends the remote worker actors."""
        self._local_worker.stop()
        for worker in self._remote_workers:
            try:
                ray.kill(worker)
            except Exception:  # noqa: BLE001 - the actor may already be gone
                pass
        self._remote_workers = []
        if self._placement_group is not None:
            self._release_group()
            self._placement_group = None


# How long a standalone trainer waits for its workers' placement group before it says why.
PLACEMENT_WARN_S = 30.0


def _wait_until_placed(group: Any, config: dict, num_workers: int, name: str) -> None:
    # An autoscaling cluster may need minutes to add nodes: wait, but say what is missing.
    while not group.wait(timeout_seconds=PLACEMENT_WARN_S):
        logger.warning(
            "Waiting for resources for %d %s workers (%s each, strategy %s); the cluster has %s in all and %s free. "
            "Lower num_workers / num_cpus_per_worker / num_gpus_per_worker, or add nodes.",
            num_workers, name, worker_resources(config), config["placement_strategy"],
            ray.cluster_resources(), ray.available_resources(),
        )


def _remove_quietly(remove: Callable[[Any], None], group: Any) -> None:
    try:
        if ray.is_initialized():
            remove(group)
    except Exception:  # noqa: BLE001 - Ray may be shutting down
        pass


def synchronous_parallel_sample(workers: WorkerSet, max_env_steps: int) -> SampleBatch:
    """Samples from every worker in rounds until at least ``max_env_steps`` steps.

    Args:
        workers: The worker set.
        max_env_steps: Steps to collect (``train_batch_size``).

    Returns:
        All the rounds' batches concatenated.
    """
    batches: list[SampleBatch] = []
    steps = 0
    while steps < max_env_steps:
        for batch in workers.sample():
            batches.append(batch)
            steps += batch.count
    return concat_samples(batches)
