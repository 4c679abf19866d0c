"""PPO with use_attention (GTrXL) in trainers: remote workers act with the framework model
and its memory, evaluation carries it, the 1.13 inference loop feeds state_out back, a
checkpoint restores the same actions for the same memory, in torch and TF."""

from __future__ import annotations

import numpy as np

from rlstack.examples.env.repeat_after_me_env import RepeatAfterMeEnv
from tests.integration.test_lstm import assert_restored_acts_the_same, inference_loop, trained_fixture

MEMORY = (6, 16)  # attention_memory_*, attention_dim


def _config(framework, **overrides):
    return {"framework": framework, "num_workers": 1, "train_batch_size": 400, "sgd_minibatch_size": 100,
            "num_sgd_iter": 2, "rollout_fragment_length": 100, "seed": 1, "evaluation_interval": 1,
            "evaluation_duration": 2, "evaluation_num_workers": 1, "env_config": {"episode_len": 50},
            "model": {"use_attention": True, "max_seq_len": 10, "fcnet_hiddens": [16], "attention_dim": MEMORY[1],
                      "attention_memory_inference": MEMORY[0], "attention_memory_training": MEMORY[0],
                      "attention_head_dim": 8, "attention_position_wise_mlp_dim": 16},
            **overrides}


def _inference_loop(trainer, seed, steps=None):
    """1.13's "policy inference after training" loop with a memory, after the renames."""
    return inference_loop(trainer, seed, steps=steps, env=RepeatAfterMeEnv({"episode_len": 50}))


trained = trained_fixture(_config, "RepeatAfterMeEnv")


def test_trains_with_a_remote_worker_and_evaluates_with_memory(trained):
    framework, trainer, result, _ = trained
    assert result["timesteps_total"] >= 400
    assert np.isfinite(result["info"]["learner"]["default_policy"]["learner_stats"]["total_loss"])
    assert result["evaluation"]["episodes_this_iter"] >= 2
    # The remote worker acts with the framework's model (no numpy GTrXL) and the learner's weights.
    frameworks = trainer.workers.foreach_worker(lambda w: w.sampling_policy.framework)
    assert set(frameworks) == {framework}


def test_the_113_inference_loop_carries_the_memory(trained):
    _, trainer, _, _ = trained
    actions, state = _inference_loop(trainer, seed=3)
    assert len(actions) == 50 and [value.shape for value in state] == [MEMORY]
    assert state[0].any()
    assert _inference_loop(trainer, seed=3)[0] == actions


def test_checkpoint_restores_the_same_actions_for_the_same_memory(trained):
    rng = np.random.default_rng(0)
    observations = rng.integers(0, 2, 20)
    state = [rng.normal(0, 1, (20, *MEMORY)).astype(np.float32)]

    def act(t):
        obs = np.eye(2, dtype=np.float32)[observations]  # the Discrete(2) tokens, one-hot as workers give them
        return t.get_policy().compute_actions(obs, explore=False, state_batches=state)[1]

    assert_restored_acts_the_same(trained, _config, "RepeatAfterMeEnv", act,
                                  lambda t: _inference_loop(t, seed=5, steps=30)[0], rtol=1e-5, atol=1e-6)
