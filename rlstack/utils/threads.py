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
    """

    previous: int | None = None

    @classmethod
    def apply(cls, framework: str, beside_workers: bool) -> LearnerThreads:
        """Sets a torch learner's threads by the rule; TF's pools are set by its policy."""
        if framework != "torch" or "torch" not in sys.modules:
            return cls()
        threads = learner_intra_op_threads(beside_workers)
        if threads is None:
            return cls()
        import torch

        previous = torch.get_num_threads()
        if threads == previous:
            return cls()
        torch.set_num_threads(threads)
        return cls(previous)

    def restore(self) -> None:
        """Puts torch's threads back as they were before :meth:`apply` (once)."""
        if self.previous is not None:
            import torch

            torch.set_num_threads(self.previous)
            self.previous = None
