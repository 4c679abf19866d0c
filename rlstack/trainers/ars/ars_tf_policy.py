"""ARS's TensorFlow policy: it acts (compute_single_action, export) and holds the
weights that checkpoints save; it never learns by gradient (the trainer's search moves its weights)."""

from __future__ import annotations

from typing import Any

from rlstack.errors import RLStackError
from rlstack.policies.tf_policy import TFPolicy


class ARSTFPolicy(TFPolicy):
    """The built-in (or numpy-equivalent) network in TensorFlow, for acting only."""

    def loss(self, train_batch: dict[str, Any]) -> Any:
        raise RLStackError("ARS moves the weights by black-box search (ARSTrainer.train()); its policy has no loss.")
