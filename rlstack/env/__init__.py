"""Environments: registration, creation, the legacy-gym adapter, the vector env, and
multi-agent envs (:class:`MultiAgentEnv`, :func:`make_multi_agent`) and PettingZoo's
games as multi-agent envs (:class:`PettingZooEnv`, :class:`ParallelPettingZooEnv`); envs that
run their own loop (:class:`ExternalEnv`) and simulators connecting over HTTP
(:class:`PolicyServerInput`, :class:`PolicyClient`)."""

from typing import Any

from rlstack.env.base_env import BaseEnv
from rlstack.env.env_context import EnvContext
from rlstack.env.external_env import ExternalEnv
from rlstack.env.legacy import LegacyEnvAdapter
from rlstack.env.multi_agent_env import MultiAgentEnv, make_multi_agent
from rlstack.env.registry import make_env, register_env, registered_envs
from rlstack.env.vector_env import VectorEnv
from rlstack.env.wrappers.pettingzoo_env import ParallelPettingZooEnv, PettingZooEnv

__all__ = ["BaseEnv", "EnvContext", "ExternalEnv", "LegacyEnvAdapter", "MultiAgentEnv", "ParallelPettingZooEnv",
           "PettingZooEnv", "PolicyClient", "PolicyServerInput", "VectorEnv", "make_env", "make_multi_agent",
           "register_env", "registered_envs"]

_LAZY = {"PolicyClient": "rlstack.env.policy_client", "PolicyServerInput": "rlstack.evaluation.policy_server_input"}


def __getattr__(name: str) -> Any:
    # The HTTP pieces import the worker's packages: only when asked for.
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'rlstack.env' has no attribute {name!r}")
