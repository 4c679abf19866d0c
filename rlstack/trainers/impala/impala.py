"""IMPALATrainer: importance-weighted actor-learner architecture (Espeholt et al. 2018).

Rollout workers sample without pause: each keeps ``max_sample_requests_in_flight_per_worker``
``sample`` calls in flight, and the driver collects whichever finishes first
(``ray.wait``, never a barrier). Fragments are grouped into train batches of at least
``train_batch_size`` steps and queued (``learner_queue_size``) for a learner thread,
which corrects for the workers' stale policies with V-trace. A worker gets the newest
weights after every ``broadcast_interval`` of its batches. With ``minibatch_buffer_size``
above 1 the learner keeps that many train batches and learns on each ``num_sgd_iter``
times, one pass per learner step, in turn (1.13's minibatch buffer).
"""

from __future__ import annotations

import contextlib
import queue
from typing import Any

import numpy as np
import ray

from rlstack.errors import ConfigError
from rlstack.execution.buffers.minibatch_buffer import MinibatchBuffer
from rlstack.execution.learner_thread import LearnerThread
from rlstack.sample_batch import MultiAgentBatch, SampleBatch, concat_samples
from rlstack.trainers.common.config import COMMON_CONFIG, DefaultConfig, merge_config, require_stochastic_sampling
from rlstack.trainers.common.trainer import Trainer
from rlstack.trainers.impala.fragments import fixed_length_fragments
from rlstack.utils.timers import StepRates


def _acting_only(batch: SampleBatch, config: dict) -> SampleBatch:
    # IMPALA postprocesses nothing on the workers (V-trace runs on the learner); a
    # postprocess function still lets the workers act in numpy.
    return batch


# Classic RLlib 1.x IMPALA defaults, on top of COMMON_CONFIG.
DEFAULT_CONFIG: dict[str, Any] = DefaultConfig(merge_config(
    {
        **COMMON_CONFIG,
        # V-trace off-policy correction; False (plain actor-critic) is not implemented.
        "vtrace": True,
        # rho_bar: clip of the importance ratios in the value targets (None: no clip).
        "vtrace_clip_rho_threshold": 1.0,
        # pg_rho_bar: clip of the importance ratios in the policy-gradient advantages (None: no clip).
        "vtrace_clip_pg_rho_threshold": 1.0,
        # True: each fragment's last step only bootstraps (V-trace and the loss over its first
        # T - 1 steps, from the learner's V of the last step). False: every step is learned on,
        # and the last one bootstraps from its own V (1.13 had no V of the next observation).
        "vtrace_drop_last_ts": True,
        # Passes of SGD over each train batch (one gradient step per pass).
        "num_sgd_iter": 1,
        # Train batches waiting for the learner thread, at most.
        "learner_queue_size": 16,
        # Seconds the driver waits for room in a full learner queue before giving up.
        "learner_queue_timeout": 300,
        # sample() calls kept in flight per rollout worker.
        "max_sample_requests_in_flight_per_worker": 2,
        # A worker gets fresh weights after this many of its batches.
        "broadcast_interval": 1,
        # "adam" or "rmsprop" (RMSProp uses decay, momentum and epsilon).
        "opt_type": "adam",
        # RMSProp's decay of its moving average of squared gradients.
        "decay": 0.99,
        # RMSProp's momentum.
        "momentum": 0.0,
        # RMSProp's epsilon, added to the root of the average (large, as in IMPALA's paper).
        "epsilon": 0.1,
        # Weight of the value loss.
        "vf_loss_coeff": 0.5,
        # Weight of the entropy bonus, and its [[timestep, coeff], ...] schedule.
        "entropy_coeff": 0.01,
        # [[timestep, coeff], ...]: entropy_coeff piecewise-linear over sampled steps.
        "entropy_coeff_schedule": None,
        # Not implemented (kept so old configs load; must keep these values): 1.13's
        # experience replay beside the fresh batches.
        "replay_proportion": 0.0,
        # Not implemented (must stay 0): slots of that replay.
        "replay_buffer_num_slots": 0,
        # Train batches the learner holds at once, each learned on num_sgd_iter times in turn
        # with the others, one pass per learner step (with num_sgd_iter > 1 only; 1: each batch's
        # passes in one learner step).
        "minibatch_buffer_size": 1,
        # Not implemented (must stay 0): 1.13's tree-aggregation actors.
        "num_aggregation_workers": 0,
        # Two optimizers: one for the policy loss (minus the entropy bonus), one for the value
        # loss alone (vf_loss_coeff unused), at _lr_vf. Needs the built-in model with
        # vf_share_layers False (each layer in one optimizer).
        "_separate_vf_optimizer": False,
        # The value optimizer's learning rate (constant) with _separate_vf_optimizer.
        "_lr_vf": 0.0005,
        # 1.13's hook after each learner step: a factory called once as f(workers, config),
        # whose result is called with each step's learner info ({policy_id: {"learner_stats":
        # ...}}); None: nothing.
        "after_train_step": None,
    },
    {
        "rollout_fragment_length": 50,
        "train_batch_size": 500,
        "min_time_s_per_reporting": 10,
        "num_workers": 2,
        "grad_clip": 40.0,
        "lr": 0.0005,
    },
    "IMPALA",
))

