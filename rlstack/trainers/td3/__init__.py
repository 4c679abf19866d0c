"""TD3 (Fujimoto et al. 2018): ``TD3Trainer`` and its ``DEFAULT_CONFIG`` (also
``TD3_DEFAULT_CONFIG``, 1.13's name), imported on first use. It runs on DDPG's policies
(``rlstack.trainers.ddpg``)."""

from rlstack.trainers.common.registry import lazy_exports

# The declaration rlstack's registry finds (see rlstack/trainers/common/registry.py).
TRAINERS = {"TD3": "rlstack.trainers.td3.td3:TD3Trainer"}
PUBLIC = {
    "TD3Config": "rlstack.trainers.td3.td3_config:TD3Config",
    "DEFAULT_CONFIG": "rlstack.trainers.td3.td3:DEFAULT_CONFIG",
    "TD3_DEFAULT_CONFIG": "rlstack.trainers.td3.td3:DEFAULT_CONFIG",
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, TRAINERS, PUBLIC)
