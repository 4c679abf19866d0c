"""PPOTrainer: proximal policy optimisation (Schulman et al. 2017), classic RLlib style.

One iteration: the workers sample ``train_batch_size`` steps (GAE computed on the
workers), advantages are standardised over the batch, the learner runs
``num_sgd_iter`` epochs of minibatch SGD on the clipped surrogate with an adaptive KL
penalty, and the new weights go back to the workers. Multi-agent, each policy of
``policies_to_train`` does so on its own rows.
"""

from __future__ import annotations

from typing import Any

from rlstack.errors import ConfigError
from rlstack.policies.policy import Policy
from rlstack.policies.postprocessing import postprocess_advantages, standardize
from rlstack.sample_batch import SampleBatch
from rlstack.trainers.common.config import COMMON_CONFIG, DefaultConfig, merge_config, require_stochastic_sampling
from rlstack.trainers.common.trainer import Trainer
from rlstack.trainers.ppo.ppo_config import PPOConfig as PPOConfig  # 1.13's module path of PPOConfig

# Classic RLlib 1.x PPO defaults, on top of COMMON_CONFIG.
DEFAULT_CONFIG: dict[str, Any] = DefaultConfig(merge_config(
    {
        **COMMON_CONFIG,
        # Use a value function (critic) as baseline; False gives REINFORCE-style returns.
        "use_critic": True,
        # Use generalised advantage estimation (GAE).
        "use_gae": True,
        # GAE lambda.
        "lambda": 1.0,
        # Initial coefficient of the KL penalty (adapted toward kl_target).
        "kl_coeff": 0.2,
        # Target KL divergence between the old and the new policy per update.
        "kl_target": 0.01,
        # Minibatch size of each SGD step within an epoch.
        "sgd_minibatch_size": 128,
        # Shuffle the train batch before each epoch (always on: kept for old configs).
        "shuffle_sequences": True,
        # Number of SGD epochs over each train batch.
        "num_sgd_iter": 30,
        # PPO's clip parameter epsilon: the ratio is clipped to [1 - eps, 1 + eps].
        "clip_param": 0.3,
        # Clips the squared value error at this value (a clip of the value *loss*),
        # which keeps rare huge returns from dominating the update; scale it with your
        # rewards.
        "vf_clip_param": 10.0,
        # Weight of the value loss in the total loss.
        "vf_loss_coeff": 1.0,
        # Weight of the entropy bonus.
        "entropy_coeff": 0.0,
        # [[timestep, coeff], ...] piecewise-linear schedule of entropy_coeff.
        "entropy_coeff_schedule": None,
    },
    {
        "rollout_fragment_length": 200,
        "train_batch_size": 4000,
        "lr": 5e-5,
    },
    "PPO",
))


class PPOTrainer(Trainer):
    """Proximal policy optimisation with the classic RLlib API.

    Examples:
        >>> from rlstack.trainers.ppo import PPOTrainer, DEFAULT_CONFIG
        >>> config = DEFAULT_CONFIG.copy()
        >>> config.update(num_workers=0, train_batch_size=400, sgd_minibatch_size=100, num_sgd_iter=2)
        >>> trainer = PPOTrainer(config, "CartPole-v1")
        >>> result = trainer.train()
        >>> result["timesteps_total"], result["training_iteration"]
        (400, 1)
        >>> trainer.stop()
    """

    _name = "PPO"
    _default_config = DEFAULT_CONFIG
    postprocess_fn = staticmethod(postprocess_advantages)
    supports_recurrent_models = True

    @classmethod
    def validate_config(cls, config: dict[str, Any]) -> None:
        """Checks PPO's keys.

        Raises:
            ConfigError: Naming the key, the value and the fix.
        """
        require_stochastic_sampling(config)
        for key in ("sgd_minibatch_size", "num_sgd_iter"):
            if not isinstance(config[key], int) or isinstance(config[key], bool) or config[key] < 1:
                raise ConfigError(f"{key} must be an integer >= 1, got {config[key]!r}.")
        for key in ("clip_param", "vf_clip_param", "kl_target", "kl_coeff", "entropy_coeff", "vf_loss_coeff", "lambda"):
            if not isinstance(config[key], (int, float)) or isinstance(config[key], bool):
                raise ConfigError(f"{key} must be a number, got {config[key]!r}.")
        if config["sgd_minibatch_size"] > config["train_batch_size"]:
            raise ConfigError(
                f"sgd_minibatch_size ({config['sgd_minibatch_size']}) must be <= train_batch_size "
                f"({config['train_batch_size']}): each SGD step takes a minibatch out of the train batch. "
                "Lower sgd_minibatch_size or raise train_batch_size."
            )
        for key in ("clip_param", "vf_clip_param", "kl_target"):
            if not config[key] > 0:
                raise ConfigError(f"{key} must be > 0, got {config[key]!r}.")
        for key in ("kl_coeff", "entropy_coeff", "vf_loss_coeff"):
            if config[key] < 0:
                raise ConfigError(f"{key} must be >= 0, got {config[key]!r}.")
        if not 0.0 <= config["lambda"] <= 1.0:
            raise ConfigError(f"lambda must be in [0, 1], got {config['lambda']!r}.")
        if config["use_gae"] and not config["use_critic"]:
            raise ConfigError("use_gae=True needs use_critic=True (GAE uses the value function); set use_gae=False.")

    policy_classes = {"torch": "rlstack.trainers.ppo.ppo_torch_policy:PPOTorchPolicy",
                      "tf": "rlstack.trainers.ppo.ppo_tf_policy:PPOTFPolicy"}

    def learn_on_policy_batch(self, policy: Policy, batch: SampleBatch) -> dict[str, Any]:
        # Advantages standardised over the policy's own rows (multi-agent: per policy).
        return policy.learn_on_batch(standardize(batch, SampleBatch.ADVANTAGES))
