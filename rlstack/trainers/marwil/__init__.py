"""Learning from recorded experience: MARWILTrainer (advantage-weighted imitation) and
BCTrainer (behaviour cloning, MARWIL with ``beta`` 0), imported on first use, as in
RLlib 1.13's ``ray.rllib.agents.marwil``."""

from rlstack.trainers.common.registry import lazy_exports

# The declaration rlstack's registry finds (see rlstack/trainers/common/registry.py).
TRAINERS = {
    "MARWIL": "rlstack.trainers.marwil.marwil:MARWILTrainer",
    "BC": "rlstack.trainers.marwil.bc:BCTrainer",
}
PUBLIC = {
    "MARWILConfig": "rlstack.trainers.marwil.marwil_config:MARWILConfig",
    "BCConfig": "rlstack.trainers.marwil.marwil_config:BCConfig",
    "DEFAULT_CONFIG": "rlstack.trainers.marwil.marwil:DEFAULT_CONFIG",
    "BC_DEFAULT_CONFIG": "rlstack.trainers.marwil.bc:BC_DEFAULT_CONFIG",
    "MARWILTFPolicy": "rlstack.trainers.marwil.marwil_tf_policy:MARWILTFPolicy",
    "MARWILTorchPolicy": "rlstack.trainers.marwil.marwil_torch_policy:MARWILTorchPolicy",
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, TRAINERS, PUBLIC)
