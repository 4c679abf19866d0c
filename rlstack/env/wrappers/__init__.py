"""Adapters of other libraries' envs to rlstack's (1.13's ``ray.rllib.env.wrappers``):
PettingZoo's AEC and parallel games as :class:`~rlstack.env.multi_agent_env.MultiAgentEnv`
(``pettingzoo_env``)."""
