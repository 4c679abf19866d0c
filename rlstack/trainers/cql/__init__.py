"""Conservative Q-learning from recorded experience: CQLTrainer (on SAC), imported on first
use, as in RLlib 1.13's ``ray.rllib.agents.cql``."""

from rlstack.trainers.common.registry import lazy_exports

# The declaration rlstack's registry finds (see rlstack/trainers/common/registry.py).
TRAINERS = {"CQL": "rlstack.trainers.cql.cql:CQLTrainer"}
PUBLIC = {
    "CQLConfig": "rlstack.trainers.cql.cql_config:CQLConfig",
    "CQL_DEFAULT_CONFIG": "rlstack.trainers.cql.cql:CQL_DEFAULT_CONFIG",
    "DEFAULT_CONFIG": "rlstack.trainers.cql.cql:CQL_DEFAULT_CONFIG",
    "CQLTFPolicy": "rlstack.trainers.cql.cql_tf_policy:CQLTFPolicy",
    "CQLTorchPolicy": "rlstack.trainers.cql.cql_torch_policy:CQLTorchPolicy",
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, TRAINERS, PUBLIC)
