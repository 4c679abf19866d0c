"""Vanilla policy gradient: PGTrainer (REINFORCE, discounted returns, no critic),
imported on first use, as in RLlib 1.13's ``ray.rllib.agents.pg``."""

from rlstack.trainers.common.registry import lazy_exports

# The declaration rlstack's registry finds (see rlstack/trainers/common/registry.py).
TRAINERS = {"PG": "rlstack.trainers.pg.pg:PGTrainer"}
PUBLIC = {
    "PGConfig": "rlstack.trainers.pg.pg_config:PGConfig",
    "DEFAULT_CONFIG": "rlstack.trainers.pg.pg:DEFAULT_CONFIG",
    "post_process_advantages": "rlstack.trainers.pg.pg_policy:post_process_advantages",
    "PGTFPolicy": "rlstack.trainers.pg.pg_tf_policy:PGTFPolicy",
    "PGTorchPolicy": "rlstack.trainers.pg.pg_torch_policy:PGTorchPolicy",
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, TRAINERS, PUBLIC)
