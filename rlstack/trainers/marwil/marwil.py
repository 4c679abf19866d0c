"""MARWILTrainer: monotonic advantage re-weighted imitation learning (Wang et al. 2018).

The policy imitates the recorded actions, each weighted by ``exp(beta * A / c)``: ``A``
is the recorded discounted return minus the learned value, ``c`` the square root of a
moving average of ``A^2``. ``beta = 0`` is behaviour cloning (:mod:`.bc`). It learns
from experience files (``input``), or from its own sampling as classic RLlib allowed.

One ``training_step``: the workers read (or sample) ``train_batch_size`` steps, which
go into a replay buffer of ``replay_buffer_size`` steps; the learner takes one gradient
step on ``train_batch_size`` steps drawn from it.
"""

from __future__ import annotations

from typing import Any

from rlstack.errors import ConfigError
from rlstack.execution.replay_buffer import ReplayBuffer
from rlstack.sample_batch import MultiAgentBatch, SampleBatch
from rlstack.trainers.common.config import COMMON_CONFIG, DefaultConfig, merge_config
from rlstack.trainers.marwil.marwil_policy import postprocess_returns
from rlstack.trainers.common.trainer import Trainer

# Classic RLlib 1.13 MARWIL defaults, on top of COMMON_CONFIG.
DEFAULT_CONFIG: dict[str, Any] = DefaultConfig(merge_config(
    {
        **COMMON_CONFIG,
        # Advantage weighting: 0 is behaviour cloning; larger values favour the actions
        # that did better than the value function expected.
        "beta": 1.0,
        # Weight of the value loss.
        "vf_coeff": 1.0,
        # The moving average of the squared advantage normalising the weights: its start...
        "moving_average_sqd_adv_norm_start": 100.0,
        # ...and its update rate per gradient step.
        "moving_average_sqd_adv_norm_update_rate": 1e-8,
        # Steps kept in the replay buffer the learner draws its batches from.
        "replay_buffer_size": 10000,
        # Steps read before learning starts.
        "learning_starts": 0,
        # Continuous actions: weight of a bonus on the Gaussian's log std (keeps it from
        # collapsing while imitating), 0 for none.
        "bc_logstd_coeff": 0.0,
    },
    {
        # Recorded batches get their returns computed (postprocess_returns).
        "postprocess_inputs": True,
        "lr": 1e-4,
        "grad_clip": None,
        "train_batch_size": 2000,
        "num_workers": 0,
        # Acting (evaluation, sampling) in numpy where the model allows.
        "rollout_inference": "auto",
    },
    "MARWIL",
))


def _marwil_postprocess(batch: SampleBatch, config: dict) -> SampleBatch:
    return postprocess_returns(batch, config)


class MARWILTrainer(Trainer):
    """MARWIL with the classic RLlib API.

    Examples:
        >>> from rlstack.trainers.marwil import MARWILTrainer, DEFAULT_CONFIG
        >>> config = DEFAULT_CONFIG.copy()
        >>> config.update(train_batch_size=200, min_time_s_per_reporting=0)
        >>> trainer = MARWILTrainer(config, "CartPole-v1")  # input: "sampler" (its own envs)
        >>> trainer.train()["timesteps_total"]
        200
        >>> trainer.stop()
    """

    _name = "MARWIL"
    supports_multi_agent = False
    _default_config = DEFAULT_CONFIG
    postprocess_fn = staticmethod(_marwil_postprocess)

    @classmethod
    def validate_config(cls, config: dict[str, Any]) -> None:
        for key in ("beta", "vf_coeff", "bc_logstd_coeff", "moving_average_sqd_adv_norm_update_rate"):
            value = config[key]
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"{key} must be a number >= 0, got {value!r}.")
        start = config["moving_average_sqd_adv_norm_start"]
        if not isinstance(start, (int, float)) or isinstance(start, bool) or start <= 0:
            raise ConfigError(f"moving_average_sqd_adv_norm_start must be a number > 0, got {start!r}.")
        for key in ("replay_buffer_size", "learning_starts"):
            value = config[key]
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"{key} must be an integer >= 0, got {value!r}.")
        if config["replay_buffer_size"] and config["replay_buffer_size"] < config["train_batch_size"]:
            raise ConfigError(f"replay_buffer_size ({config['replay_buffer_size']}) must hold a train batch "
                              f"(train_batch_size {config['train_batch_size']}); raise it, or set it to 0 to learn "
                              "on each batch as read")
        if config["input"] != "sampler" and not config["postprocess_inputs"]:
            raise ConfigError(f"{cls._name} needs each recorded row's return: keep postprocess_inputs=True (it "
                              "computes them from the recorded rewards)")

    policy_classes = {"torch": "rlstack.trainers.marwil.marwil_torch_policy:MARWILTorchPolicy",
                      "tf": "rlstack.trainers.marwil.marwil_tf_policy:MARWILTFPolicy"}

    def setup(self, config: dict[str, Any]) -> None:
        super().setup(config)
        size = self.config["replay_buffer_size"]
        self.replay_buffer = ReplayBuffer(size, seed=self.config["seed"]) if size else None

    def training_step(self) -> dict[str, Any]:
        cfg = self.config
        with self._timers["sample"]:
            batch = self.sample_train_batch(cfg["train_batch_size"])
        if isinstance(batch, MultiAgentBatch):
            raise ConfigError(f"{self._name} read a multi-agent batch; it learns one policy from single-agent data")
        self.count_sampled(batch)
        policy = self.learner_policy
        batch = SampleBatch({key: batch[key] for key in policy.loss_columns})
        if self.replay_buffer is not None:
            self.replay_buffer.add(batch)
            if self._counters["num_env_steps_sampled"] < cfg["learning_starts"]:
                return {}
            batch = self.replay_buffer.sample(cfg["train_batch_size"])
        with self._timers["learn"]:
            info = {"default_policy": {"learner_stats": policy.learn_on_batch(batch)}}
        self.count_trained(batch)
        with self._timers["synch_weights"]:
            self.sync_learned_weights(info)
        return info

    def extra_results(self) -> dict[str, Any]:
        return {"replay_buffer": self.replay_buffer.stats()} if self.replay_buffer is not None else {}
