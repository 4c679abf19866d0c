"""Evolution strategies: ESTrainer (OpenAI-ES: antithetic noise from a shared table,
centered ranks, Adam), imported on first use, as in RLlib 1.13's ``ray.rllib.agents.es``."""

from rlstack.trainers.common.registry import lazy_exports

# The declaration rlstack's registry finds (see rlstack/trainers/common/registry.py).
TRAINERS = {"ES": "rlstack.trainers.es.es:ESTrainer"}
PUBLIC = {
    "ESConfig": "rlstack.trainers.es.es_config:ESConfig",
    "DEFAULT_CONFIG": "rlstack.trainers.es.es:DEFAULT_CONFIG",
    "ESTFPolicy": "rlstack.trainers.es.es_tf_policy:ESTFPolicy",
    "ESTorchPolicy": "rlstack.trainers.es.es_torch_policy:ESTorchPolicy",
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, TRAINERS, PUBLIC)
