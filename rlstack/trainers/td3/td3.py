"""TD3Trainer: twin delayed DDPG (Fujimoto et al. 2018, "Addressing Function
Approximation Error in Actor-Critic Methods") with classic RLlib 1.13's config.

As in 1.13, TD3 is DDPG with its three tricks on, so it runs on DDPG's policies
(``rlstack.trainers.ddpg.ddpg_torch_policy`` / ``ddpg_tf_policy``, named by path) and
DDPG's checks: clipped double Q (``twin_q``), delayed actor updates (``policy_delay``)
and target policy smoothing (``smooth_target_policy``), with Gaussian exploration noise
after ``random_timesteps`` uniformly random steps. The training step is
:class:`~rlstack.trainers.common.off_policy.OffPolicyTrainer`'s.
"""

from __future__ import annotations

from typing import Any

from rlstack.trainers.common.config import DefaultConfig, merge_config
from rlstack.trainers.ddpg.ddpg import DEFAULT_CONFIG as DDPG_DEFAULT_CONFIG
from rlstack.trainers.ddpg.ddpg import DDPG_HOT_KEYS, DDPGFamily
from rlstack.trainers.common.off_policy import OffPolicyTrainer

# Classic RLlib 1.13's TD3 defaults: DDPG's (comments in trainers/ddpg/ddpg.py) with these
# changes, close to the TD3 paper's settings.
DEFAULT_CONFIG: dict[str, Any] = DefaultConfig(merge_config(
    DDPG_DEFAULT_CONFIG,
    {
        # The three tricks: clipped double Q, delayed actor updates, target smoothing
        # with N(0, 0.2^2) noise clipped to +-0.5 (normalized action units).
        "twin_q": True,
        "policy_delay": 2,
        "smooth_target_policy": True,
        "target_noise": 0.2,
        "target_noise_clip": 0.5,
        # Uniformly random actions for 10k sampled steps, then N(0, 0.1^2) noise on the
        # actor's actions at a constant scale 1.
        "exploration_config": {
            "type": "GaussianNoise",
            "random_timesteps": 10000,
            "stddev": 0.1,
            "initial_scale": 1.0,
            "final_scale": 1.0,
            "scale_timesteps": 1,
        },
        "learning_starts": 10000,
        "actor_hiddens": [400, 300],
        "critic_hiddens": [400, 300],
        "n_step": 1,
        "gamma": 0.99,
        "actor_lr": 1e-3,
        "critic_lr": 1e-3,
        # No L2 regularisation, no Huber loss.
        "l2_reg": 0.0,
        "use_huber": False,
        "tau": 5e-3,
        "train_batch_size": 100,
        "target_network_update_freq": 0,
        "num_workers": 0,
        "num_gpus_per_worker": 0,
        "worker_side_prioritization": False,
        "clip_rewards": False,
        "use_state_preprocessor": False,
        # A uniform replay buffer of 1M rows.
        "buffer_size": 1000000,
        "prioritized_replay": False,
    },
    "TD3",
))


class TD3Trainer(DDPGFamily, OffPolicyTrainer):
    """Twin delayed DDPG with the classic RLlib API.

    Examples:
        >>> from rlstack.trainers.td3 import TD3Trainer, DEFAULT_CONFIG
        >>> config = DEFAULT_CONFIG.copy()
        >>> config.update(learning_starts=64, train_batch_size=32, min_sample_timesteps_per_reporting=100,
        ...               actor_hiddens=[32], critic_hiddens=[32], exploration_config={"random_timesteps": 50})
        >>> trainer = TD3Trainer(config, "Pendulum-v1")
        >>> result = trainer.train()
        >>> result["timesteps_total"] >= 100, result["num_env_steps_trained"] > 0
        (True, True)
        >>> trainer.stop()
    """

    _name = "TD3"
    _default_config = DEFAULT_CONFIG
    _HOT_KEYS = (*OffPolicyTrainer._HOT_KEYS, *DDPG_HOT_KEYS)
