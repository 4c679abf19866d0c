"""A2CTrainer: synchronous advantage actor-critic, the synchronous twin of A3C.

One ``training_step``: the workers sample ``train_batch_size`` steps together (GAE on the
workers), the learner takes one gradient step on the whole batch (accumulated over
``microbatch_size`` rows at a time when set), and the weights go back to every worker.
Multi-agent, each policy of ``policies_to_train`` does so on its own rows.
"""

from __future__ import annotations

from typing import Any

from rlstack.policies.policy import Policy
from rlstack.policies.postprocessing import postprocess_advantages
from rlstack.sample_batch import SampleBatch
from rlstack.trainers.a3c.a3c import DEFAULT_CONFIG as A3C_DEFAULT_CONFIG
from rlstack.trainers.a3c.a3c import validate_actor_critic_config
from rlstack.trainers.common.config import DefaultConfig, merge_config
from rlstack.trainers.common.trainer import Trainer

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

    Examples:
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

    policy_classes = {"torch": "rlstack.trainers.a3c.a3c_torch_policy:A3CTorchPolicy",
                      "tf": "rlstack.trainers.a3c.a3c_tf_policy:A3CTFPolicy"}

    def learn_on_policy_batch(self, policy: Policy, batch: SampleBatch) -> dict[str, Any]:
        if policy.config.get("microbatch_size"):
            # Classic A2C's microbatches: gradients summed over microbatch_size rows at a
            # time (bounded memory), then one step, as A3C's driver applies them.
            grads, stats = policy.compute_gradients(batch)  # type: ignore[attr-defined]
            policy.apply_gradients(grads)  # type: ignore[attr-defined]
            return stats
        return policy.learn_on_batch(batch)
