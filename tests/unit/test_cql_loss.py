"""CQL's losses (Kumar et al. 2020): torch and TF agree on a fixed batch with equal weights
and equal noise, in the behaviour-cloning phase and after it, with and without the
Lagrangian; the conservative term is SAC's critic loss plus min_q_weight times the gap,
checked by hand on the pieces; bad keys and action spaces are refused with a message."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest

from rlstack.errors import ConfigError
from rlstack.sample_batch import SampleBatch
from rlstack.trainers.common.config import merge_config
from rlstack.trainers.cql import CQL_DEFAULT_CONFIG, CQLTrainer

B = SampleBatch
OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
ACTIONS = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
N = 6


def _policy(framework, **overrides):
    config = merge_config(CQL_DEFAULT_CONFIG, {"seed": 0, "gamma": 0.9, "train_batch_size": N, "num_actions": 3,
                                               "Q_model": {"fcnet_hiddens": [8]}, "policy_model": {"fcnet_hiddens": [7]},
                                               **overrides}, "CQL")
    CQLTrainer.validate_config(config)
    if framework == "torch":
        from rlstack.trainers.cql.cql_torch_policy import CQLTorchPolicy

        return CQLTorchPolicy(OBS_SPACE, ACTIONS, config)
    from rlstack.trainers.cql.cql_tf_policy import CQLTFPolicy

    return CQLTFPolicy(OBS_SPACE, ACTIONS, config)


def _batch(seed=1):
    rng = np.random.default_rng(seed)
    return SampleBatch({B.OBS: rng.uniform(-1, 1, (N, 3)).astype(np.float32),
                        B.ACTIONS: rng.uniform(-0.9, 0.9, (N, 2)).astype(np.float32),
                        B.REWARDS: rng.normal(size=N).astype(np.float32),
                        B.NEXT_OBS: rng.uniform(-1, 1, (N, 3)).astype(np.float32),
                        B.TERMINATEDS: np.arange(N) % 4 == 0, B.DISCOUNTS: np.full(N, 0.9, np.float32),
                        B.WEIGHTS: np.ones(N, np.float32)})


def _fixed(shape, low=None):
    # The same numbers for the same shape, whichever framework asks and in which order.
    rng = np.random.default_rng(int(np.prod(shape)) + (7 if low is not None else 0))
    if low is not None:
        return rng.uniform(-1, 1, shape).astype(np.float32)
    return rng.normal(size=shape).astype(np.float32)


def _losses(framework, weights=None, **overrides):
    policy = _policy(framework, **overrides)
    rng = np.random.default_rng(5)
    if weights is None:
        weights = {k: (rng.normal(size=v.shape) * 0.5).astype(np.float32) for k, v in policy.get_weights().items()
                   if k != "log_alpha"}
    policy.set_weights({**weights, "log_alpha": np.float32(math.log(0.5))})
    policy.target_critics.set_canonical_weights({k: v for k, v in weights.items() if "q" in k})
    batch = _batch()
    if framework == "torch":
        import torch

        policy.loss_noise = lambda shape: torch.from_numpy(_fixed(tuple(shape)))
        policy.cql_uniform_actions = lambda shape: torch.from_numpy(_fixed(tuple(shape), low=-1))
        losses, stats = policy.loss({k: torch.from_numpy(np.asarray(batch[k])) for k in policy.loss_columns})
        return [float(x.detach()) for x in losses], {k: float(np.mean(v.detach().numpy())) for k, v in stats.items()}, weights
    from rlstack.models.tf.framework import tf

    policy.loss_noise = lambda shape: tf.constant(_fixed(tuple(int(s) for s in shape)))
    policy.cql_uniform_actions = lambda shape: tf.constant(_fixed(tuple(int(s) for s in shape), low=-1))
    losses, stats = policy.loss({k: tf.convert_to_tensor(batch[k]) for k in policy.loss_columns})
    return [float(x) for x in losses], {k: float(np.mean(v.numpy())) for k, v in stats.items()}, weights


@pytest.mark.parametrize("overrides", [{}, {"bc_iters": 0}, {"lagrangian": True, "bc_iters": 0}])
def test_torch_and_tf_losses_agree(overrides):
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    torch_losses, torch_stats, weights = _losses("torch", **overrides)
    tf_losses, tf_stats, _ = _losses("tf", weights=weights, **overrides)
    assert len(torch_losses) == (4 if overrides.get("lagrangian") else 3)
    np.testing.assert_allclose(torch_losses, tf_losses, rtol=2e-4, atol=2e-5)
    for key in ("cql_loss", "cql_gap", "mean_q"):
        np.testing.assert_allclose(torch_stats[key], tf_stats[key], rtol=2e-4, atol=2e-5)


def test_the_conservative_term_is_added_to_sacs_critic_loss(framework):
    with_cql, stats, weights = _losses(framework, bc_iters=0)
    without, _, _ = _losses(framework, weights=weights, bc_iters=0, min_q_weight=0.0)
    assert with_cql[1] == pytest.approx(without[1] + stats["cql_loss"], rel=1e-5)
    assert stats["cql_loss"] == pytest.approx(5.0 * 2 * stats["cql_gap"], rel=1e-5)  # twin critics, weight 5
    assert with_cql[0] == pytest.approx(without[0], rel=1e-6)  # the actor's loss is SAC's after bc_iters


def test_behaviour_cloning_changes_only_the_actor_loss(framework):
    cloning, _, weights = _losses(framework)
    sac, _, _ = _losses(framework, weights=weights, bc_iters=0)
    assert cloning[0] != pytest.approx(sac[0])
    assert cloning[1:] == pytest.approx(sac[1:], rel=1e-5)


@pytest.mark.parametrize(("overrides", "words"), [
    ({"num_actions": 0}, "num_actions must be an integer >= 1"),
    ({"temperature": 0}, "temperature must be a number > 0"),
    ({"min_q_weight": -1}, "min_q_weight must be a number >= 0"),
    ({"lagrangian": "yes"}, "lagrangian must be True or False"),
    ({"input": "/tmp", "postprocess_inputs": False}, "keep postprocess_inputs=True"),
])
def test_bad_keys_are_errors_naming_them(overrides, words, tmp_path):
    if overrides.get("input"):
        (tmp_path / "x.json").write_text("{}\n")
        overrides = {**overrides, "input": str(tmp_path)}
    with pytest.raises(ConfigError, match=words.replace("(", r"\(")):
        CQLTrainer.merge_and_validate(overrides)


def test_discrete_actions_are_refused_with_the_alternatives():
    pytest.importorskip("torch")
    from rlstack.trainers.cql.cql_torch_policy import CQLTorchPolicy

    config = merge_config(CQL_DEFAULT_CONFIG, {}, "CQL")
    CQLTrainer.validate_config(config)
    with pytest.raises(ConfigError, match="BC or MARWIL"):
        CQLTorchPolicy(OBS_SPACE, gym.spaces.Discrete(3), config)
