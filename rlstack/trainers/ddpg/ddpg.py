"""DDPGTrainer: deep deterministic policy gradient (Lillicrap et al. 2016, "Continuous
control with deep reinforcement learning") with classic RLlib 1.13's config, including
its TD3 switches (``twin_q``, ``policy_delay``, ``smooth_target_policy``; Fujimoto et al.
2018), which ``trainers/td3`` turns on by default.

The training step is :class:`~rlstack.trainers.common.off_policy.OffPolicyTrainer`'s: workers act
with the deterministic actor plus exploration noise (in numpy), n-step rows go into
replay, the learner takes one gradient step per ``train_batch_size`` replayed rows on two
losses (actor and critics; ``ddpg_torch_policy.py`` / ``ddpg_tf_policy.py``), and the
target actor and critics move towards the online ones by ``tau`` every
``target_network_update_freq`` sampled steps (0: after every round).
"""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Any

import numpy as np

from rlstack.errors import ConfigError
from rlstack.models.catalog import ACTIVATIONS
from rlstack.policies.policy import decode_json, encode_json
from rlstack.policies.postprocessing import postprocess_n_step
from rlstack.trainers.common.config import COMMON_CONFIG, DefaultConfig, merge_config
from rlstack.trainers.common.off_policy import REPLAY_CONFIG, OffPolicyTrainer, validate_replay_config
from rlstack.utils.exploration import NOISE_DEFAULTS, validate_noise_config

if TYPE_CHECKING:
    from rlstack.evaluation.worker_set import WorkerSet

# Classic RLlib 1.13's DDPG defaults, on top of COMMON_CONFIG and REPLAY_CONFIG.
DEFAULT_CONFIG: dict[str, Any] = DefaultConfig(merge_config(
    {
        **COMMON_CONFIG,
        # (replay keys and comments: trainers/common/off_policy.py's REPLAY_CONFIG; DDPG's own
        # defaults of them follow below)
        **REPLAY_CONFIG,
        # === TD3's tricks (Fujimoto et al. 2018), off for DDPG ===
        # Two critics; the TD target takes their minimum (clipped double Q).
        "twin_q": False,
        # Update the actor (and let the target networks follow) once every this many
        # critic updates.
        "policy_delay": 1,
        # Target policy smoothing: add clipped Gaussian noise to the target actor's action.
        "smooth_target_policy": False,
        # Standard deviation of that noise (in normalized action units, [-1, 1]).
        "target_noise": 0.2,
        # The noise is clipped to [-target_noise_clip, target_noise_clip].
        "target_noise_clip": 0.5,
        # === Model ===
        # Deprecated in 1.13 and without effect: image observations always go through a
        # CNN of model.conv_filters before the hidden layers; accepted for old configs.
        "use_state_preprocessor": False,
        # Hidden layers of the actor, obs -> actor_hiddens -> action_dim -> tanh.
        "actor_hiddens": [400, 300],
        # Their activation: "relu", "tanh", "swish" (or "silu"), "elu", "linear".
        "actor_hidden_activation": "relu",
        # Hidden layers of each critic, concat(obs, action) -> critic_hiddens -> 1.
        "critic_hiddens": [400, 300],
        # Their activation.
        "critic_hidden_activation": "relu",
        # Steps of the n-step TD target (computed on the rollout workers).
        "n_step": 1,
        # === Exploration ===
        # Noise on the actor's actions: OrnsteinUhlenbeckNoise (here), GaussianNoise or their
        # per-worker forms (PerWorkerOrnsteinUhlenbeckNoise, PerWorkerGaussianNoise), with
        # uniform random actions for the first random_timesteps sampled steps; keys and
        # meaning in rlstack/utils/exploration.py. Another type replaces these keys.
        "exploration_config": dict(NOISE_DEFAULTS["OrnsteinUhlenbeckNoise"]),
        # Evaluation acts with the actor's actions, without noise.
        "evaluation_config": {"explore": False},
        # Run training_step until this many steps were sampled per train() call (1.13's
        # timesteps_per_iteration).
        "min_sample_timesteps_per_reporting": 1000,
        # === Replay buffer ===
        # Rows the replay buffer keeps.
        "buffer_size": 50000,
        # Prioritized replay (priorities: the rows' summed critic TD errors).
        "prioritized_replay": True,
        # Sampled steps before learning starts.
        "learning_starts": 1500,
        # === Optimization ===
        # Adam learning rate of the critics.
        "critic_lr": 1e-3,
        # Adam learning rate of the actor. (lr and lr_schedule are not used by DDPG.)
        "actor_lr": 1e-3,
        # Adam epsilon of both optimizers (1.13's DDPG fixed 1e-7, Keras' default).
        "adam_epsilon": 1e-7,
        # Move the target networks after every sampling round (see tau).
        "target_network_update_freq": 0,
        # Polyak averaging: target <- tau * online + (1 - tau) * target.
        "tau": 0.002,
        # Huber loss (with huber_threshold) instead of the squared TD error for the critics.
        "use_huber": False,
        # Where the Huber loss turns from quadratic to linear.
        "huber_threshold": 1.0,
        # L2 regularisation: l2_reg * sum(w^2) / 2 over the kernels (not the biases) of
        # the actor (added to the actor loss) and of the critics (to the critic loss).
        "l2_reg": 1e-6,
        # Clip each optimizer's gradient norm to this (None: no clipping).
        "grad_clip": None,
        # Rows per gradient step.
        "train_batch_size": 256,
        # Steps each worker samples per round (one round, one gradient step).
        "rollout_fragment_length": 1,
        # Rollout workers (0: the driver samples).
        "num_workers": 0,
    },
    None,
    "DDPG",
))

