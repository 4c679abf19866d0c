"""Environments: registration, creation, the legacy-gym adapter and the vector env."""

from rlstack.env.base_env import BaseEnv
from rlstack.env.env_context import EnvContext
from rlstack.env.legacy import LegacyEnvAdapter
from rlstack.env.registry import make_env, register_env, registered_envs
from rlstack.env.vector_env import VectorEnv

__all__ = ["BaseEnv", "EnvContext", "LegacyEnvAdapter", "VectorEnv", "make_env", "register_env", "registered_envs"]
