"""MARWIL's and BC's loss (Wang et al. 2018): torch and TF agree with a numpy reference
(and so with each other), the moving average of the squared advantage moves as 1.13's
did and is saved with the policy, and the returns postprocessing bootstraps only where a
piece did not terminate."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlstack.sample_batch import SampleBatch
from rlstack.trainers.common.config import merge_config
from rlstack.trainers.marwil import DEFAULT_CONFIG
from rlstack.trainers.marwil.marwil_policy import postprocess_returns

B = SampleBatch
OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
ACTION_SPACE = gym.spaces.Discrete(3)


def _policy(framework: str, **overrides):
    config = merge_config(DEFAULT_CONFIG, {"seed": 3, "model": {"fcnet_hiddens": [16]},
                                           "moving_average_sqd_adv_norm_update_rate": 0.1, **overrides}, "MARWIL")
    if framework == "torch":
        from rlstack.trainers.marwil.marwil_torch_policy import MARWILTorchPolicy

        return MARWILTorchPolicy(OBS_SPACE, ACTION_SPACE, config)
    from rlstack.trainers.marwil.marwil_tf_policy import MARWILTFPolicy

    return MARWILTFPolicy(OBS_SPACE, ACTION_SPACE, config)


def _batch(n: int = 32, seed: int = 0) -> SampleBatch:
    rng = np.random.default_rng(seed)
    return SampleBatch({B.OBS: rng.uniform(-1, 1, (n, 4)).astype(np.float32), B.ACTIONS: rng.integers(0, 3, n),
                        B.VALUE_TARGETS: rng.normal(0, 5, n).astype(np.float32)})


def numpy_marwil_loss(policy, batch, beta, vf_coeff, norm_start, rate):
    """The loss in float64 and the moving average after the step."""
    from rlstack.models.numpy.model import NumpyModel

    model = NumpyModel(policy.model_spec())
    model.set_canonical_weights(policy.get_weights())
    logits, values = model(batch[B.OBS].astype(np.float64))
    shifted = logits - logits.max(axis=1, keepdims=True)
    logp = (shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True)))[np.arange(batch.count), batch[B.ACTIONS]]
    if beta == 0.0:
        return -logp.mean(), norm_start
    advantages = batch[B.VALUE_TARGETS] - values
    norm = norm_start + rate * ((advantages**2).mean() - norm_start)
    weights = np.exp(beta * advantages / (1e-8 + np.sqrt(norm)))
    return -(weights * logp).mean() + vf_coeff * 0.5 * (advantages**2).mean(), norm


def _loss(policy, batch):
    if policy.framework == "torch":
        import torch

        loss, stats = policy.loss({key: torch.from_numpy(value) for key, value in batch.items()})
        return float(loss.detach()), {k: float(v.detach()) for k, v in stats.items()}
    import tensorflow as tf

    loss, stats = policy.loss({key: tf.convert_to_tensor(value) for key, value in batch.items()})
    return float(loss), {k: float(v) for k, v in stats.items()}


@pytest.mark.parametrize("beta", [0.0, 1.0, 3.0])
def test_loss_matches_numpy_reference(framework, beta):
    policy = _policy(framework, beta=beta, vf_coeff=0.7)
    batch = _batch()
    expected, norm = numpy_marwil_loss(policy, batch, beta, 0.7, 100.0, 0.1)
    loss, stats = _loss(policy, batch)
    np.testing.assert_allclose(loss, expected, rtol=2e-5)
    if beta:
        np.testing.assert_allclose(stats["moving_average_sqd_adv_norm"], norm, rtol=1e-5)
        assert "vf_loss" in stats and "vf_explained_var" in stats
    else:  # BC: no value function is learned
        assert "vf_loss" not in stats


def test_the_moving_average_is_saved_and_restored(framework):
    policy = _policy(framework)
    policy.learn_on_batch(_batch())
    state = policy.get_state()
    assert float(state["moving_average_sqd_adv_norm"]) != 100.0
    fresh = _policy(framework)
    fresh.set_state(state)
    assert float(fresh.get_state()["moving_average_sqd_adv_norm"]) == pytest.approx(
        float(state["moving_average_sqd_adv_norm"]))


def test_learning_moves_towards_the_recorded_actions(framework):
    policy = _policy(framework, beta=0.0, lr=0.05)
    batch = _batch()
    batch[B.ACTIONS] = np.full(batch.count, 2)
    before = policy.compute_log_likelihoods(batch[B.ACTIONS], batch[B.OBS]).mean()
    for _ in range(20):
        policy.learn_on_batch(batch)
    assert policy.compute_log_likelihoods(batch[B.ACTIONS], batch[B.OBS]).mean() > before + 0.5


def test_returns_bootstrap_only_pieces_that_did_not_terminate():
    config = {"gamma": 0.5}
    rewards = np.array([1.0, 1.0, 1.0], np.float32)
    done = SampleBatch({B.REWARDS: rewards, B.TERMINATEDS: [False, False, True],
                        B.BOOTSTRAP_VALUE: [0.0, 0.0, 8.0]})
    np.testing.assert_allclose(postprocess_returns(done, config)[B.VALUE_TARGETS], [1.75, 1.5, 1.0])
    cut = SampleBatch({B.REWARDS: rewards, B.TERMINATEDS: [False, False, False],
                       B.BOOTSTRAP_VALUE: [0.0, 0.0, 8.0]})
    np.testing.assert_allclose(postprocess_returns(cut, config)[B.VALUE_TARGETS], [2.75, 3.5, 5.0])
    # 1.13's files have neither terminateds nor bootstrap values: an episode's end.
    old = SampleBatch({B.REWARDS: rewards})
    np.testing.assert_allclose(postprocess_returns(old, config)[B.VALUE_TARGETS], [1.75, 1.5, 1.0])


@pytest.mark.parametrize(("overrides", "words"), [
    ({"beta": -1.0}, "beta must be a number >= 0"),
    ({"moving_average_sqd_adv_norm_start": 0}, "moving_average_sqd_adv_norm_start must be a number > 0"),
    ({"replay_buffer_size": 100}, "replay_buffer_size (100) must hold a train batch"),
    ({"input": "/nonexistent/cartpole-out"}, "'/nonexistent/cartpole-out' is neither a file"),
    ({"input": {"sampler": 0.5, "/tmp": 0.2}}, "sum to 0.7, not 1"),
    ({"off_policy_estimation_methods": {"x": {"type": "nope"}}}, "unknown type 'nope'"),
])
def test_bad_config_is_an_error_naming_the_key(overrides, words):
    from rlstack.errors import ConfigError
    from rlstack.trainers.marwil import MARWILTrainer

    with pytest.raises(ConfigError) as err:
        MARWILTrainer.merge_and_validate({**overrides, "framework": "torch"})
    assert words in str(err.value)


def test_bc_refuses_a_beta():
    from rlstack.errors import ConfigError
    from rlstack.trainers.marwil import BCTrainer

    with pytest.raises(ConfigError, match="BC is MARWIL with beta=0"):
        BCTrainer.merge_and_validate({"beta": 1.0})
