"""PPOConfig: RLlib 1.13's config object for PPO (``PPOConfig().training(lambda_=0.95).build()``);
``rlstack.trainers.ppo.ppo`` offers it too, 1.13's module path."""

from rlstack.trainers.trainer_config import TrainerConfig

__all__ = ["PPOConfig"]


class PPOConfig(TrainerConfig):
    """PPO's config object: ``training()`` takes PPO's keys (``lambda_``, ``kl_coeff``,
    ``sgd_minibatch_size``, ``num_sgd_iter``, ...) and ``build()`` returns a ``PPOTrainer``.

    Examples:
        >>> from rlstack.trainers.ppo import PPOConfig
        >>> config = PPOConfig().training(lambda_=0.95, num_sgd_iter=10).rollouts(num_rollout_workers=0)
        >>> config.to_dict()["lambda"], config.num_sgd_iter, config.num_workers
        (0.95, 10, 0)
    """

    _algorithm = "PPO"
