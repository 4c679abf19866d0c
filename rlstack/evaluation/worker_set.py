"""WorkerSet: the driver's local RolloutWorker plus the remote ones, as Ray actors."""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

from rlstack.env.registry import registered_envs
from rlstack.errors import PlacementTimeoutError, WorkerFailureError
from rlstack.evaluation.metrics import EpisodeStats
from rlstack.evaluation.placement import remove_quietly, wait_until_placed, worker_resources, worker_start_error
from rlstack.evaluation.rollout_worker import RolloutWorker
from rlstack.evaluation.worker_policies import class_path, resolve_class
from rlstack.models.catalog import ModelCatalog
from rlstack.policies.policy import Policy
from rlstack.policies.policy_map import PolicySpec
from rlstack.sample_batch import MultiAgentBatch, SampleBatch, concat_samples

logger = logging.getLogger(__name__)

__all__ = ["WorkerSet", "synchronous_parallel_sample", "worker_resources", "worker_start_error"]



def config_spaces(env_spec: Any, config: dict) -> tuple[Any, Any] | None:
    """The ``(observation_space, action_space)`` of a trainer without an env (config
    ``env: None`` with ``observation_space`` and ``action_space``, its experience coming
    from an ``input``), else None: the spaces come from the env."""
    if env_spec is not None or config.get("observation_space") is None:
        return None
    return config["observation_space"], config["action_space"]

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
        remote_workers_learn: The remote workers compute gradients (A3C): they keep the
            framework policy, and act through a numpy copy of it where numpy acting applies.
        policy_specs: The multi-agent policies (see :class:`RolloutWorker`).
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
        remote_workers_learn: bool = False,
        policy_specs: dict[str, PolicySpec] | None = None,
    ) -> None:
        self.config = config
        self.name = name
        # The multi-agent policies a (re)created worker builds (add_policy / remove_policy change them).
        self.policy_specs = policy_specs
        self._remote_workers: list[Any] = []
        self._placement_group: Any = None
        # Fault tolerance: which workers are in use, failures in a row per worker, restarts.
        self._healthy: list[bool] = [True] * num_workers
        self._consecutive_failures: list[int] = [0] * num_workers
        self.num_remote_worker_restarts = 0
        self._global_timestep: int | None = None
        # What a recreated worker gets as weights (an ObjectRef or a dict); None: the local
        # worker's. Trainers with a learner thread point this at its consistent copy.
        self.restore_weights: Callable[[], Any] | None = None
        if num_workers > 0:
            resources = worker_resources(config)
            # No task events: Ray's GCS keeps those of the last 100k actor calls for the
            # dashboard's task table, so a long run's GCS grows by hundreds of MiB
            # (bench/soak.py, RELIABILITY.md). Failures are still raised.
            options = {"num_cpus": resources.pop("CPU"), "num_gpus": resources.pop("GPU"),
                       "resources": resources or None, "max_concurrency": 1, "enable_task_events": False}
            remote_cls = ray.remote(RolloutWorker)
            registry, models = registered_envs(), ModelCatalog.registered_models(config.get("model") or {})
            placements = self._placements(config, num_workers)
            # The class travels as an import path (a worker acting in numpy never imports
            # it), except one that no path reaches (defined in the driver's script or in a
            # function), which Ray sends by value.
            by_value = not isinstance(policy_class, str) and (
                policy_class.__module__ == "__main__" or "<locals>" in policy_class.__qualname__)
            policy_path = policy_class if isinstance(policy_class, str) or by_value else class_path(policy_class)

            def make_remote(position: int) -> Any:
                return remote_cls.options(**options, scheduling_strategy=placements[position]).remote(
                    env_spec, policy_path, config, worker_index=position + 1, num_workers=num_workers,
                    env_registry=registry, model_registry=models, num_gpus=config["num_gpus_per_worker"],
                    spaces=config_spaces(env_spec, config),
                    postprocess_fn=postprocess_fn, numpy_policy_class=numpy_policy_class,
                    learns=remote_workers_learn, policy_specs=self.policy_specs,
                )

            self._make_remote = make_remote
            self._remote_workers = [make_remote(position) for position in range(num_workers)]
        spaces = config_spaces(env_spec, config)
        try:
            # The driver's policy imports its framework (a second or more) while the
            # remote workers start, rather than after the first of them answers.
            policy_class = resolve_class(policy_class)
            if num_workers > 0 and not local_env and spaces is None:
                # The driver holds no env: ask the first worker for the spaces (by policy id
                # when multi-agent; this also waits until the workers are up, surfacing env
                # construction errors here).
                spaces = ray.get(self._remote_workers[0].get_spaces.remote())
            self._local_worker = RolloutWorker(
                env_spec, policy_class, config, worker_index=0, num_workers=num_workers,
                spaces=spaces, num_gpus=config.get("num_gpus", 0) if name == "rollout" else 0,
                postprocess_fn=postprocess_fn, numpy_policy_class=numpy_policy_class, policy_specs=policy_specs,
            )
            if self._remote_workers:
                ray.get([w.ping.remote() for w in self._remote_workers])
        except BaseException:
            # A set that never started frees its actors and reserved resources at once
            # (the next trainer on a small machine would otherwise wait for them).
            self._release_remote()
            raise

    def _placements(self, config: dict, num_workers: int) -> list[Any]:
        """Where each remote worker goes: a bundle of a placement group.

        Under Tune the trial's placement group (``default_resource_request``: bundle 0 is
        the driver's, then one per rollout worker, then one per evaluation worker) is
        the current one; a standalone trainer makes its own for its workers, with
        ``placement_strategy``, so that SPREAD puts them on different nodes of a cluster.
        """
        from ray.util.placement_group import get_current_placement_group, placement_group, remove_placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        if not any(amount > 0 for amount in worker_resources(config).values()):
            # A worker that asks for no resources (1.x's num_cpus_per_worker=0) needs no
            # reservation, and Ray refuses a bundle of nothing.
            return [None] * num_workers
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
            self._release_group = weakref.finalize(self, remove_quietly, remove_placement_group, group)
            try:
                wait_until_placed(group, config, num_workers, self.name)
            except PlacementTimeoutError:
                # Give the reserved part back now: the next trainer may need it.
                self._release_group()
                self._placement_group = None
                raise
            first = 0
        return [PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=first + i,
                                                 placement_group_capture_child_tasks=True)
                for i in range(num_workers)]

    def local_worker(self) -> RolloutWorker:
        """The worker in the driver process (its policy is the learner's)."""
        return self._local_worker

    def remote_workers(self) -> list[Any]:
        """Handles of the remote worker actors, by position (worker index - 1); a failed
        worker's stays in place (see :meth:`healthy_positions`), a recreated one's is new."""
        return list(self._remote_workers)

    @property
    def num_remote_workers(self) -> int:
        """How many remote workers the set was built with."""
        return len(self._remote_workers)

    @property
    def num_healthy_workers(self) -> int:
        """How many remote workers are in use (all but those dropped after a failure)."""
        return sum(self._healthy)

    def healthy_positions(self) -> list[int]:
        """Positions (worker index - 1) of the remote workers in use."""
        return [position for position, healthy in enumerate(self._healthy) if healthy]

    # ----- fault tolerance ----------------------------------------------------------------

    def fetch(self, ref: Any, position: int) -> tuple[bool, Any]:
        """``ray.get(ref)`` of a call to the worker at ``position``, surviving its failure.

        Returns:
            ``(True, value)``; or ``(False, None)`` after a failure that
            ``recreate_failed_workers`` / ``ignore_worker_failures`` let training survive
            (the worker is then new or out of use: calls still in flight to it are void),
            or for a call to a worker that an earlier failure already replaced (the new
            worker is left alone).

        Raises:
            WorkerFailureError: Without those keys, after too many failures in a row, or
                when no worker is left.
        """
        try:
            value = ray.get(ref)
        except (RayActorError, RayTaskError) as exc:
            if not self._replaced(position, exc):
                self.on_worker_failure(position, exc)
            return False, None
        self._consecutive_failures[position] = 0
        return True, value

    def _replaced(self, position: int, exc: BaseException) -> bool:
        # The call went to a worker that has already been replaced: its failure was seen
        # elsewhere first (a node lost, then noticed by a synchronous call such as
        # get_metrics while an async trainer still held the old worker's sample requests).
        # Handling it again would kill the healthy new worker at that position.
        dead = getattr(exc, "actor_id", None) if isinstance(exc, RayActorError) else None
        current = getattr(self._remote_workers[position], "_actor_id", None)
        return dead is not None and current is not None and dead != current.hex()

    def call_healthy(self, call: Callable[[Any], Any]) -> dict[int, Any]:
        """Runs ``call(handle)`` (which returns an ObjectRef) on every worker in use and
        gathers the results by position, handling failures as :meth:`fetch` does."""
        return self.call_each({position: call for position in self.healthy_positions()})

    def call_each(self, calls: dict[int, Callable[[Any], Any]]) -> dict[int, Any]:
        """Like :meth:`call_healthy`, with a call of its own for each position (positions
        out of use are skipped)."""
        refs = {position: call(self._remote_workers[position]) for position, call in calls.items()
                if self._healthy[position]}
        results = {}
        for position, ref in refs.items():
            ok, value = self.fetch(ref, position)
            if ok:
                results[position] = value
        return results

    def replace_requests(self, in_flight: dict[Any, Any], position: int, request: Callable[[int], None],
                         count: int) -> bool:
        """After the worker at ``position`` failed (:meth:`fetch` gave False): drops its
        requests from ``in_flight`` (ObjectRef -> its position, or a tuple starting with it)
        and, if it was recreated, issues ``count`` new ones with ``request(position)``.

        Returns:
            Whether the worker is in use again.
        """
        for ref in [ref for ref, value in in_flight.items()
                    if (value[0] if isinstance(value, tuple) else value) == position]:
            del in_flight[ref]
        if not self._healthy[position]:
            return False
        for _ in range(count):
            request(position)
        return True

    def on_worker_failure(self, position: int, exc: BaseException) -> None:
        """Deals with the failure of the worker at ``position``: recreates it, drops it, or
        raises, as the config says.

        Raises:
            WorkerFailureError: See :meth:`fetch`.
        """
        cfg = self.config
        index = position + 1
        cause = describe_failure(exc)
        fatal = fatal_cause(exc)
        if fatal is not None:
            # An error that a new worker would meet again (non-finite numbers from the env).
            raise fatal
        recreate, ignore = cfg.get("recreate_failed_workers"), cfg.get("ignore_worker_failures")
        if not (recreate or ignore):
            raise WorkerFailureError(
                f"{self.name.capitalize()} worker {index} of {len(self._remote_workers)} failed: {cause}. "
                "Set recreate_failed_workers=True to replace failed workers and go on, or "
                "ignore_worker_failures=True to go on without them."
            ) from exc
        self._consecutive_failures[position] += 1
        tolerance = cfg.get("num_consecutive_worker_failures_tolerance", 100)
        if self._consecutive_failures[position] > tolerance:
            raise WorkerFailureError(
                f"{self.name.capitalize()} worker {index} failed {self._consecutive_failures[position]} times in a "
                f"row (num_consecutive_worker_failures_tolerance={tolerance}); last cause: {cause}."
            ) from exc
        _kill_quietly(self._remote_workers[position])
        if recreate:
            logger.warning("%s worker %d failed (%s); recreating it.", self.name.capitalize(), index, cause)
            self._recreate(position, exc)
            return
        self._healthy[position] = False
        logger.warning("%s worker %d failed (%s); going on with %d of %d workers.", self.name.capitalize(), index,
                       cause, self.num_healthy_workers, len(self._remote_workers))
        if not any(self._healthy):
            raise WorkerFailureError(
                f"Every {self.name} worker has failed (the last, worker {index}: {cause}); "
                "ignore_worker_failures cannot go on without workers. Set recreate_failed_workers=True "
                "to replace them."
            ) from exc

    def _recreate(self, position: int, exc: BaseException) -> None:
        cfg = self.config
        handle = self._make_remote(position)
        try:
            ray.get(handle.ping.remote(), timeout=cfg.get("worker_health_probe_timeout_s", 60))
            weights = self.restore_weights() if self.restore_weights else self._local_worker.get_weights()
            refs = [handle.set_weights.remote(weights, self._global_timestep)]
            if self._local_worker.uses_filters():
                refs.append(handle.set_filter_state.remote(self._local_worker.get_filter_state()))
            ray.get(refs, timeout=cfg.get("worker_restore_timeout_s", 1800))
        except (RayActorError, RayTaskError, GetTimeoutError) as new_exc:
            _kill_quietly(handle)
            raise WorkerFailureError(
                f"Could not recreate {self.name} worker {position + 1} after it failed "
                f"({describe_failure(exc)}): the new one did not come up ({describe_failure(new_exc)}); "
                "check the env creator and the cluster's free resources, or raise worker_health_probe_timeout_s / "
                "worker_restore_timeout_s."
            ) from new_exc
        self._remote_workers[position] = handle
        self._healthy[position] = True
        self.num_remote_worker_restarts += 1

    # ----- sampling and syncing -------------------------------------------------------------

    def sample(self) -> list[SampleBatch | MultiAgentBatch]:
        """One ``sample()`` from every sampling worker, gathered in parallel (a worker that
        fails contributes nothing this round, see :meth:`fetch`)."""
        if not self._remote_workers:
            return [self._local_worker.sample()]
        return list(self.call_healthy(lambda w: w.sample.remote()).values())

    def sync_weights(self, global_timestep: int | None = None, policies: list[str] | None = None) -> None:
        """Sends the local policy's weights to every remote worker.

        The weights go into the object store once and every worker reads that copy;
        the call returns without waiting (each worker applies them before its next
        ``sample``, since an actor runs its calls in order).

        Args:
            global_timestep: Where the workers' schedules move to.
            policies: Multi-agent: the ids of the policies whose weights changed (those
                that learned); None: all. A single-agent set ignores it.
        """
        self._global_timestep = global_timestep
        if not self._remote_workers:
            # Only the driver's acting copies (which may read the weights in place).
            self._local_worker.refresh_sampling_policy()
            return
        weights = self._local_worker.get_weights(policies)
        self._local_worker.refresh_sampling_policy(weights)
        weights_ref = ray.put(weights)
        for position in self.healthy_positions():
            self._remote_workers[position].set_weights.remote(weights_ref, global_timestep)

    def add_policy(self, policy_id: str, spec: PolicySpec, policy_mapping_fn: Any = None,
                   policies_to_train: Any = None) -> PolicySpec:
        """Builds policy ``policy_id`` on every worker in use, first on one with an env
        (which fills in spaces the spec leaves out), then on the others with those spaces.
        A worker's error (a space it cannot infer, a bad class) is raised as it is.

        Returns:
            The spec with its spaces, as every worker built it.
        """
        local, remote = self._local_worker, [self._remote_workers[p] for p in self.healthy_positions()]
        args = (policy_mapping_fn, policies_to_train)
        if local.async_env is None and remote:
            first = remote.pop(0)
            spaces = ray.get(first.add_policy.remote(policy_id, spec, *args))
            spec = spec._replace(observation_space=spaces[0], action_space=spaces[1])
            local.add_policy(policy_id, spec, *args)
        else:
            spaces = local.add_policy(policy_id, spec, *args)
            spec = spec._replace(observation_space=spaces[0], action_space=spaces[1])
        if remote:  # (ray.get of nothing would start Ray)
            ray.get([worker.add_policy.remote(policy_id, spec, *args) for worker in remote])
        self.policy_specs = dict(local.policies.specs)
        return spec

    def remove_policy(self, policy_id: str, policy_mapping_fn: Any = None, policies_to_train: Any = None) -> None:
        """Drops policy ``policy_id`` from every worker."""
        self._local_worker.remove_policy(policy_id, policy_mapping_fn, policies_to_train)
        positions = self.healthy_positions()
        if positions:  # (ray.get of nothing would start Ray)
            ray.get([self._remote_workers[position].remove_policy.remote(policy_id, policy_mapping_fn,
                                                                          policies_to_train) for position in positions])
        self.policy_specs = dict(self._local_worker.policies.specs)

    def sync_filters(self, broadcast: bool = True) -> None:
        """Merges what every worker's observation filter saw into the local filter and
        sends the merged statistics back to all of them.

        Args:
            broadcast: False (``synchronize_filters=False``) leaves each worker with its
                own statistics and only copies the first worker's into the local filter,
                which acting, evaluation and checkpoints use.
        """
        local = self._local_worker
        if not self._remote_workers or not local.uses_filters():
            return
        if not broadcast:
            states = self.call_healthy(lambda w: w.get_filter_state.remote())
            if states:
                local.set_filter_state(states[min(states)])
            return
        for buffer in self.call_healthy(lambda w: w.flush_filter.remote()).values():
            local.apply_filter_buffer(buffer)
        state_ref = ray.put(local.get_filter_state())
        for position in self.healthy_positions():
            self._remote_workers[position].set_filter_state.remote(state_ref)

    def set_filter_state(self, state: dict) -> None:
        """Sets the same filter statistics on every worker (after a restore)."""
        self._local_worker.set_filter_state(state)
        if self._remote_workers:
            self.call_healthy(lambda w: w.set_filter_state.remote(state))

    def collect_episodes(self) -> list[EpisodeStats]:
        """Episodes every worker finished since the last call."""
        episodes = self._local_worker.get_metrics()
        if self._remote_workers:
            for worker_episodes in self.call_healthy(lambda w: w.get_metrics.remote()).values():
                episodes.extend(worker_episodes)
        return episodes

    def collect_off_policy_estimates(self) -> list[Any]:
        """Off-policy estimates every worker made since the last call (``input`` read
        with ``off_policy_estimation_methods``)."""
        estimates = self._local_worker.get_off_policy_estimates()
        if self._remote_workers:
            for worker_estimates in self.call_healthy(lambda w: w.get_off_policy_estimates.remote()).values():
                estimates.extend(worker_estimates)
        return estimates

    def collect_env_restarts(self) -> int:
        """Sub-env restarts on every worker since the last call."""
        restarts = self._local_worker.get_env_restarts()
        if self._remote_workers:
            restarts += sum(self.call_healthy(lambda w: w.get_env_restarts.remote()).values())
        return restarts

    def sampler_perf(self) -> dict[str, float]:
        """Sampling time breakdown (ms per env step), averaged over the sampling workers."""
        if not self._remote_workers:
            return self._local_worker.get_sampler_perf()
        perfs = list(self.call_healthy(lambda w: w.get_sampler_perf.remote()).values())
        if not perfs:
            return {}
        return {key: sum(p[key] for p in perfs) / len(perfs) for key in perfs[0]}

    def foreach_worker(self, func: Callable[[RolloutWorker], Any], local: bool = True) -> list[Any]:
        """Calls ``func(worker)`` on the local worker (if ``local``) and every remote one
        in use, as RLlib 1.13's ``WorkerSet.foreach_worker``.

        ``func`` travels to the remote workers by pickling (a lambda is fine) and runs
        there, e.g. ``workers.foreach_worker(lambda w: w.foreach_env(lambda env:
        env.set_task(task)))``.

        Returns:
            The results: the local worker's first, then the remote workers' by index.
        """
        results = [func(self._local_worker)] if local else []
        if self._remote_workers:
            results.extend(self.call_healthy(lambda w: w.apply.remote(func)).values())
        return results

    def foreach_worker_with_index(self, func: Callable[[RolloutWorker, int], Any]) -> list[Any]:
        """Calls ``func(worker, worker_index)`` on every worker: index 0 is the local
        worker, 1..N the remote ones.

        Returns:
            The results, local worker's first.
        """
        results = [func(self._local_worker, 0)]
        if self._remote_workers:
            results.extend(self.call_each({position: (lambda w, i=position + 1: w.apply.remote(func, i))
                                           for position in self.healthy_positions()}).values())
        return results

    def foreach_policy(self, func: Callable[..., Any]) -> list[Any]:
        """Calls ``func(policy, policy_id)`` on every worker's policies.

        The local worker's policy is the learner's; a remote worker acting in numpy
        (``rollout_inference="auto"`` with a built-in dense model) holds a
        :class:`~rlstack.policies.numpy_policy.NumpyPolicy` copy of it instead, so
        ``func`` should use what every policy offers (``get_weights``, the spaces,
        ``config``, ``compute_actions``).

        Returns:
            The results in one flat list, local worker's first (RLlib 1.13's layout).
        """
        return [result for results in self.foreach_worker(lambda w: w.foreach_policy(func)) for result in results]

    def foreach_env(self, func: Callable[[Any], Any]) -> list[list[Any]]:
        """Calls ``func(sub_env)`` on every sub-env of every worker.

        Returns:
            One list per worker (the local worker's first; ``[]`` when it has no envs),
            each with one result per sub-env.
        """
        return self.foreach_worker(lambda w: w.foreach_env(func))

    def foreach_env_with_context(self, func: Callable[[Any, Any], Any]) -> list[list[Any]]:
        """Calls ``func(sub_env, env_context)`` on every sub-env of every worker (see
        :meth:`foreach_env`)."""
        return self.foreach_worker(lambda w: w.foreach_env_with_context(func))

    def stop(self) -> None:
        """Closes the local envs and ends the remote worker actors."""
        self._local_worker.stop()
        self._release_remote()

    def _release_remote(self) -> None:
        for worker in self._remote_workers:
            _kill_quietly(worker)
        self._remote_workers = []
        self._healthy = []
        if self._placement_group is not None:
            self._release_group()
            self._placement_group = None


