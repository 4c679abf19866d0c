"""EnvContext: the ``env_config`` dict plus where the env runs."""

from __future__ import annotations

from collections.abc import Mapping


class EnvContext(dict):
    """The ``env_config`` dict handed to env creators, with the env's place in the run.

    It is a plain ``dict`` of the user's ``env_config`` so existing creators that read
    ``config["key"]`` keep working; the attributes say which copy of the env this is.

    Args:
        env_config: The user's ``env_config``.
        worker_index: 0 for the driver's local worker, 1..N for remote rollout workers.
        vector_index: Index of this sub-env inside the worker's vector env.
        num_workers: Number of remote rollout workers in the run.
    """

    def __init__(
        self,
        env_config: Mapping[str, object] | None = None,
        worker_index: int = 0,
        vector_index: int = 0,
        num_workers: int = 0,
    ) -> None:
        super().__init__(env_config or {})
        self.worker_index = worker_index
        self.vector_index = vector_index
        self.num_workers = num_workers

    def copy_with(self, **overrides: int) -> "EnvContext":
        """Returns a copy with some of the index attributes replaced."""
        values = {
            "worker_index": self.worker_index,
            "vector_index": self.vector_index,
            "num_workers": self.num_workers,
            **overrides,
        }
        return EnvContext(dict(self), **values)

    def __repr__(self) -> str:
        return (
            f"EnvContext({dict.__repr__(self)}, worker_index={self.worker_index}, "
            f"vector_index={self.vector_index}, num_workers={self.num_workers})"
        )
