"""IMPALA (Espeholt et al. 2018): asynchronous actor-learner training with V-trace."""

from rlstack.trainers.impala.impala import DEFAULT_CONFIG, IMPALATrainer, ImpalaTrainer

__all__ = ["DEFAULT_CONFIG", "IMPALATrainer", "ImpalaTrainer"]
