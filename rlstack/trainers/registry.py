"""RLlib 1.13's module path of the algorithm registry (``ray.rllib.agents.registry``):
``get_trainer_class``, ``ALGORITHMS`` and the declarations they come from live in
``rlstack/trainers/common/registry.py``."""

from rlstack.trainers.common.registry import (
    ALGORITHMS,
    Declaration,
    declarations,
    get_trainer_class,
    install_tune_names,
    lazy_exports,
    load,
    scan,
    trainer_class_names,
)

__all__ = [
    "ALGORITHMS",
    "Declaration",
    "declarations",
    "get_trainer_class",
    "install_tune_names",
    "lazy_exports",
    "load",
    "scan",
    "trainer_class_names",
]
