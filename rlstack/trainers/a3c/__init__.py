"""Advantage actor-critic: A2CTrainer (synchronous) and A3CTrainer (asynchronous
gradients), imported on first use. ``DEFAULT_CONFIG`` is A3C's, as in RLlib 1.13."""

from rlstack.trainers.common.registry import lazy_exports

# The declaration rlstack's registry finds (see rlstack/trainers/common/registry.py).
TRAINERS = {
    "A2C": "rlstack.trainers.a3c.a2c:A2CTrainer",
    "A3C": "rlstack.trainers.a3c.a3c:A3CTrainer",
}
PUBLIC = {
    "A2CConfig": "rlstack.trainers.a3c.a3c_config:A2CConfig",
    "A3CConfig": "rlstack.trainers.a3c.a3c_config:A3CConfig",
    "A2C_DEFAULT_CONFIG": "rlstack.trainers.a3c.a2c:A2C_DEFAULT_CONFIG",
    "DEFAULT_CONFIG": "rlstack.trainers.a3c.a3c:DEFAULT_CONFIG",
    "A3CTFPolicy": "rlstack.trainers.a3c.a3c_tf_policy:A3CTFPolicy",
    "A3CTorchPolicy": "rlstack.trainers.a3c.a3c_torch_policy:A3CTorchPolicy",
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, TRAINERS, PUBLIC)
