"""Classic RLlib's ``ray.rllib.execution.rollout_ops``: the sampling call a custom
``Trainer.training_iteration`` makes. rlstack has no execution-plan operators; this is
the one function 1.13's training_iteration examples use. It lives in
``rlstack.evaluation.worker_set`` (a layer above this package) and is found on first use.
"""

from typing import Any

__all__ = ["synchronous_parallel_sample"]


def __getattr__(name: str) -> Any:
    if name == "synchronous_parallel_sample":
        from rlstack.evaluation.worker_set import synchronous_parallel_sample

        return synchronous_parallel_sample
    if name.startswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from rlstack._missing_modules import MissingModuleError

    # 1.13's execution-plan operators (ParallelRollouts, ConcatBatches, ...).
    raise MissingModuleError(
        f"rlstack.execution.rollout_ops has no {name} (RLlib's ray.rllib.execution.rollout_ops.{name}): rlstack has "
        "no execution-plan operators; a Trainer's training_step() (1.13: training_iteration()) calls "
        "synchronous_parallel_sample(worker_set, max_env_steps=...) from this module and WorkerSet.sample() "
        "directly.", name=f"{__name__}.{name}")
