"""A2CTrainer: synchronous advantage actor-critic, the synchronous twin of A3C.

One ``training_step``: the workers sample ``train_batch_size`` steps together (GAE on the
workers), the learner takes one gradient step on the whole batch (accumulated over
``microbatch_size`` rows at a time when set), and the weights go back to every worker.
"""

from __future__ import annotations

from typing import Any

from rlstack.evaluation.worker_set import synchronous_parallel_sample
from rlstack.policies.postprocessing import postprocess_advantages
from rlstack.trainers.a3c.a3c import DEFAULT_CONFIG as A3C_DEFAULT_CONFIG
from rlstack.trainers.a3c.a3c import actor_critic_policy_path, validate_actor_critic_config
from rlstack.trainers.config import DefaultConfig, merge_config
from rlstack.trainers.trainer import DEFAULT_POLICY_ID, Trainer

# Classic RLlib 1.x A2C defaults: A3C's with synchronous sampling.
A2C_DEFAULT_CONFIG: dict[str, Any] = DefaultConfig(merge_config(
    A3C_DEFAULT_CONFIG,
    {
        "rollout_fragment_length": 20,
        "min_time_s_per_reporting": 10,
        "sample_async": False,
        # A2C's workers only sample: they act in numpy where the model allows.
        "rollout_inference": "auto",
    },
    "A2C",
))


class A2CTrainer(Trainer):
    """A2C with the classic RLlib API.

    >>> from rlstack.trainers.a3c import A2CTrainer, A2C_DEFAULT_CONFIG
    >>> config = A2C_DEFAULT_CONFIG.copy()
    >>> config.update(num_workers=0, min_time_s_per_reporting=0)
    >>> trainer = A2CTrainer(config, "CartPole-v1")
    >>> trainer.train()["timesteps_total"]
    200
    >>> trainer.stop()
    """

    _name = "A2C"
    _default_config = A2C_DEFAULT_CONFIG
    postprocess_fn = staticmethod(postprocess_advantages)
    supports_recurrent_models = True

    @classmethod
    def validate_config(cls, config: dict[str, Any]) -> None:
        validate_actor_critic_config(config, cls._name)

    def get_policy_class_path(self, config: dict[str, Any]) -> str:
        return actor_critic_policy_path(config)

    def training_step(self) -> dict[str, Any]:
        cfg = self.config
        with self._timers["sample"]:
            batch = synchronous_parallel_sample(self.workers, max_env_steps=cfg["train_batch_size"])
        self._counters["num_env_steps_sampled"] += batch.count
        with self._timers["learn"]:
            if cfg["microbatch_size"]:
                # Classic A2C's microbatches: gradients summed over microbatch_size rows
                # at a time (bounded memory), then one step, as A3C's driver applies them.
                grads, stats = self.learner_policy.compute_gradients(batch)
                self.learner_policy.apply_gradients(grads)
            else:
                stats = self.learner_policy.learn_on_batch(batch)
        self._counters["num_env_steps_trained"] += batch.count
        with self._timers["synch_weights"]:
            self.learner_policy.on_global_var_update(self._counters["num_env_steps_sampled"])
            self.workers.sync_weights(self._counters["num_env_steps_sampled"])
            self.workers.sync_filters(broadcast=cfg["synchronize_filters"])
        return {DEFAULT_POLICY_ID: {"learner_stats": stats}}
