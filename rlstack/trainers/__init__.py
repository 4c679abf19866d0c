"""Trainers: one package per algorithm, and ``common/``, the Trainer base and the machinery the
algorithms share (config, registry, checkpoint files, ...)."""

from typing import Any

from rlstack.trainers.common.registry import ALGORITHMS, get_trainer_class

__all__ = ["ALGORITHMS", "get_trainer_class", "with_common_config"]


def __getattr__(name: str) -> Any:
    # 1.13's `from ray.rllib.agents import with_common_config`; common/trainer.py imports Ray Tune,
    # so it loads on first use.
    if name == "with_common_config":
        from rlstack.trainers.common.trainer import with_common_config

        return with_common_config
    raise AttributeError(f"module 'rlstack.trainers' has no attribute {name!r}")
