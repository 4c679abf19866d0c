"""PPO: ``PPOTrainer`` and its ``DEFAULT_CONFIG``, imported on first use."""

from rlstack.trainers.common.registry import lazy_exports

# The declaration rlstack's registry finds (see rlstack/trainers/common/registry.py).
TRAINERS = {"PPO": "rlstack.trainers.ppo.ppo:PPOTrainer"}
PUBLIC = {
    # The config object (1.13's PPOConfig; rlstack.trainers.ppo.ppo offers it too).
    "PPOConfig": "rlstack.trainers.ppo.ppo_config:PPOConfig",
    "DEFAULT_CONFIG": "rlstack.trainers.ppo.ppo:DEFAULT_CONFIG",
    # 1.13 exported APPO from its PPO package too (`from ray.rllib.agents.ppo import APPOTrainer`).
    "APPOTrainer": "rlstack.trainers.ppo.appo:APPOTrainer",
    "APPOConfig": "rlstack.trainers.ppo.appo:APPOConfig",
    "PPOTFPolicy": "rlstack.trainers.ppo.ppo_tf_policy:PPOTFPolicy",
    "PPOTorchPolicy": "rlstack.trainers.ppo.ppo_torch_policy:PPOTorchPolicy",
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, TRAINERS, PUBLIC)
