"""IMPALA (Espeholt et al. 2018): asynchronous actor-learner training with V-trace;
``IMPALATrainer`` (``ImpalaTrainer`` is its RLlib 1.13 spelling), imported on first use."""

from rlstack.trainers.common.registry import lazy_exports

# The declaration rlstack's registry finds (see rlstack/trainers/common/registry.py).
TRAINERS = {"IMPALA": "rlstack.trainers.impala.impala:IMPALATrainer"}
PUBLIC = {
    "IMPALAConfig": "rlstack.trainers.impala.impala_config:IMPALAConfig",
    "ImpalaConfig": "rlstack.trainers.impala.impala_config:ImpalaConfig",
    "DEFAULT_CONFIG": "rlstack.trainers.impala.impala:DEFAULT_CONFIG",
    "ImpalaTrainer": "rlstack.trainers.impala.impala:ImpalaTrainer",
    "ImpalaTFPolicy": "rlstack.trainers.impala.impala_tf_policy:ImpalaTFPolicy",
    "ImpalaTorchPolicy": "rlstack.trainers.impala.impala_torch_policy:ImpalaTorchPolicy",
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, TRAINERS, PUBLIC)
