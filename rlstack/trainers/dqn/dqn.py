"""DQNTrainer: deep Q-learning (Mnih et al. 2015) with the Rainbow pieces classic RLlib
offered: double Q, dueling heads, n-step returns and prioritized replay.

One ``training_step``: every worker samples one fragment (epsilon-greedy, n-step returns
computed on the worker), the rows go into the replay buffer, and once
``learning_starts`` steps were sampled the learner takes as many gradient steps on
replayed batches as ``training_intensity`` asks for, updates the replayed rows'
priorities, refreshes the target network every ``target_network_update_freq`` sampled
steps and sends the weights back to the workers.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from rlstack.errors import ConfigError
from rlstack.execution.replay_buffer import PrioritizedReplayBuffer, ReplayBuffer, make_replay_buffer
from rlstack.policies.postprocessing import postprocess_n_step
from rlstack.sample_batch import SampleBatch, concat_samples
from rlstack.trainers.config import COMMON_CONFIG, DefaultConfig, merge_config
from rlstack.trainers.dqn.q_learning import REPLAY_COLUMNS
from rlstack.trainers.dqn.replay_config import apply_replay_buffer_config
from rlstack.trainers.trainer import DEFAULT_POLICY_ID, Trainer
from rlstack.utils.exploration import EXPLORATION_DEFAULTS, validate_exploration_config
from rlstack.utils.schedules import PiecewiseSchedule

# Classic RLlib 1.x DQN defaults, on top of COMMON_CONFIG.
DEFAULT_CONFIG: dict[str, Any] = DefaultConfig(merge_config(
    {
        **COMMON_CONFIG,
        # === Model ===
        # Distributional DQN (num_atoms > 1) is not implemented; kept for old configs.
        "num_atoms": 1,
        "v_min": -10.0,
        "v_max": 10.0,
        # Noisy nets are not implemented; kept for old configs (must stay False).
        "noisy": False,
        "sigma0": 0.5,
        # Dueling heads: Q = V + A - mean(A) (Wang et al. 2016).
        "dueling": True,
        # Hidden layers of the Q head (and of the value head when dueling), after the
        # model's fcnet_hiddens encoder; ReLU.
        "hiddens": [256],
        # Double Q-learning: the online network picks the next action, the target rates it.
        "double_q": True,
        # Steps of the n-step return (computed on the rollout workers).
        "n_step": 1,
        # === Exploration ===
        "exploration_config": dict(EXPLORATION_DEFAULTS),
        # Update the target network every this many sampled steps.
        "target_network_update_freq": 500,
        # === Replay buffer ===
        # Classic 1.13's sub-dict of the replay settings below ({type, capacity,
        # learning_starts, prioritized_replay_alpha/beta/eps, ...}): copied onto them when
        # the config is validated, taking precedence (trainers/dqn/replay_config.py).
        "replay_buffer_config": {},
        # Rows the replay buffer keeps.
        "buffer_size": 50000,
        # Prioritized replay (Schaul et al. 2016) instead of uniform.
        "prioritized_replay": True,
        # How much prioritisation is used (0: uniform).
        "prioritized_replay_alpha": 0.6,
        # Initial importance-sampling exponent, annealed to final_prioritized_replay_beta.
        "prioritized_replay_beta": 0.4,
        # Final importance-sampling exponent.
        "final_prioritized_replay_beta": 0.4,
        # Sampled steps over which beta is annealed.
        "prioritized_replay_beta_annealing_timesteps": 20000,
        # Added to every priority.
        "prioritized_replay_eps": 1e-6,
        # Save the replay buffer's rows in checkpoints (as npz arrays).
        "store_buffer_in_checkpoints": False,
        # Not implemented (rows are stored uncompressed); must stay False.
        "compress_observations": False,
        # Trained rows per sampled step (replay ratio); None: one train batch per
        # sampling round. E.g. 32 with train_batch_size 64 and rollouts of 256 steps
        # takes 128 gradient steps after every 256 sampled steps.
        "training_intensity": None,
        # Sampled steps before learning starts.
        "learning_starts": 1000,
        # Compute initial replay priorities on the workers (ApeX).
        "worker_side_prioritization": False,
        # === Optimisation ===
        "lr": 5e-4,
        "adam_epsilon": 1e-8,
        "grad_clip": 40,
        # Rows per gradient step.
        "train_batch_size": 32,
        "rollout_fragment_length": 4,
        "num_workers": 0,
        # Run training_step until this many steps were sampled per train() call.
        "min_sample_timesteps_per_reporting": 1000,
    },
    None,
    "DQN",
))

_NOT_IMPLEMENTED = {"num_atoms": 1, "noisy": False, "compress_observations": False}


def validate_dqn_config(config: dict[str, Any], algorithm: str = "DQN") -> None:
    """Checks the DQN family's keys (DQN and ApeX).

    Raises:
        ConfigError: Naming the key, the value and the fix.
    """
    apply_replay_buffer_config(config, algorithm)
    for key, allowed in _NOT_IMPLEMENTED.items():
        if config[key] != allowed:
            raise ConfigError(f"{key}={config[key]!r} is not implemented in rlstack's {algorithm}; "
                              f"remove it (or set {key}={allowed!r}).")
    validate_exploration_config(config["exploration_config"])
    for key in ("n_step", "buffer_size", "target_network_update_freq"):
        value = config[key]
        if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
            raise ConfigError(f"{key} must be an integer >= 1, got {value!r}.")
    if not isinstance(config["learning_starts"], numbers.Integral) or config["learning_starts"] < 0:
        raise ConfigError(f"learning_starts must be an integer >= 0, got {config['learning_starts']!r}.")
    for key in ("prioritized_replay_alpha", "prioritized_replay_beta", "final_prioritized_replay_beta",
                "prioritized_replay_eps"):
        value = config[key]
        if not isinstance(value, numbers.Real) or isinstance(value, bool) or value < 0:
            raise ConfigError(f"{key} must be a number >= 0, got {value!r}.")
    intensity = config["training_intensity"]
    if intensity is not None and (not isinstance(intensity, numbers.Real) or intensity <= 0):
        raise ConfigError(f"training_intensity must be None or a number > 0 (trained rows per sampled step), "
                          f"got {intensity!r}.")
    if config["train_batch_size"] > config["buffer_size"]:
        raise ConfigError(f"train_batch_size ({config['train_batch_size']}) must be <= buffer_size "
                          f"({config['buffer_size']}): each gradient step replays that many rows.")
    if config["batch_mode"] != "truncate_episodes":
        raise ConfigError(f"batch_mode={config['batch_mode']!r}: {algorithm} learns from replayed steps and "
                          "needs batch_mode='truncate_episodes'.")


def dqn_policy_class_path(config: dict[str, Any]) -> str:
    """The DQN family's policy class for ``config["framework"]``, as ``"module:Class"``."""
    if config["framework"] == "torch":
        return "rlstack.trainers.dqn.dqn_torch_policy:DQNTorchPolicy"
    return "rlstack.trainers.dqn.dqn_tf_policy:DQNTFPolicy"