_POSITIVE = ("actor_lr", "critic_lr", "huber_threshold")


def _number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and bool(np.isfinite(value))


def _check_hiddens(config: dict[str, Any], key: str) -> None:
    value = config[key]
    if not isinstance(value, (list, tuple)) or not all(
            isinstance(n, numbers.Integral) and not isinstance(n, bool) and n > 0 for n in value):
        raise ConfigError(f"{key} must be a list of layer sizes (integers > 0), e.g. [400, 300]; got {value!r}.")


def validate_ddpg_config(config: dict[str, Any], algorithm: str = "DDPG") -> None:
    """Checks the keys of DDPG and TD3 (after the shared replay keys).

    Raises:
        ConfigError: Naming the key, the value and the fix.
    """
    validate_replay_config(config, algorithm)
    validate_noise_config(config["exploration_config"], algorithm)
    for key in ("twin_q", "smooth_target_policy", "use_huber", "use_state_preprocessor"):
        if not isinstance(config[key], bool):
            raise ConfigError(f"{key} must be true or false for {algorithm}, got {config[key]!r}.")
    delay = config["policy_delay"]
    if not isinstance(delay, numbers.Integral) or isinstance(delay, bool) or delay < 1:
        raise ConfigError(f"policy_delay must be an integer >= 1 (critic updates per actor update), got {delay!r}.")
    for key in ("target_noise", "target_noise_clip"):
        if not _number(config[key]) or config[key] < 0:
            raise ConfigError(f"{key} must be a number >= 0 (normalized action units), got {config[key]!r}.")
    for key in ("actor_hiddens", "critic_hiddens"):
        _check_hiddens(config, key)
    for key in ("actor_hidden_activation", "critic_hidden_activation"):
        if config[key] not in ACTIVATIONS:
            raise ConfigError(f"{key}={config[key]!r} is not supported; allowed: {', '.join(ACTIVATIONS)}.")
    for key in _POSITIVE:
        if not _number(config[key]) or config[key] <= 0:
            raise ConfigError(f"{key} must be a number > 0, got {config[key]!r}.")
    if not _number(config["tau"]) or not 0 < config["tau"] <= 1:
        raise ConfigError(f"tau must be in (0, 1] (1: the targets copy the online networks), got {config['tau']!r}.")
    if config["l2_reg"] is not None and (not _number(config["l2_reg"]) or config["l2_reg"] < 0):
        raise ConfigError(f"l2_reg must be None or a number >= 0, got {config['l2_reg']!r}.")
    if config["grad_clip"] is not None and (not _number(config["grad_clip"]) or config["grad_clip"] <= 0):
        raise ConfigError(f"grad_clip must be None or a number > 0 (as 1.13 required), got {config['grad_clip']!r}.")
    if config["lr_schedule"] is not None:
        raise ConfigError(f"lr_schedule is not used by {algorithm}: its optimizers take actor_lr and critic_lr; "
                          "remove lr_schedule.")
    if config["model"].get("custom_model"):
        raise ConfigError(
            f"model.custom_model={config['model']['custom_model']!r} is not supported by rlstack's {algorithm}: the "
            "actor and critics are built-in blocks (shape them with actor_hiddens, critic_hiddens and their "
            "activations; images use model.conv_filters). Remove custom_model.")



