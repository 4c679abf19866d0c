"""Classic RLlib 1.x's type aliases (``ray.rllib.utils.typing``) for type hints in user code.

1.13 custom models and policies annotate with ``TensorType``, ``ModelConfigDict`` and
friends; here they are plain aliases (no torch or TF import), so those annotations
resolve after the rename.
"""

from __future__ import annotations

from typing import Any, Union

import numpy as np

# A torch tensor, tf.Tensor or numpy array (kept as Any: naming the framework types would
# import them).
TensorType = Any
TensorStructType = Union[TensorType, dict, tuple]
# Config dicts.
TrainerConfigDict = dict
PartialTrainerConfigDict = dict
AlgorithmConfigDict = dict
ModelConfigDict = dict
EnvConfigDict = dict
# Ids.
PolicyID = str
AgentID = Any
EnvID = Any
# Results and weights.
ResultDict = dict
ModelWeights = Any
ModelGradients = Any
# An env instance or an env creator's return value.
EnvType = Any
EnvCreator = Any
# A gymnasium space's sample, as numpy.
SpaceStruct = Union[np.ndarray, dict, tuple]

__all__ = [
    "AgentID", "AlgorithmConfigDict", "EnvConfigDict", "EnvCreator", "EnvID", "EnvType", "ModelConfigDict",
    "ModelGradients", "ModelWeights", "PartialTrainerConfigDict", "PolicyID", "ResultDict", "SpaceStruct",
    "TensorStructType", "TensorType", "TrainerConfigDict",
]

MultiAgentDict = dict  # agent id -> a value (obs, reward, done, info) for that agent
MultiAgentPolicyConfigDict = dict
EnvObsType = Any
EnvActionType = Any
EnvInfoDict = dict
EpisodeID = int
FileType = Any
GradInfoDict = dict
LearnerStatsDict = dict
LocalOptimizer = Any
ModelInputDict = dict
PolicyState = dict
SampleBatchType = Any
TensorShape = Union[tuple, list]
ViewRequirementsDict = dict
PartialAlgorithmConfigDict = dict
