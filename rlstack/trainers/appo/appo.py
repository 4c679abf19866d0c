"""APPOTrainer: asynchronous PPO (1.13's APPO; Luo et al. 2020, "IMPACT").

IMPALA's machinery unchanged (``IMPALATrainer``: workers sample without pause, train
batches queue for a learner thread, a worker gets fresh weights after each of its
batches) with PPO's clipped surrogate as the loss. With ``vtrace`` the advantages are
V-trace's, computed on the learner, and the surrogate's ratio is ``pi / pi_target``:
the policy against a target network, a copy of the learner's weights refreshed every
``target_update_frequency`` train batches, which keeps "old" stable while the behaviour
policies of the workers lag by varying amounts. Without ``vtrace`` the workers compute
GAE advantages and the ratio is the plain PPO ``pi / mu`` against the behaviour policy.
"""

from __future__ import annotations

from typing import Any

from rlstack.errors import ConfigError
from rlstack.policies.postprocessing import postprocess_advantages
from rlstack.sample_batch import MultiAgentBatch, SampleBatch
from rlstack.trainers.common.config import DefaultConfig, merge_config
from rlstack.trainers.impala.impala import DEFAULT_CONFIG as IMPALA_CONFIG
from rlstack.trainers.impala.impala import IMPALATrainer


def postprocess_appo(batch: SampleBatch, config: dict) -> SampleBatch:
    """On the workers: GAE advantages and value targets when ``vtrace`` is off; nothing
    with V-trace (it runs on the learner)."""
    return batch if config["vtrace"] else postprocess_advantages(batch, config)


# Classic RLlib 1.13 APPO defaults, on top of IMPALA's (which sit on COMMON_CONFIG).
DEFAULT_CONFIG: dict[str, Any] = DefaultConfig(merge_config(
    {
        **IMPALA_CONFIG,
        # Use a value function; False is not implemented (APPO's both advantages need one).
        "use_critic": True,
        # vtrace=False only: GAE advantages on the workers (False: discounted returns minus V).
        "use_gae": True,
        # vtrace=False only: GAE lambda.
        "lambda": 1.0,
        # PPO's epsilon: the surrogate's ratio is clipped to [1 - clip_param, 1 + clip_param].
        "clip_param": 0.4,
        # Add kl_coeff * KL(pi_target || pi) to the loss (vtrace=False: KL(mu || pi)).
        "use_kl_loss": False,
        # Initial KL coefficient; adapted toward kl_target at every target update.
        "kl_coeff": 1.0,
        # Target KL divergence between the behaviour (or target) policy and the new one.
        "kl_target": 0.01,
        # The target network (the surrogate's pi_old with vtrace) is refreshed after this
        # many learner steps (a train batch's num_sgd_iter passes; with minibatch_buffer_size
        # > 1, one pass over one held batch). 1.13 had no key: after a learner step it
        # refreshed once more than num_sgd_iter * minibatch_buffer_size env steps had been
        # sampled since the last refresh, with sampling under way about every step: this default.
        "target_update_frequency": 1,
        # Not implemented (kept so 1.13 configs load; replay_proportion 0 means no replay).
        "replay_buffer_num_slots": 100,
    },
    {
        "rollout_fragment_length": 50,
        "train_batch_size": 500,
        "min_time_s_per_reporting": 10,
        "num_workers": 2,
        "num_sgd_iter": 1,
        "minibatch_buffer_size": 1,
        "replay_proportion": 0.0,
        "learner_queue_size": 16,
        "learner_queue_timeout": 300,
        "max_sample_requests_in_flight_per_worker": 2,
        "broadcast_interval": 1,
        "grad_clip": 40.0,
        "opt_type": "adam",
        "lr": 0.0005,
        "decay": 0.99,
        "momentum": 0.0,
        "epsilon": 0.1,
        "vf_loss_coeff": 0.5,
        "entropy_coeff": 0.01,
    },
    "APPO",
))

# 1.13 keys rlstack's APPO does not implement, and the one value each must keep.
_NOT_IMPLEMENTED = {"use_critic": True, "replay_proportion": 0.0, "num_aggregation_workers": 0}


