"""IMPALA's and APPO's ``minibatch_buffer_size`` (1.x's pendulum-appo.yaml sets 16): the
learner keeps that many train batches and learns on each ``num_sgd_iter`` times, one pass
per learner step, in turn with the others, before it takes new ones (1.13's
``MinibatchBuffer`` in its learner thread).

Covered: the ring's order, release flags, refill and its 1.13 ramp; the learner thread
replaying each queued batch ``num_sgd_iter`` times in that order; IMPALA and APPO without
remote workers (the driver learns) taking each sampled batch ``num_sgd_iter`` times in
one-pass learner steps, and with the default buffer of one making all passes in one step;
the learner thread of a trainer with one remote worker built with the buffer.
"""

from __future__ import annotations

import queue
import time
from collections import Counter

import pytest

from rlstack.execution.buffers.minibatch_buffer import MinibatchBuffer
from rlstack.execution.learner_thread import LearnerThread


def _queue(*items):
    q = queue.Queue()
    for item in items:
        q.put(item)
    return q


def test_each_item_comes_num_passes_times_in_turn_with_the_others():
    ring = MinibatchBuffer(_queue(*"abcde"), size=3, timeout=0, num_passes=2, init_num_passes=2)
    got = [ring.get() for _ in range(8)]
    assert [item for item, _ in got] == list("abcabcde")
    # Released on an item's last pass: its slot takes the next item from the queue.
    assert [released for _, released in got] == [False, False, False, True, True, True, False, False]


def test_a_spent_slot_waits_for_the_queue_and_the_ring_stays_on_it():
    ring = MinibatchBuffer(_queue("a"), size=2, timeout=0, num_passes=2, init_num_passes=2)
    assert ring.get() == ("a", False)
    with pytest.raises(queue.Empty):
        ring.get()  # slot 1 needs an item; none is queued
    ring.inqueue.put("b")
    # The failed call did not move the ring: b fills slot 1, then a and b get their second pass.
    assert [ring.get() for _ in range(3)] == [("b", False), ("a", True), ("b", True)]


def test_the_ramp_gives_each_new_item_one_more_pass_up_to_num_passes():
    ring = MinibatchBuffer(_queue(*"abcd"), size=1, timeout=0, num_passes=3)
    assert [ring.get()[0] for _ in range(9)] == list("abbcccddd")


def test_sizes_below_one_are_refused():
    with pytest.raises(ValueError, match="size must be >= 1"):
        MinibatchBuffer(queue.Queue(), size=0, timeout=0, num_passes=1)


class _Recorder:
    """A stand-in policy whose learner steps record which batch they learned on."""

    def __init__(self):
        self.learned = []

    def learn_on_batch(self, batch):
        self.learned.append(batch)
        return {"step": len(self.learned)}

    def get_weights(self):
        return {}


