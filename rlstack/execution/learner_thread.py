"""LearnerThread: learns on batches from a queue while the driver keeps sampling.

Asynchronous trainers (ApeX, IMPALA) feed replayed or sampled batches into
``inqueue``; the thread runs ``learn_on_batch`` on each and puts ``(tag, batch, stats)``
on ``outqueue``. It reads the queue through a :class:`MinibatchBuffer`: with
``minibatch_buffer_size`` and ``num_sgd_iter`` above 1 (IMPALA's and APPO's keys) each
batch is learned on ``num_sgd_iter`` times, in turn with the other batches the ring holds.
``lock`` guards the policy: the driver takes it to read weights or update the target
network between learner steps. torch and TF release the GIL inside their kernels, so
sampling bookkeeping in the driver overlaps with learning.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import ray

from rlstack.execution.buffers.minibatch_buffer import MinibatchBuffer
from rlstack.policies.policy import Policy
from rlstack.sample_batch import SampleBatch

logger = logging.getLogger(__name__)


class LearnerThread(threading.Thread):
    """A daemon thread that calls ``policy.learn_on_batch`` on queued batches.

    Args:
        policy: The learner policy.
        queue_size: Capacity of ``inqueue`` (``learner_queue_size``).
        timeout_s: How long ``get`` waits before the thread checks for a stop
            (a poll interval, not a failure timeout).
        learn: What learns on a batch (default ``policy.learn_on_batch``; a multi-agent
            trainer's learns per policy).
        get_weights: What reads the weights to broadcast (default ``policy.get_weights``;
            a multi-agent worker's ``{policy_id: weights}``).
        minibatch_buffer_size: Batches held in the ring that ``inqueue`` is read through.
        num_sgd_iter: Learner steps on each queued batch (one ``learn`` call each), taken in
            turn with the ring's other batches; 1: each batch once, in queue order.
    """

    def __init__(self, policy: Policy, queue_size: int = 16, timeout_s: float = 0.5,
                 learn: Callable[[Any], dict[str, Any]] | None = None,
                 get_weights: Callable[[], Any] | None = None, minibatch_buffer_size: int = 1,
                 num_sgd_iter: int = 1) -> None:
        super().__init__(name="rlstack-learner", daemon=True)
        self.policy = policy
        self._learn = learn or policy.learn_on_batch
        self._get_weights = get_weights or policy.get_weights
        self.inqueue: queue.Queue[tuple[Any, SampleBatch]] = queue.Queue(maxsize=queue_size)
        self.outqueue: queue.Queue[tuple[Any, SampleBatch, dict[str, Any]]] = queue.Queue()
        # 1.13's learner thread gave every batch all its passes from the first (no ramp).
        self.minibatch_buffer = MinibatchBuffer(self.inqueue, minibatch_buffer_size, timeout_s,
                                                num_passes=num_sgd_iter, init_num_passes=num_sgd_iter)
        self.lock = threading.Lock()
        self.timeout_s = timeout_s
        self.error: BaseException | None = None
        self.num_steps = 0
        # Seconds of each learn_on_batch since the driver last drained this list.
        self.learn_times: list[float] = []
        # inqueue's size at the end of each of the driver's rounds since the last report.
        self._queue_sizes: list[int] = []
        self._stopped = threading.Event()
        self._weights_ref: Any = None
        self._weights_version = -1

    def run(self) -> None:
        while not self._stopped.is_set():
            try:
                (tag, batch), _ = self.minibatch_buffer.get()
            except queue.Empty:
                continue
            try:
                start = time.perf_counter()
                with self.lock:
                    stats = self._learn(batch)
                self.learn_times.append(time.perf_counter() - start)
                self.num_steps += 1
                self.outqueue.put((tag, batch, stats))
            except BaseException as exc:  # noqa: BLE001 - handed to the driver, which raises it
                logger.exception("The learner thread failed.")
                self.error = exc
                return

    def take_results(self, learn_timer: Any) -> list[tuple[Any, SampleBatch, dict[str, Any]]]:
        """The ``(tag, batch, stats)`` of every batch learned since the last call; each
        learn_on_batch's seconds go to ``learn_timer`` (a ``TimerStat``)."""
        times, self.learn_times = self.learn_times, []
        for seconds in times:
            learn_timer.push(seconds)
        results = []
        while not self.outqueue.empty():
            results.append(self.outqueue.get_nowait())
        return results

    def end_round(self, policies: Any, global_timestep: int) -> None:
        """After a round of the driver's loop: records the queue's size and gives each
        policy the new global timestep (under the lock: the thread may be learning)."""
        self._queue_sizes.append(self.inqueue.qsize())
        with self.lock:
            for policy in policies:
                policy.on_global_var_update(global_timestep)

    def queue_report(self) -> dict[str, Any]:
        """The learner's result keys since the last report: the queue's size at the end of
        each round (mean, max, capacity) and the learner steps so far."""
        sizes, self._queue_sizes = self._queue_sizes, []
        return {"learner_queue": {"size_mean": sum(sizes) / len(sizes) if sizes else 0.0,
                                  "size_max": int(max(sizes, default=0)), "capacity": self.inqueue.maxsize},
                "learner_steps": self.num_steps}

    def weights_ref(self) -> Any:
        """The policy's weights in Ray's object store, put once per learner step and
        shared by every worker synced with that version."""
        if self._weights_ref is None or self._weights_version != self.num_steps:
            with self.lock:
                version = self.num_steps
                weights = self._get_weights()
            self._weights_ref = ray.put(weights)
            self._weights_version = version
        return self._weights_ref

    @property
    def weights_version(self) -> int:
        """The learner step of the weights :meth:`weights_ref` last returned."""
        return self._weights_version

    def invalidate_weights(self) -> None:
        """Forgets the cached weights (after the driver changed them, e.g. a restore)."""
        self._weights_ref = None

    def check(self) -> None:
        """Re-raises, in the driver, an exception that ended the thread."""
        if self.error is not None:
            raise RuntimeError(f"The learner thread failed: {self.error!r}") from self.error

    def stop(self) -> None:
        """Asks the thread to end after its current batch and waits for it."""
        self._stopped.set()
        if self.is_alive():
            self.join(timeout=10)