class APPOTrainer(IMPALATrainer):
    """Asynchronous PPO with the classic RLlib API (IMPALA's trainer plus the target
    network; the loss is in the policies).

    Examples:
        >>> from rlstack.trainers.ppo.appo import APPOTrainer, DEFAULT_CONFIG
        >>> config = DEFAULT_CONFIG.copy()
        >>> config.update(num_workers=0, rollout_fragment_length=20, train_batch_size=100,
        ...               min_time_s_per_reporting=0, min_sample_timesteps_per_reporting=100)
        >>> trainer = APPOTrainer(config, "CartPole-v1")
        >>> result = trainer.train()
        >>> result["timesteps_total"], result["num_target_updates"]
        (100, 1)
        >>> trainer.stop()
    """

    _name = "APPO"
    _default_config = DEFAULT_CONFIG
    postprocess_fn = staticmethod(postprocess_appo)
    # The target network would need the whole sequences too; not implemented.
    supports_recurrent_models = False

    @classmethod
    def validate_config(cls, config: dict[str, Any]) -> None:
        """Checks APPO's keys, then IMPALA's.

        Raises:
            ConfigError: Naming the key, the value and the fix.
        """
        for key, allowed in _NOT_IMPLEMENTED.items():
            if config[key] != allowed:
                raise ConfigError(f"{key}={config[key]!r} is not implemented in rlstack's APPO; remove it "
                                  f"(or set {key}={allowed!r}).")
        for key in ("vtrace", "use_kl_loss", "use_gae"):
            if not isinstance(config[key], bool):
                raise ConfigError(f"{key} must be True or False, got {config[key]!r}.")
        value = config["target_update_frequency"]
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError(f"target_update_frequency must be an integer >= 1 (learner steps between target "
                              f"network updates), got {value!r}.")
        for key in ("clip_param", "kl_target", "kl_coeff", "lambda"):
            value = config[key]
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise ConfigError(f"{key} must be a number, got {value!r}.")
        for key in ("clip_param", "kl_target"):
            if not config[key] > 0:
                raise ConfigError(f"{key} must be > 0, got {config[key]!r}.")
        if config["kl_coeff"] < 0:
            raise ConfigError(f"kl_coeff must be >= 0, got {config['kl_coeff']!r}.")
        if not 0.0 <= config["lambda"] <= 1.0:
            raise ConfigError(f"lambda must be in [0, 1], got {config['lambda']!r}.")
        # IMPALA's checks (sampling, queue, optimizer, fragments), on the keys it knows.
        super().validate_config({**config, "vtrace": True, "replay_buffer_num_slots": 0})

    policy_classes = {"torch": "rlstack.trainers.appo.appo_torch_policy:APPOTorchPolicy",
                      "tf": "rlstack.trainers.appo.appo_tf_policy:APPOTFPolicy"}

    def setup(self, config: dict[str, Any]) -> None:
        super().setup(config)
        # Counters go into checkpoints: a restored trainer keeps the update phase.
        self._counters.update(num_learner_steps=0, num_target_updates=0, last_target_update_ts=0)

    def _learn(self, batch: SampleBatch | MultiAgentBatch) -> dict[str, Any]:
        # In the learner thread, under its lock (or the driver's synchronous step).
        info = super()._learn(batch)
        self._counters["num_learner_steps"] += 1
        if self._counters["num_learner_steps"] % self.config["target_update_frequency"] == 0:
            local = self.workers.local_worker()
            for pid, policy_info in info.items():
                # The KL coefficient adapts to the KL the last train batch measured (1.13).
                local.get_policy(pid).update_target(policy_info["learner_stats"].get("kl"))
            self._counters["num_target_updates"] += 1
            self._counters["last_target_update_ts"] = self.global_timestep()
        return info

    def extra_results(self) -> dict[str, Any]:
        return {**super().extra_results(),
                "num_target_updates": self._counters["num_target_updates"],
                "last_target_update_ts": self._counters["last_target_update_ts"]}
