"""RLlib 1.13's ``ray.rllib.execution.buffers``: the replay buffer a custom
``training_iteration`` keeps (``multi_agent_replay_buffer.MultiAgentReplayBuffer``), on
rlstack's buffers (``rlstack.execution.replay_buffer``)."""