def exploration_arrays(workers: WorkerSet) -> dict[str, dict[str, np.ndarray]]:
    """Every rollout worker's exploration state (noise generator, OU process), for a
    checkpoint: ``{"exploration": {"worker_<i>": json bytes}}``."""
    states = workers.foreach_worker(
        lambda w: (w.worker_index, encode_json(w.sampling_policy.exploration.get_state())))
    return {"exploration": {f"worker_{index}": state for index, state in states}}


def restore_exploration(workers: WorkerSet, arrays: dict[str, dict[str, np.ndarray]]) -> None:
    """Gives each rollout worker back its exploration state from :func:`exploration_arrays`
    (workers the checkpoint has no state for keep theirs)."""
    saved = {key: decode_json(value) for key, value in arrays.get("exploration", {}).items()}
    if not saved:
        return

    def restore(worker: Any, states: dict[str, Any] = saved) -> None:
        state = states.get(f"worker_{worker.worker_index}")
        if state is not None:
            worker.sampling_policy.exploration.set_state(state)

    workers.foreach_worker(restore)


class ExplorationInCheckpoints:
    """Trainer mixin: every rollout worker's exploration-noise state (generator, OU process)
    rides in checkpoints and comes back on restore (DDPG, TD3, Ape-X DDPG)."""

    def extra_checkpoint_arrays(self) -> dict[str, dict[str, np.ndarray]]:
        return {**super().extra_checkpoint_arrays(), **exploration_arrays(self.workers)}  # type: ignore[misc]

    def restore_extra_arrays(self, arrays: dict[str, dict[str, np.ndarray]]) -> None:
        super().restore_extra_arrays(arrays)  # type: ignore[misc]
        restore_exploration(self.workers, arrays)  # type: ignore[attr-defined]


class DDPGFamily(ExplorationInCheckpoints):
    """Trainer mixin of the trainers that run on DDPG's policies (DDPG, TD3, Ape-X DDPG):
    n-step postprocessing, the numpy acting policy, DDPG's config checks, the policy class
    for the framework, and the exploration state in checkpoints."""

    postprocess_fn = staticmethod(postprocess_n_step)
    numpy_policy_class = "rlstack.trainers.ddpg.ddpg_policy:DDPGNumpyPolicy"

    @classmethod
    def validate_config(cls, config: dict[str, Any]) -> None:
        validate_ddpg_config(config, cls._name)  # type: ignore[attr-defined]

    policy_classes = {"torch": "rlstack.trainers.ddpg.ddpg_torch_policy:DDPGTorchPolicy",
                      "tf": "rlstack.trainers.ddpg.ddpg_tf_policy:DDPGTFPolicy"}


# The keys DDPG's and TD3's reset_config takes without rebuilding, beside the off-policy ones.
DDPG_HOT_KEYS = ("actor_lr", "critic_lr", "tau", "l2_reg", "target_noise", "target_noise_clip", "policy_delay")


class DDPGTrainer(DDPGFamily, OffPolicyTrainer):
    """Deep deterministic policy gradient with the classic RLlib API.

    Examples:
        >>> from rlstack.trainers.ddpg import DDPGTrainer, DEFAULT_CONFIG
        >>> config = DEFAULT_CONFIG.copy()
        >>> config.update(learning_starts=64, train_batch_size=32, min_sample_timesteps_per_reporting=100,
        ...               actor_hiddens=[32], critic_hiddens=[32])
        >>> trainer = DDPGTrainer(config, "Pendulum-v1")
        >>> result = trainer.train()
        >>> result["timesteps_total"] >= 100, result["num_env_steps_trained"] > 0
        (True, True)
        >>> trainer.stop()
    """

    _name = "DDPG"
    _default_config = DEFAULT_CONFIG
    _HOT_KEYS = (*OffPolicyTrainer._HOT_KEYS, *DDPG_HOT_KEYS)
