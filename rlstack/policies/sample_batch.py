"""Classic RLlib 1.x's ``ray.rllib.policy.sample_batch``, at its renamed path.

rlstack's :class:`~rlstack.sample_batch.SampleBatch` and
:class:`~rlstack.sample_batch.MultiAgentBatch` live in ``rlstack.sample_batch``; this
module offers them, :func:`concat_samples` and ``DEFAULT_POLICY_ID`` where 1.x scripts
import them after the rename.
"""

from __future__ import annotations

from typing import Any

from rlstack.sample_batch import DEFAULT_POLICY_ID, MultiAgentBatch, SampleBatch, concat_samples

__all__ = ["DEFAULT_POLICY_ID", "MultiAgentBatch", "SampleBatch", "concat_samples"]

_MISSING = {
    "convert_ma_batch_to_sample_batch": "a single-agent trainer's batches are SampleBatch objects already; a "
                                        "MultiAgentBatch holds one per policy in .policy_batches",
}


def __getattr__(name: str) -> Any:
    if name in _MISSING:
        raise ImportError(f"rlstack.policies.sample_batch has no {name} (RLlib's "
                          f"ray.rllib.policy.sample_batch.{name}): {_MISSING[name]}. It offers "
                          f"{', '.join(__all__)}. See the docs' 'Migrating from RLlib 1.x' page (docs/migrating.md).",
                          name=name)
    raise AttributeError(f"module 'rlstack.policies.sample_batch' has no attribute {name!r}")
