"""OffPolicyTrainer: the replay-based training step that DQN, SAC, TD3 and DDPG share.

One ``training_step``::

    batch = concat_samples(self.workers.sample())          # n-step rows from every worker
    self.replay_buffer.add(replay_rows(batch))
    if sampled >= learning_starts:                            # k gradient steps, k from the replay ratio
        train_batch = self.replay_buffer.sample(k * train_batch_size, beta)
        stats = policy.learn_on_batch(train_batch)            # one step per train_batch_size rows
        self.replay_buffer.update_priorities(indexes, stats.pop("td_error"))
    if target_network_update_freq sampled steps passed:      # 0: every round
        policy.update_target()                                # hard copy (DQN) or polyak with tau
    self.workers.sync_weights()

The algorithm's folder supplies the policy (its loss, ``update_target`` and acting), its
defaults on top of :data:`REPLAY_CONFIG` and its own checks; everything about the
replay buffer lives here once: the shared keys and their checks, 1.13's
``replay_buffer_config`` sub-dict (``replay_config.py``), the importance-weight schedule,
the replay ratio (``training_intensity``), target-network timing and the buffer in
checkpoints.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from rlstack.errors import ConfigError
from rlstack.execution.replay_buffer import PrioritizedReplayBuffer, ReplayBuffer, make_replay_buffer
from rlstack.sample_batch import MultiAgentBatch, SampleBatch, concat_samples
from rlstack.trainers.common.replay_config import apply_replay_buffer_config
from rlstack.trainers.common.trainer import DEFAULT_POLICY_ID, Trainer
from rlstack.utils.schedules import PiecewiseSchedule

__all__ = ["REPLAY_COLUMNS", "REPLAY_CONFIG", "OffPolicyTrainer", "beta_schedule", "replay_rows",
           "validate_replay_config"]

# Columns a replay buffer keeps (the priorities column is consumed on insertion).
REPLAY_COLUMNS = (SampleBatch.OBS, SampleBatch.ACTIONS, SampleBatch.REWARDS, SampleBatch.NEXT_OBS,
                  SampleBatch.TERMINATEDS, SampleBatch.DISCOUNTS, SampleBatch.PRIORITIES)

# The replay keys every replay-based trainer has, with classic RLlib 1.x DQN's defaults;
# an algorithm's DEFAULT_CONFIG merges these and overrides what its 1.x defaults changed.
REPLAY_CONFIG: dict[str, Any] = {
    # Steps of the n-step return (computed on the rollout workers).
    "n_step": 1,
    # Refresh the target network every this many sampled steps (0: after every round);
    # the policy's update_target() decides how (a copy, or polyak averaging with tau).
    "target_network_update_freq": 500,
    # Classic 1.13's sub-dict of the replay settings below ({type, capacity,
    # learning_starts, prioritized_replay_alpha/beta/eps, ...}): copied onto them when
    # the config is validated, taking precedence (trainers/common/replay_config.py).
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
}


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def validate_replay_config(config: dict[str, Any], algorithm: str) -> None:
    """Checks the :data:`REPLAY_CONFIG` keys (after mapping ``replay_buffer_config`` onto them).

    Args:
        config: A merged config (changed in place by the ``replay_buffer_config`` mapping).
        algorithm: The trainer's name, for messages.

    Raises:
        ConfigError: Naming the key, the value and the fix.
    """
    apply_replay_buffer_config(config, algorithm)
    if config["compress_observations"]:
        raise ConfigError(f"compress_observations={config['compress_observations']!r} is not implemented in "
                          f"rlstack's {algorithm}; remove it (or set compress_observations=False).")
    for key in ("n_step", "buffer_size"):
        if not _is_int(config[key]) or config[key] < 1:
            raise ConfigError(f"{key} must be an integer >= 1, got {config[key]!r}.")
    for key in ("learning_starts", "target_network_update_freq"):
        if not _is_int(config[key]) or config[key] < 0:
            raise ConfigError(f"{key} must be an integer >= 0, got {config[key]!r}.")
    for key in ("prioritized_replay_alpha", "prioritized_replay_beta", "final_prioritized_replay_beta",
                "prioritized_replay_eps"):
        value = config[key]
        if not isinstance(value, numbers.Real) or isinstance(value, bool) or value < 0:
            raise ConfigError(f"{key} must be a number >= 0, got {value!r}.")
    intensity = config["training_intensity"]
    if intensity is not None and (not isinstance(intensity, numbers.Real) or isinstance(intensity, bool)
                                  or intensity <= 0):
        raise ConfigError(f"training_intensity must be None or a number > 0 (trained rows per sampled step), "
                          f"got {intensity!r}.")
    if config["train_batch_size"] > config["buffer_size"]:
        raise ConfigError(f"train_batch_size ({config['train_batch_size']}) must be <= buffer_size "
                          f"({config['buffer_size']}): each gradient step replays that many rows.")


def beta_schedule(config: dict[str, Any]) -> PiecewiseSchedule:
    """Prioritized replay's importance exponent over sampled steps."""
    steps = max(1, int(config["prioritized_replay_beta_annealing_timesteps"]))
    return PiecewiseSchedule([(0, config["prioritized_replay_beta"]), (steps, config["final_prioritized_replay_beta"])],
                             "prioritized_replay_beta")


def replay_rows(batch: SampleBatch) -> SampleBatch:
    """The columns of a sampled batch that go into replay."""
    return SampleBatch({key: batch[key] for key in REPLAY_COLUMNS if key in batch})


