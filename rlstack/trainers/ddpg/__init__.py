"""DDPG (Lillicrap et al. 2016): ``DDPGTrainer`` and its ``DEFAULT_CONFIG``, imported on
first use. TD3 (``rlstack.trainers.td3``) runs on this folder's policies."""

from rlstack.trainers.registry import lazy_exports

# The declaration rlstack's registry finds (see rlstack/trainers/registry.py).
TRAINERS = {"DDPG": "rlstack.trainers.ddpg.ddpg:DDPGTrainer"}
PUBLIC = {"DEFAULT_CONFIG": "rlstack.trainers.ddpg.ddpg:DEFAULT_CONFIG"}

__getattr__, __dir__, __all__ = lazy_exports(__name__, TRAINERS, PUBLIC)
