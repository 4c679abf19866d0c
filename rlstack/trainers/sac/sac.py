"""SACTrainer: soft actor-critic (Haarnoja et al. 2018, "Soft Actor-Critic Algorithms and
Applications") for Box actions, and its discrete form (Christodoulou 2019) for Discrete
actions, with classic RLlib 1.13's config.

The training step is :class:`~rlstack.trainers.common.off_policy.OffPolicyTrainer`'s: workers act
with the actor (in numpy), n-step rows go into replay, the learner takes one gradient step
per ``train_batch_size`` replayed rows on three losses (critics, actor, entropy
coefficient; ``sac_torch_policy.py`` / ``sac_tf_policy.py``), and the target critics move
towards the critics by ``tau`` every ``target_network_update_freq`` sampled steps (0:
after every round).
"""

from __future__ import annotations

import copy
import logging
import numbers
from typing import Any

from rlstack.errors import ConfigError, did_you_mean
from rlstack.trainers.common.config import COMMON_CONFIG, DefaultConfig, merge_config, require_stochastic_sampling
from rlstack.trainers.common.off_policy import REPLAY_CONFIG, OffPolicyTrainer, validate_replay_config
from rlstack.trainers.sac.sac_policy import postprocess_sac

logger = logging.getLogger(__name__)

# 1.13's sub-configs of the two networks (MODEL_DEFAULTS keys; unset keys take
# MODEL_DEFAULTS' values, e.g. conv_filters for image observations).
_Q_MODEL = {
    "fcnet_hiddens": [256, 256],
    "fcnet_activation": "relu",
    "post_fcnet_hiddens": [],
    "post_fcnet_activation": None,
    "custom_model": None,
    "custom_model_config": {},
}
_POLICY_MODEL = copy.deepcopy(_Q_MODEL)
_OPTIMIZATION = {"actor_learning_rate": 3e-4, "critic_learning_rate": 3e-4, "entropy_learning_rate": 3e-4}
# Sub-dicts that merge key by key over these defaults (as 1.13 merged them).
_SUB_CONFIGS = {"Q_model": _Q_MODEL, "policy_model": _POLICY_MODEL, "optimization": _OPTIMIZATION}

# Classic RLlib 1.13's SAC defaults, on top of COMMON_CONFIG and REPLAY_CONFIG.
DEFAULT_CONFIG: dict[str, Any] = DefaultConfig(merge_config(
    {
        **COMMON_CONFIG,
        # (replay keys and comments: trainers/common/off_policy.py's REPLAY_CONFIG; SAC's own
        # defaults of them follow below)
        **REPLAY_CONFIG,
        # === Model ===
        # Two Q networks (each with its own target); targets and the actor use their minimum.
        "twin_q": True,
        # Deprecated in 1.13 and without effect (image observations always get a CNN
        # encoder); accepted for old configs.
        "use_state_preprocessor": False,
        # The Q networks: MODEL_DEFAULTS keys (fcnet_hiddens over concat(obs, action) for
        # Box actions, over obs with one output per action for Discrete actions; images go
        # through conv_filters first). Merged key by key over these defaults.
        "Q_model": copy.deepcopy(_Q_MODEL),
        # The actor: MODEL_DEFAULTS keys, as Q_model but over the observation only.
        "policy_model": copy.deepcopy(_POLICY_MODEL),
        # Box actions reach the env mapped from [-1, 1] onto the bounds (SAC's actor acts
        # in [-1, 1] whatever this says; False is accepted for 1.x configs).
        "normalize_actions": True,
        # Not needed: mapped actions lie within the bounds.
        "clip_actions": False,
        # === Learning ===
        # Target critics move by target <- tau * critics + (1 - tau) * target (1.0: a copy).
        "tau": 5e-3,
        # Initial entropy coefficient alpha (learned as log_alpha).
        "initial_alpha": 1.0,
        # Entropy the learned alpha steers towards: a number, or "auto" (or None):
        # -action_dim for Box actions, 0.98 * log(num_actions) for Discrete actions.
        "target_entropy": "auto",
        # Steps of the n-step return (computed on the rollout workers).
        "n_step": 1,
        # Run training_step until this many steps were sampled per train() call (1.13's
        # timesteps_per_iteration, which is accepted as well)...
        "min_sample_timesteps_per_reporting": 100,
        # ...and for at least this many seconds.
        "min_time_s_per_reporting": 1,
        # === Replay buffer ===
        # Rows the replay buffer keeps.
        "buffer_size": int(1e6),
        # Uniform replay by default (prioritized_replay_* keys apply when True).
        "prioritized_replay": False,
        # === Optimization ===
        # Adam learning rates of the actor, the critics and log_alpha (merged key by key);
        # `lr` is not used, and `lr_schedule` is refused.
        "optimization": copy.deepcopy(_OPTIMIZATION),
        # Clip each optimizer's gradients to this global norm (None: no clipping).
        "grad_clip": None,
        # Sampled steps before learning starts.
        "learning_starts": 1500,
        # Steps each worker samples per round (one gradient step follows each round).
        "rollout_fragment_length": 1,
        # Rows per gradient step.
        "train_batch_size": 256,
        # Sampled steps between target updates (0: after every round).
        "target_network_update_freq": 0,
        "num_workers": 0,
        # === Debugging (1.13) ===
        # Use the actor's mean action (no sampling) inside the loss.
        "_deterministic_loss": False,
        # A Beta distribution instead of the squashed Gaussian: not implemented (False only).
        "_use_beta_distribution": False,
    },
    None,
    "SAC",
))


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ConfigError(message)


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _merge_sub_configs(config: dict[str, Any]) -> None:
    # merge_config replaces non-common sub-dicts; SAC's merge key by key over its
    # defaults, as 1.13's did (Q_model: {fcnet_hiddens: [64]} keeps relu).
    for key, defaults in _SUB_CONFIGS.items():
        value = config[key]
        _require(isinstance(value, dict), f"{key} must be a dict of sub-keys, got {type(value).__name__} ({value!r}).")
        if key == "optimization":
            for sub_key in value:
                _require(sub_key in defaults, f"Unknown key optimization.{sub_key}{did_you_mean(sub_key, defaults)} "
                                              f"SAC's optimization sub-dict takes {', '.join(defaults)}.")
        config[key] = {**copy.deepcopy(defaults), **value}


