"""Environments: registration, creation, the legacy-gym adapter, the vector env, and
multi-agent envs (:class:`MultiAgentEnv`, :func:`make_multi_agent`) and PettingZoo's
games as multi-agent envs (:class:`PettingZooEnv`, :class:`ParallelPettingZooEnv`)."""

from rlstack.env.base_env import BaseEnv
from rlstack.env.env_context import EnvContext
from rlstack.env.legacy import LegacyEnvAdapter
from rlstack.env.multi_agent_env import MultiAgentEnv, make_multi_agent
from rlstack.env.registry import make_env, register_env, registered_envs
from rlstack.env.vector_env import VectorEnv
from rlstack.env.wrappers.pettingzoo_env import ParallelPettingZooEnv, PettingZooEnv

__all__ = ["BaseEnv", "EnvContext", "LegacyEnvAdapter", "MultiAgentEnv", "ParallelPettingZooEnv", "PettingZooEnv",
           "VectorEnv", "make_env", "make_multi_agent", "register_env", "registered_envs"]
