"""DistributedReplayTrainer: Ape-X's distributed prioritized experience replay (Horgan et
al. 2018), shared by ApeX-DQN (``run: APEX``) and ApeX-DDPG (``run: APEX_DDPG``).

Many rollout workers sample without pause and compute their rows' initial priorities
themselves. Their batches go straight from the worker into one of
``num_replay_buffer_shards`` prioritized replay actors (only an object reference passes
through the driver). A learner thread on the driver learns on batches replayed from the
shards and the driver sends the new priorities back. Workers get fresh weights after
every ``max_weight_sync_delay`` steps they sample. The driver only ever waits with
``ray.wait`` for whichever request finishes first; there is no barrier across workers.

A replay shard whose actor dies (its process killed, out of memory) is, with
``recreate_failed_workers=True``, recreated empty in place (its rows are lost) and
training goes on; the result counts ``num_replay_shard_restarts`` and
``replay_shard_rows_lost``. Without that key the failure ends ``train()`` with a
:class:`~rlstack.errors.WorkerFailureError` naming the shard. Every call to a shard is
watched (adds, replays, priority updates, stats), so a dead shard is noticed wherever
it is met, and requests still in flight to it are dropped (no hang).

The algorithm's folder supplies the policy (a loss whose stats carry a per-row
``"td_error"``, and ``update_target()``), its defaults on top of
:data:`DISTRIBUTED_REPLAY_CONFIG` and the replay keys of ``off_policy.py``, and its checks
(calling :func:`validate_distributed_replay_config`).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import ray
from ray.exceptions import RayActorError

from rlstack.errors import ConfigError, WorkerFailureError
from rlstack.evaluation.worker_set import describe_failure
from rlstack.execution.learner_thread import LearnerThread
from rlstack.execution.replay_actor import ReplayActor
from rlstack.sample_batch import MultiAgentBatch, SampleBatch
from rlstack.trainers.common.off_policy import beta_schedule
from rlstack.trainers.common.trainer import Trainer
from rlstack.utils.timers import StepRates

__all__ = ["DISTRIBUTED_REPLAY_CONFIG", "DistributedReplayTrainer", "validate_distributed_replay_config"]

logger = logging.getLogger(__name__)

# Keys of the distributed replay, with classic RLlib 1.x ApeX's defaults.
DISTRIBUTED_REPLAY_CONFIG: dict[str, Any] = {
    # Number of prioritized replay actors the buffer is split over.
    "num_replay_buffer_shards": 4,
    # A worker gets fresh weights after at most this many of its sampled steps.
    "max_weight_sync_delay": 400,
    # Replayed batches waiting for the learner thread, at most.
    "learner_queue_size": 16,
    # sample() calls kept in flight per rollout worker.
    "max_sample_requests_in_flight_per_worker": 2,
}


def validate_distributed_replay_config(config: dict[str, Any], algorithm: str) -> None:
    """Checks the :data:`DISTRIBUTED_REPLAY_CONFIG` keys and what the distributed replay
    needs from the rest of the config.

    Raises:
        ConfigError: Naming the key, the value and the fix.
    """
    if config["num_workers"] < 1:
        raise ConfigError(f"{algorithm} samples on remote rollout workers only: set num_workers >= 1 (or use its "
                          "single-process variant, which samples in the driver with num_workers=0).")
    for key in DISTRIBUTED_REPLAY_CONFIG:
        value = config[key]
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError(f"{key} must be an integer >= 1, got {value!r}.")
    if config["observation_filter"] != "NoFilter":
        raise ConfigError(f"observation_filter={config['observation_filter']!r}: {algorithm} workers sample "
                          "asynchronously and their filters are not synchronised; use 'NoFilter'.")
    if config["buffer_size"] < config["num_replay_buffer_shards"]:
        raise ConfigError(f"buffer_size ({config['buffer_size']}) must be at least num_replay_buffer_shards "
                          f"({config['num_replay_buffer_shards']}): the buffer is split over the shards.")


class DistributedReplayTrainer(Trainer):
    """The role base of Ape-X trainers (see the module docstring; needs ``num_workers >= 1``).

    ``training_intensity`` (trained rows per sampled step), when set, caps how fast the
    learner may replay relative to sampling; without it the learner replays as fast as
    it can, as in the paper. Learning goes on between ``train()`` calls (the learner
    thread works through its queue), so a checkpoint holds the weights of the moment it
    is written and the counters of the last reported result. The target network is
    refreshed every ``target_network_update_freq`` TRAINED steps.
    """

    # Multi-agent: each shard keeps a buffer per policy, replays are asked per trained
    # policy, and the learner thread learns each replayed batch with its policy.

    # ----- set-up -----------------------------------------------------------------------

    @classmethod
    def learns_asynchronously(cls, config: dict[str, Any]) -> bool:
        return True  # the learner thread replays while the workers sample

    def setup(self, config: dict[str, Any]) -> None:
        super().setup(config)
        cfg = self.config
        seed = cfg["seed"]
        self._shard_actor_ids: set[str] = set()
        self.replay_shards = [self._make_shard(i) for i in range(cfg["num_replay_buffer_shards"])]
        # Shard fault tolerance: each shard's generation (bumped when it is recreated, so
        # that answers and priorities meant for the dead one are dropped) and the rows the
        # driver has routed to it (what a failure loses, at most its capacity).
        self._shard_generation = [0] * len(self.replay_shards)
        self._shard_rows = [0] * len(self.replay_shards)
        # Fire-and-forget shard calls (adds, priority updates), watched for a dead shard:
        # ObjectRef -> (shard index, generation).
        self._shard_calls_in_flight: dict[Any, tuple[int, int]] = {}
        self._beta = beta_schedule(cfg)
        self._rng = np.random.default_rng(seed)
        self.learner = LearnerThread(self.learner_policy, cfg["learner_queue_size"], learn=self._learn_replayed,
                                     get_weights=self.workers.local_worker().get_weights)
        self.learner.start()
        # A recreated worker starts from the learner's consistent copy of the weights.
        self.workers.restore_weights = self.learner.weights_ref
        self._counters.update(num_target_updates=0, last_target_update_ts=0, num_weight_syncs=0,
                              num_replay_shard_restarts=0, replay_shard_rows_lost=0)
        # ObjectRef -> (shard index, policy id, shard generation).
        self._replays_in_flight: dict[Any, tuple[int, str, int]] = {}
        self._samples_in_flight: dict[Any, tuple[int, Any]] = {}
        self._steps_since_sync = [0] * self.workers.num_remote_workers
        self._rates = StepRates()
        for index in range(self.workers.num_remote_workers):
            for _ in range(cfg["max_sample_requests_in_flight_per_worker"]):
                self._request_sample(index)

    def _make_shard(self, index: int) -> Any:
        cfg, seed = self.config, self.config["seed"]
        # No task events, like the rollout workers (see WorkerSet): the GCS would keep every call's.
        shard = ray.remote(num_cpus=0, enable_task_events=False)(ReplayActor).remote(
            cfg, cfg["buffer_size"] // cfg["num_replay_buffer_shards"],
            seed=None if seed is None else seed + 7919 * (index + 1))
        # Every shard actor made, to tell a shard's death from a worker's carried in its
        # argument (an add's batch reference).
        self._shard_actor_ids.add(shard._actor_id.hex())
        return shard

    # ----- replay shard failures ----------------------------------------------------------

    def _shard_get(self, ref: Any, index: int, generation: int | None = None) -> tuple[bool, Any]:
        """``ray.get(ref)`` of a call to shard ``index``; ``(False, None)`` when the shard
        had died (it is then recreated, see :meth:`_on_shard_failure`, or this raises)."""
        try:
            return True, ray.get(ref)
        except RayActorError as exc:
            actor_id = getattr(exc, "actor_id", None)
            if actor_id is not None and actor_id not in self._shard_actor_ids:
                raise  # another actor's death (a worker whose rows the call carried)
            self._on_shard_failure(index, exc, generation)
            return False, None

    def _on_shard_failure(self, index: int, exc: BaseException, generation: int | None = None) -> None:
        """Shard ``index`` died: recreates it empty and drops every call in flight to the
        dead one, or raises when ``recreate_failed_workers`` is off. ``generation`` is the
        shard's generation the failed call went to (None: the current one); a call to an
        already recreated shard's predecessor changes nothing."""
        if generation is not None and generation != self._shard_generation[index]:
            return  # that shard was recreated already
        num_shards = len(self.replay_shards)
        cause = describe_failure(exc)
        if not self.config.get("recreate_failed_workers"):
            raise WorkerFailureError(
                f"Replay shard {index} (of {num_shards}, num_replay_buffer_shards) died: {cause}. Set "
                "recreate_failed_workers=True to recreate a dead replay shard in place (its rows are lost) and "
                "go on; ignore_worker_failures does not cover replay shards."
            ) from exc
        capacity = self.config["buffer_size"] // num_shards * max(1, len(self.policies_to_train()))
        lost = min(self._shard_rows[index], capacity)
        try:
            ray.kill(self.replay_shards[index], no_restart=True)
        except Exception:  # noqa: BLE001 - the actor is gone already
            pass
        self.replay_shards[index] = self._make_shard(index)
        self._shard_generation[index] += 1
        self._shard_rows[index] = 0
        self._counters["num_replay_shard_restarts"] += 1
        self._counters["replay_shard_rows_lost"] += lost
        for in_flight in (self._replays_in_flight, self._shard_calls_in_flight):
            for ref in [ref for ref, value in in_flight.items() if value[0] == index]:
                del in_flight[ref]
        logger.warning("Replay shard %d of %d died (%s); recreated it empty (about %d rows lost, "
                       "recreate_failed_workers=True).", index, num_shards, cause, lost)

    def _shard_call(self, index: int, method: str, *args: Any) -> None:
        """Calls a shard method whose answer is not needed, watching it for a dead shard."""
        ref = getattr(self.replay_shards[index], method).remote(*args)
        self._shard_calls_in_flight[ref] = (index, self._shard_generation[index])

    def _request_sample(self, index: int) -> None:
        worker = self.workers.remote_workers()[index]
        batch_ref, count_ref = worker.sample_with_count.options(num_returns=2).remote()
        self._samples_in_flight[count_ref] = (index, batch_ref)

    # ----- one polling round ------------------------------------------------------------

    def training_step(self) -> dict[str, Any]:
        self.learner.check()
        pending = [*self._samples_in_flight, *self._replays_in_flight, *self._shard_calls_in_flight]
        with self._timers["sample"]:
            ready, _ = ray.wait(pending, num_returns=1, timeout=1.0)
            if ready:
                ready, _ = ray.wait(pending, num_returns=len(pending), timeout=0)
        ready_set = set(ready)
        for ref in [r for r in self._samples_in_flight if r in ready_set]:
            if ref in self._samples_in_flight:  # else voided by its worker's failure just now
                self._on_sample_done(ref)
        for ref in [r for r in self._shard_calls_in_flight if r in ready_set]:
            if ref in self._shard_calls_in_flight:  # else voided by its shard's failure just now
                self._shard_get(ref, *self._shard_calls_in_flight.pop(ref))
        for ref in [r for r in self._replays_in_flight if r in ready_set]:
            if ref not in self._replays_in_flight:
                continue  # voided by its shard's failure just now
            shard_index, policy_id, generation = self._replays_in_flight.pop(ref)
            ok, batch = self._shard_get(ref, shard_index, generation)
            if ok and batch is not None:
                if self.is_multi_agent:  # the learner thread learns it with its policy
                    batch = MultiAgentBatch({policy_id: batch}, batch.count)
                self.learner.inqueue.put_nowait(((shard_index, policy_id, generation), batch))
        self._request_replays()
        self._apply_learner_results()
        self.learner.end_round(self.workers.local_worker().policy_map.values(), self.global_timestep())
        return self.last_learner_info()

    def _learn_replayed(self, batch: SampleBatch | MultiAgentBatch) -> dict[str, Any]:
        # One replayed batch (multi-agent: of one policy), learned in the learner thread.
        if isinstance(batch, MultiAgentBatch):
            ((policy_id, rows),) = batch.policy_batches.items()
            return self.workers.local_worker().get_policy(policy_id).learn_on_batch(rows)
        return self.learner_policy.learn_on_batch(batch)

    def _on_sample_done(self, count_ref: Any) -> None:
        index, batch_ref = self._samples_in_flight.pop(count_ref)
        ok, counts = self.workers.fetch(count_ref, index)
        if not ok:
            # Its other requests died with it; a recreated worker gets a full set again.
            self._steps_since_sync[index] = 0
            self.workers.replace_requests(self._samples_in_flight, index, self._request_sample,
                                          self.config["max_sample_requests_in_flight_per_worker"])
            return
        # The rows go from the worker's object store straight to a random shard.
        env_steps, agent_steps = counts
        shard_index = int(self._rng.integers(len(self.replay_shards)))
        self._shard_call(shard_index, "add", batch_ref)
        self._shard_rows[shard_index] += agent_steps
        self._counters["num_env_steps_sampled"] += env_steps
        self._counters["num_agent_steps_sampled"] += agent_steps
        self._steps_since_sync[index] += env_steps
        if self._steps_since_sync[index] >= self.config["max_weight_sync_delay"]:
            with self._timers["synch_weights"]:
                worker = self.workers.remote_workers()[index]
                worker.set_weights.remote(self.learner.weights_ref(), self.global_timestep())
            self._steps_since_sync[index] = 0
            self._counters["num_weight_syncs"] += 1
        self._request_sample(index)

    def _request_replays(self) -> None:
        cfg = self.config
        sampled = self.global_timestep()
        if sampled < cfg["learning_starts"]:
            return
        batch_size = cfg["train_batch_size"]
        # Never more requests than the learner queue can take, so put_nowait cannot fail.
        room = cfg["learner_queue_size"] - self.learner.inqueue.qsize() - len(self._replays_in_flight)
        if cfg["training_intensity"] is not None:
            queued = self.learner.inqueue.qsize() + len(self._replays_in_flight)
            allowed = sampled * cfg["training_intensity"] - self._counters["num_env_steps_trained"]
            room = min(room, int(allowed // batch_size) - queued)
        beta = self._beta.value(sampled)
        min_size = max(1, cfg["learning_starts"] // (2 * len(self.replay_shards)))
        # At most two replays in flight per shard and trained policy, the least busy first.
        per_source = {(i, pid): 0 for i in range(len(self.replay_shards)) for pid in self.policies_to_train()}
        for shard_index, policy_id, _ in self._replays_in_flight.values():
            if (shard_index, policy_id) in per_source:
                per_source[shard_index, policy_id] += 1
        while room > 0 and per_source:
            source = min(per_source, key=per_source.get)
            if per_source[source] >= 2:
                break
            shard_index, policy_id = source
            ref = self.replay_shards[shard_index].replay.remote(batch_size, beta, min_size, policy_id)
            self._replays_in_flight[ref] = (shard_index, policy_id, self._shard_generation[shard_index])
            per_source[source] += 1
            room -= 1

    def _apply_learner_results(self) -> None:
        cfg = self.config
        for (shard_index, policy_id, generation), batch, stats in self.learner.take_results(self._timers["learn"]):
            rows = batch.policy_batches[policy_id] if isinstance(batch, MultiAgentBatch) else batch
            td_error = stats.pop("td_error", None)
            # Rows replayed from a shard that has died since have no slots to update.
            if td_error is not None and generation == self._shard_generation[shard_index]:
                self._shard_call(shard_index, "update_priorities", rows[SampleBatch.BATCH_INDEXES], td_error,
                                 policy_id)
            self._counters["num_env_steps_trained"] += rows.count
            self._counters["num_agent_steps_trained"] += rows.count
            self._last_learner_stats = {**self._last_learner_stats, policy_id: {"learner_stats": stats}}
        trained = self._counters["num_env_steps_trained"]
        if trained - self._counters["last_target_update_ts"] >= cfg["target_network_update_freq"]:
            with self.learner.lock:
                for policy_id in self.policies_to_train():
                    self.workers.local_worker().get_policy(policy_id).update_target()
            self._counters["last_target_update_ts"] = trained
            self._counters["num_target_updates"] += 1

    # ----- results, checkpoints, shutdown -------------------------------------------------

    def extra_results(self) -> dict[str, Any]:
        return {
            **self._rates.report(self._counters["num_env_steps_sampled"], self._counters["num_env_steps_trained"]),
            **self.learner.queue_report(),
            "replay_shards": self._shard_stats(),
            "num_weight_syncs": self._counters["num_weight_syncs"],
            # Replay shards recreated after their actor died, and the rows they held (cumulative).
            "num_replay_shard_restarts": self._counters["num_replay_shard_restarts"],
            "replay_shard_rows_lost": self._counters["replay_shard_rows_lost"],
            "num_target_updates": self._counters["num_target_updates"],
        }

    def _shard_stats(self) -> list[dict[str, Any]]:
        # A shard found dead here is recreated (or raises) and reports its new, empty self.
        refs = [shard.stats.remote() for shard in self.replay_shards]
        stats = []
        for index, ref in enumerate(refs):
            ok, value = self._shard_get(ref, index)
            stats.append(value if ok else self._shard_ask(index, "stats"))
        return stats

    def _shard_ask(self, index: int, method: str, *args: Any) -> Any:
        """``method``'s answer from shard ``index``, from its recreated successor if it died."""
        for _ in range(2):
            ok, value = self._shard_get(getattr(self.replay_shards[index], method).remote(*args), index)
            if ok:
                return value
        return ray.get(getattr(self.replay_shards[index], method).remote(*args))  # dying again at once: raise

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        with self.learner.lock:
            super().save_checkpoint(checkpoint_dir)

    def load_checkpoint(self, checkpoint: Any) -> None:
        with self.learner.lock:
            super().load_checkpoint(checkpoint)
        self.learner.invalidate_weights()

    def extra_checkpoint_arrays(self) -> dict[str, dict[str, np.ndarray]]:
        if not self.config["store_buffer_in_checkpoints"]:
            return {}
        return {f"replay_shard_{i}": self._shard_ask(i, "get_state") for i in range(len(self.replay_shards))}

    def restore_extra_arrays(self, arrays: dict[str, dict[str, np.ndarray]]) -> None:
        refs = {i: shard.set_state.remote(arrays[f"replay_shard_{i}"])
                for i, shard in enumerate(self.replay_shards) if f"replay_shard_{i}" in arrays}
        for i, ref in refs.items():
            if not self._shard_get(ref, i)[0]:  # it died: its successor takes the rows
                self._shard_ask(i, "set_state", arrays[f"replay_shard_{i}"])
        # What a later failure of each shard would lose counts the restored rows too.
        for i, stats in enumerate(self._shard_stats()):
            entries = [stats] if "num_entries" in stats else list(stats.values())
            self._shard_rows[i] = sum(int(s["num_entries"]) for s in entries)

    def evaluate(self) -> dict[str, Any]:
        with self.learner.lock:
            return super().evaluate()

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        # Replay actors and the learner thread hold the old trial's state: let Tune
        # build a new trainer rather than patch them.
        return False

    def cleanup(self) -> None:
        learner = getattr(self, "learner", None)
        if learner is not None:
            learner.stop()
        for shard in getattr(self, "replay_shards", []):
            try:
                ray.kill(shard)
            except Exception:  # noqa: BLE001 - the actor may already be gone
                pass
        super().cleanup()