def validate_sac_config(config: dict[str, Any]) -> None:
    """Checks SAC's keys (the replay keys through ``validate_replay_config``); fills the
    sub-configs' unset keys from SAC's defaults.

    Action-space errors (infinite Box bounds, MultiDiscrete) are raised when the policy
    is built, where the env's spaces are known.

    Raises:
        ConfigError: Naming the key, the value and the fix.
    """
    validate_replay_config(config, "SAC")
    require_stochastic_sampling(config)
    _merge_sub_configs(config)
    # The networks are checked here too, so a typo fails before any worker starts.
    from rlstack.models.blocks import sub_model_config

    for key in ("Q_model", "policy_model"):
        sub_model_config(config[key], key)
    _require(not config["model"].get("custom_model"),
             f"model.custom_model={config['model']['custom_model']!r}: SAC's networks are its built-in actor and "
             "critics, shaped by policy_model and Q_model (custom models are not supported yet); remove it.")
    for key, value in config["optimization"].items():
        _require(_is_number(value) and value > 0, f"optimization.{key} must be a learning rate > 0, got {value!r}.")
    _require(config["lr_schedule"] is None,
             "lr_schedule is not supported by SAC: its learning rates are optimization.actor_learning_rate, "
             "critic_learning_rate and entropy_learning_rate (constant); remove lr_schedule.")
    _require(_is_number(config["tau"]) and 0.0 < config["tau"] <= 1.0,
             f"tau must be in (0, 1] (1.0 copies the critics into the targets), got {config['tau']!r}.")
    _require(_is_number(config["initial_alpha"]) and config["initial_alpha"] > 0,
             f"initial_alpha must be > 0 (alpha is learned as log(alpha)), got {config['initial_alpha']!r}.")
    entropy = config["target_entropy"]
    _require(entropy is None or entropy == "auto" or _is_number(entropy),
             f"target_entropy must be 'auto' (or None) or a number, got {entropy!r}.")
    _require(config["_use_beta_distribution"] is False,
             "_use_beta_distribution=True is not implemented in rlstack's SAC (1.13 kept it for debugging only); "
             "remove it: Box actions use the squashed Gaussian.")
    for key in ("twin_q", "_deterministic_loss", "use_state_preprocessor", "normalize_actions"):
        _require(isinstance(config[key], bool), f"{key} must be True or False, got {config[key]!r}.")
    if config["use_state_preprocessor"]:
        logger.warning("use_state_preprocessor is deprecated (as in 1.13) and has no effect: image observations "
                       "always go through a CNN encoder; remove the key.")



class SACTrainer(OffPolicyTrainer):
    """Soft actor-critic with the classic RLlib API.

    Examples:
        >>> from rlstack.trainers.sac import SACTrainer, DEFAULT_CONFIG
        >>> config = DEFAULT_CONFIG.copy()
        >>> config.update(learning_starts=64, train_batch_size=64, min_sample_timesteps_per_reporting=100,
        ...               min_time_s_per_reporting=0, seed=0)
        >>> trainer = SACTrainer(config, "Pendulum-v1")
        >>> result = trainer.train()
        >>> stats = result["info"]["learner"]["default_policy"]["learner_stats"]
        >>> result["timesteps_total"], result["replay_buffer"]["num_entries"], sorted(stats)[:3]
        (100, 100, ['actor_loss', 'alpha_loss', 'alpha_value'])
        >>> -2.0 <= float(trainer.compute_single_action([1.0, 0.0, 0.0], explore=False)[0]) <= 2.0
        True
        >>> trainer.stop()
    """

    _name = "SAC"
    _default_config = DEFAULT_CONFIG
    postprocess_fn = staticmethod(postprocess_sac)
    numpy_policy_class = "rlstack.trainers.sac.sac_policy:SACNumpyPolicy"
    _HOT_KEYS = (*OffPolicyTrainer._HOT_KEYS, "tau", "optimization", "target_entropy", "initial_alpha")

    @classmethod
    def validate_config(cls, config: dict[str, Any]) -> None:
        validate_sac_config(config)

    policy_classes = {"torch": "rlstack.trainers.sac.sac_torch_policy:SACTorchPolicy",
                      "tf": "rlstack.trainers.sac.sac_tf_policy:SACTFPolicy"}