class OffPolicyTrainer(Trainer):
    """The role base of replay-based trainers (see the module docstring).

    A subclass supplies ``_name``, ``_default_config`` (on top of :data:`REPLAY_CONFIG`),
    ``validate_config`` (calling :func:`validate_replay_config`), the policy class and,
    for numpy-acting workers, ``numpy_policy_class`` and ``postprocess_fn``. Its learner
    policy provides ``learn_on_batch(batch)`` (one gradient step per
    ``train_batch_size`` rows; a per-row ``"td_error"`` array in the stats becomes the new
    priorities) and ``update_target()``.

    Multi-agent: each policy keeps its own replay buffer (sized by its own config, 1.13's
    "independent" replay), learns on batches replayed from it and updates its own target
    network; the replay ratio and the step counts follow the trainer's config.
    """

    _HOT_KEYS = (*Trainer._HOT_KEYS, "target_network_update_freq", "training_intensity", "learning_starts",
                 "prioritized_replay_beta", "final_prioritized_replay_beta")

    def setup(self, config: dict[str, Any]) -> None:
        super().setup(config)
        self._init_replay()

    def _init_replay(self) -> None:
        cfg = self.config
        self.replay_buffers: dict[str, ReplayBuffer] = {}
        self._beta = beta_schedule(cfg)
        self._counters.update(num_target_updates=0, last_target_update_ts=0, train_credit=0.0)

    def buffer_of(self, policy_id: str) -> ReplayBuffer:
        """The replay buffer of ``policy_id`` (made on first use, from that policy's config)."""
        buffer = self.replay_buffers.get(policy_id)
        if buffer is None:
            config = self.workers.local_worker().get_policy(policy_id).config
            seed = config["seed"]
            buffer = self.replay_buffers[policy_id] = make_replay_buffer(config, seed=seed)
        return buffer

    @property
    def replay_buffer(self) -> ReplayBuffer:
        """The replay buffer of the (first) policy."""
        return self.buffer_of(next(iter(self.workers.local_worker().policy_map)))

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        if not super().reset_config(new_config):
            return False
        self._init_replay()
        for policy in self.workers.local_worker().policy_map.values():
            policy.update_target()
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
        with self._timers["sample"]:
            batch = concat_samples(self.workers.sample())
        self.count_sampled(batch)
        sampled = self.global_timestep()
        rows_by_policy = batch.policy_batches if isinstance(batch, MultiAgentBatch) else {DEFAULT_POLICY_ID: batch}
        for policy_id, rows in rows_by_policy.items():
            if rows.count:
                self.buffer_of(policy_id).add(replay_rows(rows))

        info: dict[str, Any] = {}
        if sampled >= cfg["learning_starts"]:
            num_steps = self._num_train_steps(batch.agent_steps() if self.global_timestep_is_agent_steps()
                                              else batch.env_steps())
            if num_steps:
                with self._timers["learn"]:
                    for policy_id in self.policies_to_train():
                        info[policy_id] = {"learner_stats": self._learn_from_replay(policy_id, num_steps, sampled)}
                self._last_learner_stats = info
        if sampled - self._counters["last_target_update_ts"] >= cfg["target_network_update_freq"]:
            for policy_id in self.policies_to_train():
                self.workers.local_worker().get_policy(policy_id).update_target()
            self._counters["last_target_update_ts"] = sampled
            self._counters["num_target_updates"] += 1
        with self._timers["synch_weights"]:
            self.sync_learned_weights(info)
        return info or self._last_learner_stats

    def global_timestep_is_agent_steps(self) -> bool:
        """Whether the step count the schedules and ``learning_starts`` follow is agent steps."""
        return self.is_multi_agent and self.config["multiagent"]["count_steps_by"] == "agent_steps"

    def _learn_from_replay(self, policy_id: str, num_steps: int, sampled: int) -> dict[str, Any]:
        # num_steps gradient steps of one policy on rows replayed from its buffer.
        policy = self.workers.local_worker().get_policy(policy_id)
        buffer = self.buffer_of(policy_id)
        if len(buffer) == 0:
            return {}
        train_batch = buffer.sample(num_steps * policy.config["train_batch_size"], self._beta.value(sampled))
        stats = policy.learn_on_batch(train_batch)
        td_error = stats.pop("td_error", None)
        if td_error is not None and isinstance(buffer, PrioritizedReplayBuffer):
            buffer.update_priorities(train_batch[SampleBatch.BATCH_INDEXES], td_error)
        self._counters["num_env_steps_trained"] += train_batch.count
        self._counters["num_agent_steps_trained"] += train_batch.count
        return stats

    def extra_results(self) -> dict[str, Any]:
        if not self.is_multi_agent:
            return {"replay_buffer": self.replay_buffer.stats(),
                    "num_target_updates": self._counters["num_target_updates"]}
        return {"replay_buffer": {pid: buffer.stats() for pid, buffer in self.replay_buffers.items()},
                "num_target_updates": self._counters["num_target_updates"]}

    def _buffer_groups(self) -> dict[str, str]:
        # Checkpoint group of each policy's buffer: "replay_buffer" (single-agent), or
        # "replay_buffer_<i>" beside that policy's "policy_state_<i>".
        if not self.is_multi_agent:
            return {DEFAULT_POLICY_ID: "replay_buffer"}
        return {pid: f"replay_buffer_{i}" for i, pid in enumerate(self.workers.local_worker().policy_map)}

    def extra_checkpoint_arrays(self) -> dict[str, dict[str, np.ndarray]]:
        if not self.config["store_buffer_in_checkpoints"]:
            return {}
        return {group: self.buffer_of(pid).get_state() for pid, group in self._buffer_groups().items()
                if pid in self.replay_buffers or not self.is_multi_agent}

    def restore_extra_arrays(self, arrays: dict[str, dict[str, np.ndarray]]) -> None:
        for pid, group in self._buffer_groups().items():
            if group in arrays:
                self.buffer_of(pid).set_state(arrays[group])