def beta_schedule(config: dict[str, Any]) -> PiecewiseSchedule:
    """Prioritized replay's importance exponent over sampled steps."""
    steps = max(1, int(config["prioritized_replay_beta_annealing_timesteps"]))
    return PiecewiseSchedule([(0, config["prioritized_replay_beta"]), (steps, config["final_prioritized_replay_beta"])],
                             "prioritized_replay_beta")


def replay_rows(batch: SampleBatch) -> SampleBatch:
    """The columns of a sampled batch that go into replay."""
    return SampleBatch({key: batch[key] for key in REPLAY_COLUMNS if key in batch})


class DQNTrainer(Trainer):
    """Deep Q-learning with the classic RLlib API.

    >>> from rlstack.trainers.dqn import DQNTrainer, DEFAULT_CONFIG
    >>> config = DEFAULT_CONFIG.copy()
    >>> config.update(learning_starts=100, min_sample_timesteps_per_reporting=200)
    >>> trainer = DQNTrainer(config, "CartPole-v1")
    >>> result = trainer.train()
    >>> result["timesteps_total"] >= 200, result["replay_buffer"]["num_entries"] == result["timesteps_total"]
    (True, True)
    >>> trainer.stop()
    """

    _name = "DQN"
    _default_config = DEFAULT_CONFIG
    postprocess_fn = staticmethod(postprocess_n_step)
    numpy_policy_class = "rlstack.trainers.dqn.q_learning:DQNNumpyPolicy"
    _HOT_KEYS = (*Trainer._HOT_KEYS, "target_network_update_freq", "training_intensity", "learning_starts",
                 "prioritized_replay_beta", "final_prioritized_replay_beta", "exploration_config")

    @classmethod
    def validate_config(cls, config: dict[str, Any]) -> None:
        validate_dqn_config(config, cls._name)

    def get_policy_class_path(self, config: dict[str, Any]) -> str:
        return dqn_policy_class_path(config)

    def setup(self, config: dict[str, Any]) -> None:
        super().setup(config)
        self._init_replay()

    def _init_replay(self) -> None:
        cfg = self.config
        self.replay_buffer: ReplayBuffer = make_replay_buffer(cfg, seed=cfg["seed"])
        self._beta = beta_schedule(cfg)
        self._counters.update(num_target_updates=0, last_target_update_ts=0, train_credit=0.0)

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        if not super().reset_config(new_config):
            return False
        self._init_replay()
        self.learner_policy.update_target()
        return True

    def _num_train_steps(self, sampled: int) -> int:
        # Classic RLlib's replay ratio: training_intensity trained rows per sampled step;
        # without it one train batch per sampling round.
        intensity = self.config["training_intensity"]
        if intensity is None:
            return 1
        # The fractional rest carries over (in the counters, so checkpoints keep it).
        credit = self._counters["train_credit"] + sampled * intensity / self.config["train_batch_size"]
        steps = int(credit)
        self._counters["train_credit"] = credit - steps
        return steps

    def training_step(self) -> dict[str, Any]:
        cfg = self.config
        policy = self.learner_policy
        with self._timers["sample"]:
            batch = concat_samples(self.workers.sample())
        self._counters["num_env_steps_sampled"] += batch.count
        sampled = self._counters["num_env_steps_sampled"]
        self.replay_buffer.add(replay_rows(batch))

        stats = self._last_learner_stats
        if sampled >= cfg["learning_starts"]:
            num_steps = self._num_train_steps(batch.count)
            if num_steps:
                with self._timers["learn"]:
                    beta = self._beta.value(sampled)
                    train_batch = self.replay_buffer.sample(num_steps * cfg["train_batch_size"], beta)
                    stats = policy.learn_on_batch(train_batch)
                    td_error = stats.pop("td_error")
                    if isinstance(self.replay_buffer, PrioritizedReplayBuffer):
                        self.replay_buffer.update_priorities(train_batch[SampleBatch.BATCH_INDEXES], td_error)
                self._counters["num_env_steps_trained"] += train_batch.count
                self._last_learner_stats = stats
        if sampled - self._counters["last_target_update_ts"] >= cfg["target_network_update_freq"]:
            policy.update_target()
            self._counters["last_target_update_ts"] = sampled
            self._counters["num_target_updates"] += 1
        with self._timers["synch_weights"]:
            policy.on_global_var_update(sampled)
            self.workers.sync_weights(sampled)
            self.workers.sync_filters(broadcast=cfg["synchronize_filters"])
        return {DEFAULT_POLICY_ID: {"learner_stats": stats}}


    def extra_results(self) -> dict[str, Any]:
        return {
            "replay_buffer": self.replay_buffer.stats(),
            "num_target_updates": self._counters["num_target_updates"],
            "cur_epsilon": self.learner_policy.exploration.epsilon(self._counters["num_env_steps_sampled"]),
        }

    def extra_checkpoint_arrays(self) -> dict[str, dict[str, np.ndarray]]:
        if not self.config["store_buffer_in_checkpoints"]:
            return {}
        return {"replay_buffer": self.replay_buffer.get_state()}

    def restore_extra_arrays(self, arrays: dict[str, dict[str, np.ndarray]]) -> None:
        if "replay_buffer" in arrays:
            self.replay_buffer.set_state(arrays["replay_buffer"])
