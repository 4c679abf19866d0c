"""EnvContext: the ``env_config`` dict plus where the env runs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class EnvContext(dict):
    """The ``env_config`` dict handed to env creators, with the env's place in the run.

    It is a plain ``dict`` of the user's ``env_config`` so existing creators that read
    ``config["key"]`` keep working; the attributes say which copy of the env this is.

    Args:
        env_config: The user's ``env_config``.
        worker_index: 0 for the driver's local worker, 1..N for remote rollout workers.
        vector_index: Index of this sub-env inside the worker's vector env.
        num_workers: Number of remote rollout workers in the run.
        remote: Whether the sub-envs run as Ray actors of their own
            (``remote_worker_envs``).
    """

    def __init__(
        self,
        env_config: Mapping[str, object] | None = None,
        worker_index: int = 0,
        vector_index: int = 0,
        num_workers: int = 0,
        remote: bool = False,
    ) -> None:
        super().__init__(env_config or {})
        self.worker_index = worker_index
        self.vector_index = vector_index
        self.num_workers = num_workers
        self.remote = remote

    def copy_with(self, **overrides: Any) -> "EnvContext":
        """Returns a copy with some of the index attributes replaced."""
        values = {
            "worker_index": self.worker_index,
            "vector_index": self.vector_index,
            "num_workers": self.num_workers,
            "remote": self.remote,
            **overrides,
        }
        return EnvContext(dict(self), **values)

    def copy_with_overrides(
        self,
        env_config: Mapping[str, object] | None = None,
        worker_index: int | None = None,
        vector_index: int | None = None,
        remote: bool | None = None,
        num_workers: int | None = None,
    ) -> "EnvContext":
        """Returns a copy with the given parts replaced (classic RLlib 1.x's name).

        Args:
            env_config: A new ``env_config`` (None: a copy of this one's).
            worker_index: A new worker index (None: keep).
            vector_index: A new sub-env index (None: keep).
            remote: A new ``remote`` flag (None: keep).
            num_workers: A new number of workers (None: keep).

        Returns:
            The new EnvContext; this one is unchanged.
        """
        overrides = {key: value for key, value in (("worker_index", worker_index), ("vector_index", vector_index),
                                                   ("remote", remote), ("num_workers", num_workers))
                     if value is not None}
        copy = self.copy_with(**overrides)
        if env_config is not None:
            copy.clear()
            copy.update(env_config)
        return copy

    def __repr__(self) -> str:
        return (
            f"EnvContext({dict.__repr__(self)}, worker_index={self.worker_index}, "
            f"vector_index={self.vector_index}, num_workers={self.num_workers}, remote={self.remote})"
        )
