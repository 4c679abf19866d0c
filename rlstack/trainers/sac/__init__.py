"""SAC: ``SACTrainer`` and its ``DEFAULT_CONFIG``, imported on first use."""

from rlstack.trainers.common.registry import lazy_exports

# The declaration rlstack's registry finds (see rlstack/trainers/common/registry.py).
TRAINERS = {"SAC": "rlstack.trainers.sac.sac:SACTrainer"}
PUBLIC = {
    "SACConfig": "rlstack.trainers.sac.sac_config:SACConfig",
    "DEFAULT_CONFIG": "rlstack.trainers.sac.sac:DEFAULT_CONFIG",
    "SACTFPolicy": "rlstack.trainers.sac.sac_tf_policy:SACTFPolicy",
    "SACTorchPolicy": "rlstack.trainers.sac.sac_torch_policy:SACTorchPolicy",
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, TRAINERS, PUBLIC)
