"""How many intra-op threads a trainer's learner gets, and putting back what it changed.

One rule for both frameworks, applied by ``Trainer.setup`` once the learner's policy is
built and undone by ``Trainer.stop()``:

* **What the user set wins**: ``OMP_NUM_THREADS`` in the environment (a user's choice, or
  Ray's inside an actor: a Tune trial's trainer gets the CPUs its trial reserved for it),
  a ``torch.set_num_threads`` call made before the trainer was built, TF's
  ``local_tf_session_args``.
* **A synchronous trainer** (PPO, PG, A2C, MARWIL, BC, DQN, SAC, DDPG, TD3, CQL, A3C with
  one worker): its workers wait while its learner learns, so the learner keeps every core
  the library would use on its own (torch: one thread per physical core).
* **A learner beside running workers** (``Trainer.learns_asynchronously``: A3C with several
  workers, IMPALA, APPO, Ape-X's learner thread): the workers hold the other cores while it
  learns, and a parallel region whose threads wait for busy cores costs more than it
  splits, so it takes one thread.

Flush-to-zero: a torch learner's arithmetic flushes subnormal floats to zero
(:func:`flush_denormals`, turned on when ``rlstack.policies.torch_policy`` is imported,
before torch starts its intra-op threads, which copy their creator's mode). The last
trainer to stop puts the calling thread's mode back as it was before rlstack first set it;
torch's intra-op threads started meanwhile keep theirs (the mode has no cross-thread
setter).

TensorFlow fixes its thread pools at its first op, once per process, so they cannot follow
a trainer's life: a TF learner on a dense built-in model keeps one intra-op thread in every
case (``TFPolicy``: its small matmuls ran faster on one thread than on TF's default pool
also with the workers waiting; BENCHMARKS.md), which is the same rule's answer for a
learner whose math is too small to split.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass


def torch_default_threads() -> int:
    """The intra-op threads torch starts with when nothing sets them: one per physical
    core this process may run on."""
    import psutil

    physical = psutil.cpu_count(logical=False) or os.cpu_count() or 1
    allowed = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else physical
    return max(1, min(physical, allowed))


# The calling thread's flush-to-zero mode before rlstack first set it (None: not yet set),
# and how many live trainers rely on it being on.
_flush_before: bool | None = None
_trainers_flushing = 0


def denormals_flushed() -> bool:
    """Whether the calling thread flushes subnormal floats to zero (torch has no getter:
    a subnormal result tells)."""
    import torch

    return (torch.tensor([1e-40], dtype=torch.float32) * 1.0).item() == 0.0


def flush_denormals() -> None:
    """Flushes subnormal floats to zero in the calling thread and the threads it starts
    later. Adam's second moment of a weight whose gradient went to zero (the weights into a
    dead ReLU unit) decays through the subnormal range for thousands of steps, where the
    CPU's arithmetic on it is microcoded and an update takes several times as long
    (BENCHMARKS.md); TensorFlow flushes them in its own threads."""
    global _flush_before
    import torch

    if _flush_before is None:
        _flush_before = denormals_flushed()
    torch.set_flush_denormal(True)


def learner_intra_op_threads(beside_workers: bool) -> int | None:
    """The intra-op threads for a torch learner, or None to leave torch as it is (every
    core, or what the user set): see the module docstring."""
    if not beside_workers or "OMP_NUM_THREADS" in os.environ:
        return None
    import torch

    if torch.get_num_threads() != torch_default_threads():
        return None  # set before the trainer was built: the user's choice
    return 1


@dataclass
class LearnerThreads:
    """What a trainer changed in its process, to put back when it stops.

    Attributes:
        previous: torch's intra-op threads before the trainer set them (None: unchanged).
        flushing: whether this trainer counts among those that keep flush-to-zero on.
    """

    previous: int | None = None
    flushing: bool = False

    @classmethod
    def apply(cls, framework: str, beside_workers: bool) -> LearnerThreads:
        """Sets a torch learner's threads by the rule and keeps flush-to-zero on while it
        lives; TF's pools are set by its policy."""
        global _trainers_flushing
        if framework != "torch" or "torch" not in sys.modules:
            return cls()
        import torch

        flush_denormals()  # again: a trainer stopped earlier may have put the mode back
        _trainers_flushing += 1
        threads = learner_intra_op_threads(beside_workers)
        previous = torch.get_num_threads()
        if threads is None or threads == previous:
            return cls(flushing=True)
        torch.set_num_threads(threads)
        return cls(previous, flushing=True)

    def restore(self) -> None:
        """Puts torch's threads back as they were before :meth:`apply`, and the calling
        thread's flush-to-zero mode when no other trainer needs it (once)."""
        global _trainers_flushing
        if self.previous is not None:
            import torch

            torch.set_num_threads(self.previous)
            self.previous = None
        if self.flushing:
            self.flushing = False
            _trainers_flushing -= 1
            if _trainers_flushing == 0 and _flush_before is False:
                import torch

                torch.set_flush_denormal(False)
