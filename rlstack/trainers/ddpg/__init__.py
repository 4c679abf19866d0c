"""DDPG (Lillicrap et al. 2016): ``DDPGTrainer`` and its ``DEFAULT_CONFIG``, and Ape-X DDPG
(``ApexDDPGTrainer``, ``apex.py``), imported on first use. TD3 (``rlstack.trainers.td3``)
runs on this folder's policies."""

from rlstack.trainers.common.registry import lazy_exports

# The declaration rlstack's registry finds (see rlstack/trainers/common/registry.py).
TRAINERS = {
    "DDPG": "rlstack.trainers.ddpg.ddpg:DDPGTrainer",
    "APEX_DDPG": "rlstack.trainers.ddpg.apex:ApexDDPGTrainer",
}
PUBLIC = {
    "DDPGConfig": "rlstack.trainers.ddpg.ddpg_config:DDPGConfig",
    "ApexDDPGConfig": "rlstack.trainers.ddpg.ddpg_config:ApexDDPGConfig",
    "DEFAULT_CONFIG": "rlstack.trainers.ddpg.ddpg:DEFAULT_CONFIG",
    "APEX_DDPG_DEFAULT_CONFIG": "rlstack.trainers.ddpg.apex:APEX_DDPG_DEFAULT_CONFIG",
    # 1.13 exported TD3 from its DDPG package; the trainer is rlstack.trainers.td3's.
    "TD3Trainer": "rlstack.trainers.ddpg.td3:TD3Trainer",
    "TD3Config": "rlstack.trainers.ddpg.td3:TD3Config",
    "TD3_DEFAULT_CONFIG": "rlstack.trainers.ddpg.td3:TD3_DEFAULT_CONFIG",
    "DDPGTFPolicy": "rlstack.trainers.ddpg.ddpg_tf_policy:DDPGTFPolicy",
    "DDPGTorchPolicy": "rlstack.trainers.ddpg.ddpg_torch_policy:DDPGTorchPolicy",
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, TRAINERS, PUBLIC)
