"""The DQN family: DQNTrainer (local replay) and ApeXTrainer (distributed replay;
``ApexTrainer`` is its RLlib 1.13 spelling), imported on first use."""

from rlstack.trainers.common.registry import lazy_exports

# The declaration rlstack's registry finds (see rlstack/trainers/common/registry.py).
TRAINERS = {
    "APEX": "rlstack.trainers.dqn.apex:ApeXTrainer",
    "DQN": "rlstack.trainers.dqn.dqn:DQNTrainer",
}
PUBLIC = {
    "DQNConfig": "rlstack.trainers.dqn.dqn_config:DQNConfig",
    "ApexDQNConfig": "rlstack.trainers.dqn.dqn_config:ApexDQNConfig",
    "APEX_DEFAULT_CONFIG": "rlstack.trainers.dqn.apex:APEX_DEFAULT_CONFIG",
    "ApexTrainer": "rlstack.trainers.dqn.apex:ApexTrainer",
    "DEFAULT_CONFIG": "rlstack.trainers.dqn.dqn:DEFAULT_CONFIG",
    "DQNTFPolicy": "rlstack.trainers.dqn.dqn_tf_policy:DQNTFPolicy",
    "DQNTorchPolicy": "rlstack.trainers.dqn.dqn_torch_policy:DQNTorchPolicy",
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, TRAINERS, PUBLIC)
