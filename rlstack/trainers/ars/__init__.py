"""Augmented random search: ARSTrainer (ARS v2: top directions, reward-std normalised
steps, observation filter), imported on first use, as in RLlib 1.13's ``ray.rllib.agents.ars``."""

from rlstack.trainers.common.registry import lazy_exports

# The declaration rlstack's registry finds (see rlstack/trainers/common/registry.py).
TRAINERS = {"ARS": "rlstack.trainers.ars.ars:ARSTrainer"}
PUBLIC = {
    "ARSConfig": "rlstack.trainers.ars.ars_config:ARSConfig",
    "DEFAULT_CONFIG": "rlstack.trainers.ars.ars:DEFAULT_CONFIG",
    "ARSTFPolicy": "rlstack.trainers.ars.ars_tf_policy:ARSTFPolicy",
    "ARSTorchPolicy": "rlstack.trainers.ars.ars_torch_policy:ARSTorchPolicy",
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, TRAINERS, PUBLIC)