def _wait_for(condition, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_the_learner_thread_replays_each_queued_batch_num_sgd_iter_times():
    policy = _Recorder()
    learner = LearnerThread(policy, queue_size=8, timeout_s=0.05, minibatch_buffer_size=2, num_sgd_iter=3)
    learner.start()
    try:
        for name in ("b0", "b1", "b2", "b3"):
            learner.inqueue.put((None, name))
        _wait_for(lambda: len(policy.learned) == 12)
        assert policy.learned == ["b0", "b1"] * 3 + ["b2", "b3"] * 3
        assert learner.num_steps == 12
        results = [learner.outqueue.get_nowait() for _ in range(12)]
        assert [batch for _, batch, _ in results] == policy.learned
    finally:
        learner.stop()
    assert not learner.is_alive()


def test_the_default_learner_thread_learns_each_batch_once_in_queue_order():
    policy = _Recorder()
    learner = LearnerThread(policy, queue_size=8, timeout_s=0.05)
    learner.start()
    try:
        for name in ("b0", "b1", "b2"):
            learner.inqueue.put((None, name))
        _wait_for(lambda: len(policy.learned) == 3)
        time.sleep(0.1)
        assert policy.learned == ["b0", "b1", "b2"]
    finally:
        learner.stop()


def _trainer(name, framework, **config):
    from rlstack.trainers.common.registry import get_trainer_class

    return get_trainer_class(name)({
        "framework": framework, "num_workers": 0, "rollout_fragment_length": 10, "train_batch_size": 20,
        "min_time_s_per_reporting": 0, "min_sample_timesteps_per_reporting": 20, "seed": 1,
        "model": {"fcnet_hiddens": [8]}, **config}, "CartPole-v1")


def _record_learner_steps(trainer):
    """Wraps the learner policy's learn_on_batch: (batch id, SGD passes) of each call."""
    policy = trainer.get_policy()
    calls = []
    kept = []  # every batch seen stays alive, so no two of them can share an id()
    learn = policy.learn_on_batch

    def recording(batch):
        kept.append(batch)
        calls.append((id(batch), policy.minibatch_plan(batch.count)[1]))
        return learn(batch)

    policy.learn_on_batch = recording
    return calls


@pytest.mark.parametrize("name", ["IMPALA", "APPO"])
def test_without_remote_workers_each_batch_is_learned_on_num_sgd_iter_times_in_turn(name, framework):
    trainer = _trainer(name, framework, minibatch_buffer_size=2, num_sgd_iter=3)
    try:
        calls = _record_learner_steps(trainer)
        results = [trainer.train() for _ in range(6)]
    finally:
        trainer.stop()
    batches = [batch for batch, _ in calls]
    assert all(passes == 1 for _, passes in calls)  # one pass per learner step
    # Sampled batches 1..6, two at a time in the ring: 1, 2 1 2 1 2, 3, 4 3 4 3 4, 5, 6 5 6 5 6.
    order = list(dict.fromkeys(batches))
    assert len(order) == 6
    expected = []
    for first, second in ((0, 1), (2, 3), (4, 5)):
        expected += [order[first]] + [order[second], order[first]] * 2 + [order[second]]
    assert batches == expected
    assert set(Counter(batches).values()) == {3}
    # Every pass counts as trained steps, as 1.13's learner outputs did.
    assert results[-1]["info"]["num_env_steps_trained"] == 3 * results[-1]["info"]["num_env_steps_sampled"]
    if name == "APPO":
        assert results[-1]["num_target_updates"] == 18  # one per learner step (target_update_frequency 1)


def test_with_the_default_buffer_a_learner_step_makes_all_its_passes():
    pytest.importorskip("torch")
    trainer = _trainer("IMPALA", "torch", num_sgd_iter=3)
    try:
        calls = _record_learner_steps(trainer)
        result = [trainer.train() for _ in range(2)][-1]
    finally:
        trainer.stop()
    assert [passes for _, passes in calls] == [3, 3]
    assert len({batch for batch, _ in calls}) == 2
    assert result["info"]["num_env_steps_trained"] == result["info"]["num_env_steps_sampled"]


def test_minibatch_buffer_size_needs_more_than_one_pass_to_matter():
    pytest.importorskip("torch")
    trainer = _trainer("IMPALA", "torch", minibatch_buffer_size=4)
    try:
        calls = _record_learner_steps(trainer)
        for _ in range(3):
            trainer.train()
    finally:
        trainer.stop()
    # num_sgd_iter 1: each batch once, as it comes (1.13: the key acts only with num_sgd_iter > 1).
    assert [passes for _, passes in calls] == [1, 1, 1] and len({batch for batch, _ in calls}) == 3



def test_with_a_remote_worker_the_learner_thread_gets_the_buffer(ray_local):
    pytest.importorskip("torch")
    trainer = _trainer("IMPALA", "torch", num_workers=1, minibatch_buffer_size=2, num_sgd_iter=2)
    try:
        ring = trainer.learner.minibatch_buffer
        assert (ring.size, ring.num_passes) == (2, 2)
        for _ in range(3):
            result = trainer.train()
    finally:
        trainer.stop()
    # Each learner step is one pass over one 20-step train batch (the driver may not have
    # collected the last steps' results yet when it reports).
    trained = result["info"]["num_env_steps_trained"]
    assert trained % 20 == 0 and 0 < trained <= 20 * result["learner_steps"]
