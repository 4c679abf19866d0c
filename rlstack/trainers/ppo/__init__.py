"""PPO: ``PPOTrainer`` and its ``DEFAULT_CONFIG``."""

from rlstack.trainers.ppo.ppo import DEFAULT_CONFIG, PPOTrainer

__all__ = ["DEFAULT_CONFIG", "PPOTrainer"]