_NOT_IMPLEMENTED = {"vtrace": True, "replay_proportion": 0.0, "replay_buffer_num_slots": 0,
                    "num_aggregation_workers": 0}


class IMPALATrainer(Trainer):
    """IMPALA with the classic RLlib API. With ``num_workers=0`` the driver samples and
    learns in turn (no learner thread). Multi-agent: each policy of ``policies_to_train``
    learns on its own rows, laid out as fixed-length fragments (``fragments.py``)."""

    _name = "IMPALA"
    _default_config = DEFAULT_CONFIG
    postprocess_fn = staticmethod(_acting_only)
    supports_recurrent_models = True

    @classmethod
    def validate_config(cls, config: dict[str, Any]) -> None:
        require_stochastic_sampling(config)
        for key, allowed in _NOT_IMPLEMENTED.items():
            if config[key] != allowed:
                raise ConfigError(f"{key}={config[key]!r} is not implemented in rlstack's {cls._name}; remove it "
                                  f"(or set {key}={allowed!r}).")
        for key in ("num_sgd_iter", "minibatch_buffer_size", "learner_queue_size",
                    "max_sample_requests_in_flight_per_worker", "broadcast_interval"):
            value = config[key]
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{key} must be an integer >= 1, got {value!r}.")
        if config["opt_type"] not in ("adam", "rmsprop"):
            raise ConfigError(f"opt_type={config['opt_type']!r} is not allowed; use 'adam' or 'rmsprop'.")
        for key in ("vtrace_drop_last_ts", "_separate_vf_optimizer"):
            if not isinstance(config[key], bool):
                raise ConfigError(f"{key} must be True or False, got {config[key]!r}.")
        if config["vtrace_drop_last_ts"] and config["rollout_fragment_length"] < 2:
            raise ConfigError(f"rollout_fragment_length must be >= 2 for {cls._name} (V-trace bootstraps each fragment "
                              f"from its last step), got {config['rollout_fragment_length']}; or set "
                              "vtrace_drop_last_ts=False.")
        if config["_separate_vf_optimizer"]:
            model = config.get("model") or {}
            if model.get("vf_share_layers"):
                raise ConfigError("_separate_vf_optimizer=True needs separate policy and value layers; set "
                                  "model: {vf_share_layers: False} (each layer is trained by one optimizer).")
            if model.get("custom_model") or model.get("use_lstm") or model.get("use_attention"):
                raise ConfigError("_separate_vf_optimizer=True works with the built-in feed-forward model, whose "
                                  "value layers are known; for a custom or recurrent model, subclass the policy and "
                                  "return both optimizers from make_optimizers().")
        if config["batch_mode"] != "truncate_episodes":
            raise ConfigError(f"batch_mode={config['batch_mode']!r}: {cls._name} learns on fixed-length fragments and "
                              "needs batch_mode='truncate_episodes'.")
        for key in ("vtrace_clip_rho_threshold", "vtrace_clip_pg_rho_threshold", "vf_loss_coeff", "entropy_coeff",
                    "decay", "momentum", "epsilon", "learner_queue_timeout", "_lr_vf"):
            value = config[key]
            if value is None and key.startswith("vtrace_clip"):
                continue  # no clipping
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"{key} must be a number >= 0, got {value!r}.")

    policy_classes = {"torch": "rlstack.trainers.impala.impala_torch_policy:ImpalaTorchPolicy",
                      "tf": "rlstack.trainers.impala.impala_tf_policy:ImpalaTFPolicy"}

    # ----- set-up -----------------------------------------------------------------------

    @classmethod
    def learns_asynchronously(cls, config: dict[str, Any]) -> bool:
        return True  # the learner thread learns on whatever batches the workers have queued

    def setup(self, config: dict[str, Any]) -> None:
        super().setup(config)
        cfg = self.config
        self._counters.update(num_weight_broadcasts=0)
        self._pending: list[SampleBatch] = []
        self._pending_versions: list[int] = []
        self._policy_lags: list[int] = []
        self._rates = StepRates()
        self._after_train_step = (cfg["after_train_step"](self.workers, cfg) if cfg["after_train_step"] is not None
                                  else None)
        self.learner: LearnerThread | None = None
        # With a buffer of several batches each learner step is one pass over one batch, and
        # each batch comes back num_sgd_iter times; with one, a step makes all its passes.
        buffer_size = cfg["minibatch_buffer_size"] if cfg["num_sgd_iter"] > 1 else 1
        self._steps_per_batch = cfg["num_sgd_iter"] if buffer_size > 1 else 1
        if self.workers.num_remote_workers == 0:
            self._sync_queue: queue.Queue = queue.Queue()
            self._sync_buffer = MinibatchBuffer(self._sync_queue, buffer_size, timeout=0,
                                                num_passes=self._steps_per_batch,
                                                init_num_passes=self._steps_per_batch)
            return
        self.learner = LearnerThread(self.learner_policy, cfg["learner_queue_size"], learn=self._learn,
                                     get_weights=self.workers.local_worker().get_weights,
                                     minibatch_buffer_size=buffer_size, num_sgd_iter=self._steps_per_batch)
        self.learner.start()
        # A recreated worker starts from the learner's consistent copy of the weights.
        self.workers.restore_weights = self.learner.weights_ref
        num = self.workers.num_remote_workers
        self._worker_versions = [0] * num  # the learner version each worker acts with
        self._batches_since_broadcast = [0] * num
        self._in_flight: dict[Any, tuple[int, int]] = {}
        for index in range(num):
            for _ in range(cfg["max_sample_requests_in_flight_per_worker"]):
                self._request_sample(index)

    def _on_worker_failure(self, index: int) -> None:
        # Its other requests died with it; a recreated worker acts with the learner's
        # current weights and gets a full set of requests again.
        self._worker_versions[index] = self.learner.weights_version
        self._batches_since_broadcast[index] = 0
        self.workers.replace_requests(self._in_flight, index, self._request_sample,
                                      self.config["max_sample_requests_in_flight_per_worker"])

    def _request_sample(self, index: int) -> None:
        ref = self.workers.remote_workers()[index].sample.remote()
        self._in_flight[ref] = (index, self._worker_versions[index])

    # ----- one round --------------------------------------------------------------------

    def training_step(self) -> dict[str, Any]:
        if self.learner is None:
            return self._synchronous_step()
        cfg = self.config
        self.learner.check()
        with self._timers["sample"]:
            ready, _ = ray.wait(list(self._in_flight), num_returns=1, timeout=1.0)
            if ready:
                ready, _ = ray.wait(list(self._in_flight), num_returns=len(self._in_flight), timeout=0)
        for ref in ready:
            if ref not in self._in_flight:  # voided by its worker's failure just now
                continue
            index, version = self._in_flight.pop(ref)
            ok, batch = self.workers.fetch(ref, index)
            if not ok:
                self._on_worker_failure(index)
                continue
            self.count_sampled(batch)
            self._pending.append(batch)
            self._pending_versions.append(version)
            self._batches_since_broadcast[index] += 1
            if self._batches_since_broadcast[index] >= cfg["broadcast_interval"]:
                with self._timers["synch_weights"]:
                    worker = self.workers.remote_workers()[index]
                    worker.set_weights.remote(self.learner.weights_ref(), self.global_timestep())
                self._worker_versions[index] = self.learner.weights_version
                self._batches_since_broadcast[index] = 0
                self._counters["num_weight_broadcasts"] += 1
            self._request_sample(index)
        self._enqueue_train_batches()
        self._apply_learner_results()
        self.learner.end_round(self.workers.local_worker().policy_map.values(), self.global_timestep())
        return self.last_learner_info()

    def _learn(self, batch: SampleBatch | MultiAgentBatch) -> dict[str, Any]:
        # One learner step on a train batch: {policy_id: {"learner_stats": ...}} for each
        # policy that learned; one pass of SGD when the batch comes back for more.
        fragment_length = self.config["rollout_fragment_length"]

        def learn(policy: Any, rows: SampleBatch) -> dict[str, Any]:
            if not isinstance(batch, SampleBatch):
                rows = fixed_length_fragments(rows, fragment_length)
            with policy.plan_override(0, 1) if self._steps_per_batch > 1 else contextlib.nullcontext():
                return policy.learn_on_batch(rows)

        return self.learn_per_policy(batch, learn)

    def _enqueue_train_batches(self) -> None:
        cfg = self.config
        assert self.learner is not None
        while sum(b.count for b in self._pending) >= cfg["train_batch_size"]:
            batches, versions = [], []
            while sum(b.count for b in batches) < cfg["train_batch_size"]:
                batches.append(self._pending.pop(0))
                versions.append(self._pending_versions.pop(0))
            # Policy lag: learner updates between the weights a batch was sampled with
            # and the weights that learn on it.
            self._policy_lags.extend(self.learner.num_steps - v for v in versions)
            try:
                self.learner.inqueue.put((None, concat_samples(batches)), timeout=cfg["learner_queue_timeout"])
            except queue.Full as exc:
                raise RuntimeError(
                    f"The learner queue stayed full for learner_queue_timeout={cfg['learner_queue_timeout']} s; "
                    "the learner thread is stuck or far slower than sampling."
                ) from exc

    def _apply_learner_results(self) -> None:
        assert self.learner is not None
        for _, batch, stats in self.learner.take_results(self._timers["learn"]):
            self.count_trained(batch)
            self._last_learner_stats = stats
            if self._after_train_step is not None:
                self._after_train_step(stats)

    def _synchronous_step(self) -> dict[str, Any]:
        cfg = self.config
        with self._timers["sample"]:
            batches = []
            while sum(b.count for b in batches) < cfg["train_batch_size"]:
                batches.append(self.workers.local_worker().sample())
        batch = concat_samples(batches)
        self.count_sampled(batch)
        self._sync_queue.put(batch)
        # Every learner step the buffer allows before it needs the next batch: one with a
        # buffer of one batch; with more, each held batch's next pass in turn.
        while True:
            try:
                rows, _ = self._sync_buffer.get()
            except queue.Empty:
                break
            with self._timers["learn"]:
                self._last_learner_stats = self._learn(rows)
            self.count_trained(rows)
            if self._after_train_step is not None:
                self._after_train_step(self._last_learner_stats)
        self._policy_lags.append(0)
        with self._timers["synch_weights"]:
            self.sync_learned_weights(self._last_learner_stats)
        return self._last_learner_stats

    # ----- results, checkpoints, shutdown -------------------------------------------------

    def extra_results(self) -> dict[str, Any]:
        lags, self._policy_lags = self._policy_lags, []
        return {
            **self._rates.report(self._counters["num_env_steps_sampled"], self._counters["num_env_steps_trained"]),
            # Without remote workers there is no learner thread: learning is synchronous and
            # the queue stays empty.
            **(self.learner.queue_report() if self.learner is not None else
               {"learner_queue": {"size_mean": 0.0, "size_max": 0, "capacity": self.config["learner_queue_size"]}}),
            "policy_lag": {"mean": float(np.mean(lags)) if lags else 0.0, "max": int(max(lags, default=0))},
            "num_weight_broadcasts": self._counters["num_weight_broadcasts"],
        }

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        if self.learner is None:
            super().save_checkpoint(checkpoint_dir)
            return
        with self.learner.lock:
            super().save_checkpoint(checkpoint_dir)

    def load_checkpoint(self, checkpoint: Any) -> None:
        if self.learner is None:
            super().load_checkpoint(checkpoint)
            return
        with self.learner.lock:
            super().load_checkpoint(checkpoint)
        self.learner.invalidate_weights()

    def evaluate(self) -> dict[str, Any]:
        if self.learner is None:
            return super().evaluate()
        with self.learner.lock:
            return super().evaluate()

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        # In-flight samples and the learner thread belong to the old trial.
        return False

    def cleanup(self) -> None:
        if getattr(self, "learner", None) is not None:
            self.learner.stop()
        super().cleanup()


# RLlib 1.13's spelling (`from ray.rllib.agents.impala import ImpalaTrainer`).
ImpalaTrainer = IMPALATrainer