def describe_failure(exc: BaseException) -> str:
    """One line on why a worker call failed: the env's or policy's own exception, or how
    the actor died."""
    if isinstance(exc, RayTaskError):
        cause = getattr(exc, "cause", None)
        if cause is not None:
            return f"{type(cause).__name__}: {cause}"
    if isinstance(exc, RayActorError):
        return "its process died (" + str(exc).strip().splitlines()[0][:300] + ")"
    return f"{type(exc).__name__}: {exc}"


def fatal_cause(exc: BaseException) -> BaseException | None:
    """The exception inside ``exc`` that no recreated worker would avoid (an rlstack
    error marked ``fatal``, such as non-finite numbers from the env), else None."""
    cause = getattr(exc, "cause", None) if isinstance(exc, RayTaskError) else None
    if cause is not None and getattr(cause, "fatal", False):
        return cause
    return None


def _kill_quietly(handle: Any) -> None:
    try:
        ray.kill(handle, no_restart=True)
    except Exception:  # noqa: BLE001 - the actor may already be gone
        pass


def synchronous_parallel_sample(worker_set: WorkerSet, max_env_steps: int | None = None,
                                max_agent_steps: int | None = None, concat: bool = True,
                                ) -> SampleBatch | MultiAgentBatch | list[SampleBatch | MultiAgentBatch]:
    """Samples from every worker in rounds until at least ``max_env_steps`` env steps (or
    ``max_agent_steps`` agent steps: multi-agent ``count_steps_by: agent_steps``); with
    neither, one round (one ``sample()`` of each remote worker, or of the local one).

    Args:
        worker_set: The worker set.
        max_env_steps: Env steps to collect (``train_batch_size``).
        max_agent_steps: Agent steps to collect instead.
        concat: Return one batch (else the list of the workers' batches, as 1.13 did).

    Returns:
        All the rounds' batches concatenated (a MultiAgentBatch from multi-agent workers).
    """
    batches: list[SampleBatch | MultiAgentBatch] = []
    steps = 0
    target = max_env_steps if max_agent_steps is None else max_agent_steps
    while target is None or steps < target:
        for batch in worker_set.sample():
            batches.append(batch)
            steps += batch.count if max_agent_steps is None else batch.agent_steps()
        if target is None:
            break
    if worker_set.config.get("input", "sampler") != "sampler":
        batches = _common_columns(batches)
    return concat_samples(batches) if concat else batches


def _common_columns(batches: list[SampleBatch | MultiAgentBatch]) -> list[SampleBatch | MultiAgentBatch]:
    # Batches read from several sources (files of other recorders, the sampler in an input
    # mix) may hold different columns: keep those every batch has.
    if not batches or not all(isinstance(b, SampleBatch) for b in batches):
        return batches
    shared = set(batches[0]).intersection(*batches[1:])
    if all(len(b) == len(shared) for b in map(dict.keys, batches)):
        return batches
    return [SampleBatch({key: b[key] for key in b if key in shared}) for b in batches]
