"""Classic RLlib 1.x's ``ray.rllib.policy.sample_batch``, at its renamed path.

rlstack's :class:`~rlstack.sample_batch.SampleBatch` lives in ``rlstack.sample_batch``;
this module offers it, :func:`concat_samples` and ``DEFAULT_POLICY_ID`` where 1.x scripts
import them after the rename. rlstack trains one policy per trainer, so 1.x's multi-agent
``MultiAgentBatch`` is not here: importing it raises an ImportError that says so.
"""

from __future__ import annotations

from typing import Any

from rlstack.sample_batch import DEFAULT_POLICY_ID, SampleBatch, concat_samples

__all__ = ["DEFAULT_POLICY_ID", "SampleBatch", "concat_samples"]

_MISSING = {
    "MultiAgentBatch": "rlstack trains one policy per trainer (multi-agent training is not implemented yet); "
                       "a trainer's batches are plain SampleBatch objects",
    "convert_ma_batch_to_sample_batch": "rlstack's batches are already SampleBatch objects",
}


def __getattr__(name: str) -> Any:
    if name in _MISSING:
        raise ImportError(f"rlstack.policies.sample_batch has no {name} (RLlib 1.x's "
                          f"ray.rllib.policy.sample_batch.{name}): {_MISSING[name]}. It offers "
                          f"{', '.join(__all__)}. See README, 'Migrating from RLlib 1.x'.", name=name)
    raise AttributeError(f"module 'rlstack.policies.sample_batch' has no attribute {name!r}")
