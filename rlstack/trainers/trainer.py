"""RLlib 1.13's module path of the Trainer base (``ray.rllib.agents.trainer``): ``Trainer``,
``COMMON_CONFIG`` and ``with_common_config`` live in ``rlstack/trainers/common/trainer.py``
with the rest of the machinery the algorithms share."""

from rlstack.trainers.common.trainer import COMMON_CONFIG, DEFAULT_POLICY_ID, Trainer, with_common_config

__all__ = ["COMMON_CONFIG", "DEFAULT_POLICY_ID", "Trainer", "with_common_config"]
