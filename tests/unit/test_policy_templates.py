"""Classic RLlib's policy templates (build_policy_class / build_torch_policy /
build_tf_policy, ``with_updates``): a policy written as 1.13 functions learns on rlstack's
learner, in both frameworks."""

from __future__ import annotations

import numpy as np
import pytest

from rlstack.evaluation.postprocessing import discount_cumsum
from rlstack.sample_batch import SampleBatch
from rlstack.trainers.trainer import Trainer


def _returns(policy, sample_batch, other_agent_batches=None, episode=None):
    sample_batch["returns"] = discount_cumsum(sample_batch[SampleBatch.REWARDS], 0.99)
    return sample_batch


def _template_policy(framework):
    """REINFORCE as 1.13's custom_torch_policy / custom_tf_policy examples write it."""
    calls = {"stats": 0}
    if framework == "torch":
        import torch

        from rlstack.policies.torch_policy_template import build_torch_policy

        def loss(policy, model, dist_class, train_batch):
            logits, _ = model({SampleBatch.CUR_OBS: train_batch[SampleBatch.CUR_OBS]})
            logp = dist_class(logits, model).logp(train_batch[SampleBatch.ACTIONS])
            policy.pg_loss = -torch.mean(logp * train_batch["returns"])
            return policy.pg_loss

        def stats(policy, train_batch):
            calls["stats"] += 1
            return {"pg_loss": policy.pg_loss, "rows": float(len(train_batch[SampleBatch.ACTIONS]))}

        return build_torch_policy("MyTorchPolicy", loss_fn=loss, postprocess_fn=_returns, stats_fn=stats), calls
    from rlstack.models.tf.framework import tf
    from rlstack.policies.tf_policy_template import build_tf_policy

    def loss(policy, model, dist_class, train_batch):
        logits, _ = model(train_batch)
        logp = dist_class(logits, model).logp(train_batch["actions"])
        policy.pg_loss = -tf.reduce_mean(logp * train_batch["returns"])
        return policy.pg_loss

    def stats(policy, train_batch):
        calls["stats"] += 1
        return {"pg_loss": policy.pg_loss}

    return build_tf_policy("MyTFPolicy", loss_fn=loss, postprocess_fn=_returns, stats_fn=stats), calls


def test_template_policy_learns_through_a_trainer_that_names_it(framework):
    policy_class, calls = _template_policy(framework)

    class MyTrainer(Trainer):
        def get_default_policy_class(self, config):
            return policy_class

    trainer = MyTrainer({"framework": framework, "num_workers": 0, "train_batch_size": 200,
                         "rollout_fragment_length": 100, "seed": 0, "lr": 0.01,
                         "model": {"fcnet_hiddens": [16]}}, env="CartPole-v1")
    try:
        policy = trainer.get_policy()
        assert isinstance(policy, policy_class) and type(policy).__name__ == policy_class.__name__
        before = {k: np.copy(v) for k, v in policy.get_weights().items()}
        result = trainer.train()
        stats = result["info"]["learner"]["default_policy"]["learner_stats"]
        assert np.isfinite(stats["pg_loss"]) and calls["stats"] > 0
        changed = [k for k, v in policy.get_weights().items() if not np.allclose(v, before[k])]
        assert changed, "a gradient step on the template's loss changed no weight"
    finally:
        trainer.stop()


def test_with_updates_replaces_the_loss_of_a_built_in_policy(framework):
    from rlstack.trainers.pg import PGTrainer

    base = PGTrainer.policy_classes[framework]
    module_name, class_name = base.split(":")
    import importlib

    pg_policy = getattr(importlib.import_module(module_name), class_name)
    used = []

    def entropy_loss(policy, model, dist_class, train_batch):
        logits, _ = model(train_batch)
        dist = dist_class(logits, model)
        used.append(True)
        if framework == "torch":
            import torch

            return torch.mean(-0.1 * dist.entropy() - dist.logp(train_batch["actions"]) * train_batch["advantages"])
        from rlstack.models.tf.framework import tf

        return tf.reduce_mean(-0.1 * dist.entropy() - dist.logp(train_batch["actions"]) * train_batch["advantages"])

    entropy_policy = pg_policy.with_updates(loss_fn=entropy_loss)
    assert issubclass(entropy_policy, pg_policy) and entropy_policy.__name__ == pg_policy.__name__

    class EntropyPG(PGTrainer):
        def get_default_policy_class(self, config):
            return entropy_policy

    trainer = EntropyPG({"framework": framework, "num_workers": 0, "train_batch_size": 100,
                         "rollout_fragment_length": 100, "model": {"fcnet_hiddens": [8]}}, env="CartPole-v1")
    try:
        trainer.train()
        assert used and isinstance(trainer.get_policy(), entropy_policy)
    finally:
        trainer.stop()
    # With an LSTM (1.13's rock_paper_scissors example): the loss's model(train_batch) reads
    # each sequence's state_in_* and seq_lens from the batch, whose step columns are rows.
    used.clear()
    trainer = EntropyPG({"framework": framework, "num_workers": 0, "train_batch_size": 100,
                         "rollout_fragment_length": 100,
                         "model": {"fcnet_hiddens": [8], "use_lstm": True, "lstm_cell_size": 8, "max_seq_len": 10}},
                        env="CartPole-v1")
    try:
        stats = trainer.train()["info"]["learner"]["default_policy"]["learner_stats"]
        assert used and trainer.get_policy().is_recurrent and all(np.isfinite(v) for v in stats.values()
                                                                  if np.isscalar(v))
    finally:
        trainer.stop()


def test_template_refuses_what_the_learner_cannot_honour():
    from rlstack.policies.policy_template import build_policy_class

    with pytest.raises(TypeError, match="optimizer_fn.*make_optimizers"):
        build_policy_class("P", "torch", loss_fn=lambda *a: 0, optimizer_fn=lambda policy, config: None)
    with pytest.raises(TypeError, match="unexpected keyword argument 'lossfn'"):
        build_policy_class("P", "torch", loss_fn=None, lossfn=lambda *a: 0)
    with pytest.raises(ValueError, match="'jax'"):
        build_policy_class("P", "jax", loss_fn=None)


def test_trainer_without_a_policy_class_says_how_to_name_one():
    from rlstack.errors import ConfigError

    with pytest.raises(ConfigError, match="get_default_policy_class"):
        Trainer({"num_workers": 0}, env="CartPole-v1")
