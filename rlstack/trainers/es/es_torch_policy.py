"""ES's torch policy: it acts (compute_single_action, export) and holds the weights
that checkpoints save; it never learns by gradient (the trainer's search moves its weights)."""

from __future__ import annotations

from typing import Any

from rlstack.errors import RLStackError
from rlstack.policies.torch_policy import TorchPolicy


class ESTorchPolicy(TorchPolicy):
    """The built-in (or numpy-equivalent) network in torch, for acting only."""

    def loss(self, train_batch: dict[str, Any]) -> Any:
        raise RLStackError("ES moves the weights by black-box search (ESTrainer.train()); its policy has no loss.")
