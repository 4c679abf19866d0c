"""1.13's path of TD3, ``ray.rllib.agents.ddpg.td3`` (``from ray.rllib.agents.ddpg import
TD3Trainer``): the trainer lives in its own folder, ``rlstack.trainers.td3``; this module
names it where 1.13 scripts import it from after the renames."""

from rlstack.trainers.td3.td3 import DEFAULT_CONFIG as TD3_DEFAULT_CONFIG
from rlstack.trainers.td3.td3 import TD3Trainer
from rlstack.trainers.td3.td3_config import TD3Config

__all__ = ["TD3Config", "TD3_DEFAULT_CONFIG", "TD3Trainer"]
