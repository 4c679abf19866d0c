"""APPO (asynchronous PPO, the IMPACT paper's algorithm): IMPALA's sampling and learner
thread with PPO's clipped surrogate; ``APPOTrainer`` and its ``DEFAULT_CONFIG``, imported
on first use (1.13's module path ``rlstack.trainers.ppo.appo`` re-exports them)."""

from rlstack.trainers.common.registry import lazy_exports

# The declaration rlstack's registry finds (see rlstack/trainers/common/registry.py).
TRAINERS = {"APPO": "rlstack.trainers.appo.appo:APPOTrainer"}
PUBLIC = {
    "APPOConfig": "rlstack.trainers.appo.appo_config:APPOConfig",
    "DEFAULT_CONFIG": "rlstack.trainers.appo.appo:DEFAULT_CONFIG",
    "APPOTFPolicy": "rlstack.trainers.appo.appo_tf_policy:APPOTFPolicy",
    "APPOTorchPolicy": "rlstack.trainers.appo.appo_torch_policy:APPOTorchPolicy",
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, TRAINERS, PUBLIC)
