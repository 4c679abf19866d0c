"""ES and ARS without Ray: centered ranks, antithetic pairs from the noise table, the
ES and ARS update directions against hand-written sums, Adam's first step, config errors
naming the key, and the numpy forward pass the actors act with against the torch and TF
policies' (same weights, same observations)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlstack.errors import ConfigError
from rlstack.trainers.ars import ARSTrainer
from rlstack.trainers.ars.ars import SGD, ars_gradient, top_directions
from rlstack.trainers.es import ESTrainer
from rlstack.trainers.es.es import Adam, es_gradient
from rlstack.trainers.common.evolution import (EvolutionWorker, centered_ranks, create_noise_table, flatten,
                                        policy_weight_names, unflatten)


def test_centered_ranks_against_hand_values():
    returns = np.array([[3.0, 1.0], [2.0, 10.0], [-4.0, 2.5]])
    # Sorted: -4 (0), 1 (1), 2 (2), 2.5 (3), 3 (4), 10 (5); rank / 5 - 0.5.
    expected = np.array([[0.3, -0.3], [-0.1, 0.5], [-0.5, 0.1]])
    np.testing.assert_allclose(centered_ranks(returns), expected)
    assert centered_ranks(returns).sum() == pytest.approx(0.0)


def test_noise_table_is_seeded_float32_gaussian():
    table = create_noise_table(100_000)
    assert table.dtype == np.float32
    np.testing.assert_array_equal(table, create_noise_table(100_000))
    assert abs(table.mean()) < 0.02 and abs(table.std() - 1) < 0.02


def _worker(noise, monkeypatch, eval_prob=0.0):
    # An EvolutionWorker in this process, its episodes replaced by a record of the weights.
    config = ESTrainer.merge_and_validate({"num_workers": 1, "noise_size": noise.size, "seed": 3,
                                           "model": {"fcnet_hiddens": [4]}})
    worker = EvolutionWorker("CartPole-v1", config, noise, worker_index=1)
    seen = []

    def rollout(theta, add_noise, offset=0.0):
        seen.append((np.array(theta), add_noise))
        return float(theta.sum()), 10, float(theta.sum()) - abs(offset) * 10

    monkeypatch.setattr(worker, "rollout", rollout)
    return worker, seen


def test_antithetic_pairs_share_one_noise_slice(monkeypatch):
    noise = create_noise_table(10_000)
    worker, seen = _worker(noise, monkeypatch)
    theta = flatten(worker.base_weights, worker.names)
    out = worker.do_rollouts(theta, worker.filter.get_state(), num_pairs=5, eval_prob=0.0, noise_stdev=0.1)
    assert out["noise_indices"].shape == (5,) and out["noisy_returns"].shape == (5, 2)
    assert len(seen) == 10 and all(add_noise for _, add_noise in seen)
    for k, index in enumerate(out["noise_indices"]):
        assert 0 <= index <= noise.size - theta.size
        eps = noise[index:index + theta.size]
        np.testing.assert_allclose(seen[2 * k][0], theta + 0.1 * eps, rtol=1e-6)      # +eps first
        np.testing.assert_allclose(seen[2 * k + 1][0], theta - 0.1 * eps, rtol=1e-6)  # then -eps
    assert len(set(out["noise_indices"].tolist())) == 5


def test_eval_episodes_use_theta_itself(monkeypatch):
    worker, seen = _worker(create_noise_table(10_000), monkeypatch)
    theta = flatten(worker.base_weights, worker.names)
    out = worker.do_rollouts(theta, worker.filter.get_state(), num_pairs=4, eval_prob=0.999, noise_stdev=0.1)
    assert out["eval_returns"].size == 4 and out["noise_indices"].size == 0
    assert all(np.array_equal(weights, theta) and not add_noise for weights, add_noise in seen)


def test_es_gradient_against_hand_sum():
    noise = np.arange(20, dtype=np.float32)
    indices, returns = np.array([0, 5, 2]), np.array([[3.0, 1.0], [2.0, 10.0], [-4.0, 2.5]])
    ranks = centered_ranks(returns)
    expected = sum((ranks[i, 0] - ranks[i, 1]) * noise[j:j + 4] for i, j in enumerate(indices)) / 6
    np.testing.assert_allclose(es_gradient(noise, indices, returns, 4), expected, rtol=1e-6)
    raw = sum((returns[i, 0] - returns[i, 1]) * noise[j:j + 4] for i, j in enumerate(indices)) / 6
    np.testing.assert_allclose(es_gradient(noise, indices, returns, 4, "raw"), raw, rtol=1e-6)


def test_ars_keeps_the_best_directions_and_divides_by_their_std():
    returns = np.array([[1.0, 5.0], [3.0, 2.0], [0.0, 9.0], [4.0, 4.5]])
    np.testing.assert_array_equal(top_directions(returns, 2), [2, 0])  # max 9, then 5
    np.testing.assert_array_equal(top_directions(returns, 10), [2, 0, 3, 1])
    noise = np.linspace(-1, 1, 30).astype(np.float32)
    indices = np.array([0, 10, 20, 5])
    kept = returns[[2, 0]]
    expected = ((0.0 - 9.0) * noise[20:23] + (1.0 - 5.0) * noise[0:3]) / 2 / np.std(kept)
    np.testing.assert_allclose(ars_gradient(noise, indices, returns, 3, rollouts_used=2), expected, rtol=1e-5)


def test_adam_and_sgd_first_steps():
    theta, g = np.array([1.0, -2.0], np.float32), np.array([0.5, -0.1], np.float32)
    new, ratio = Adam(2, stepsize=0.01).update(theta, g)
    # First Adam step: -stepsize * sign(g) (bias corrections cancel, epsilon aside).
    np.testing.assert_allclose(new, theta - 0.01 * np.sign(g), rtol=1e-5)
    assert ratio == pytest.approx(np.linalg.norm(new - theta) / np.linalg.norm(new), rel=1e-5)
    new, _ = SGD(2, stepsize=0.1).update(theta, g)
    np.testing.assert_allclose(new, theta - 0.1 * 0.1 * g, rtol=1e-6)  # momentum 0.9: v = 0.1 g


def test_flat_weights_leave_the_value_branch_out():
    weights = {"fc_0/kernel": np.ones((2, 3)), "fc_0/bias": np.zeros(3), "vf_fc_0/kernel": np.ones((2, 3)),
               "logits/kernel": np.ones((3, 2)), "value_out/bias": np.zeros(1)}
    names = policy_weight_names(weights)
    assert names == ["fc_0/bias", "fc_0/kernel", "logits/kernel"]
    theta = flatten(weights, names)
    assert theta.shape == (15,) and theta.dtype == np.float32
    back = unflatten(theta + 1, weights, names)
    np.testing.assert_array_equal(back["fc_0/kernel"], 2 * np.ones((2, 3)))
    assert back["vf_fc_0/kernel"] is weights["vf_fc_0/kernel"]


@pytest.mark.parametrize("trainer, key, value", [
    (ESTrainer, "return_proc_mode", "ranks"),
    (ESTrainer, "num_workers", 0),
    (ESTrainer, "noise_stdev", 0),
    (ESTrainer, "eval_prob", 1.5),
    (ESTrainer, "stepsize", -1),
    (ESTrainer, "episodes_per_batch", "ten"),
    (ESTrainer, "noise_size", 0.5),
    (ARSTrainer, "rollouts_used", 0),
    (ARSTrainer, "num_rollouts", 2.5),
    (ARSTrainer, "sgd_stepsize", 0),
    (ARSTrainer, "report_length", 0),
    (ARSTrainer, "evaluation_interval", 2),
])
def test_bad_config_names_the_key(trainer, key, value):
    with pytest.raises(ConfigError, match=key):
        trainer.merge_and_validate({key: value})


def test_unknown_key_suggests_the_right_one():
    with pytest.raises(ConfigError, match="rollouts_used"):
        ARSTrainer.merge_and_validate({"rollout_used": 4})
    with pytest.raises(ConfigError, match="custom_model"):
        ESTrainer.merge_and_validate({"model": {"custom_model": "x"}})


def test_numpy_forward_equals_torch_and_tf():
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from rlstack.policies.numpy_policy import NumpyPolicy
    from rlstack.sample_batch import SampleBatch
    from rlstack.trainers.es.es_tf_policy import ESTFPolicy
    from rlstack.trainers.es.es_torch_policy import ESTorchPolicy

    obs_space, act_space = gym.spaces.Box(-1, 1, (4,), np.float32), gym.spaces.Discrete(3)
    config = ESTrainer.merge_and_validate({"model": {"fcnet_hiddens": [8, 8]}, "seed": 1})
    torch_policy = ESTorchPolicy(obs_space, act_space, config)
    weights = torch_policy.get_weights()
    names = policy_weight_names(weights)
    # Perturbed weights as the search would make them, in all three.
    theta = flatten(weights, names) + 0.3 * create_noise_table(10_000)[:sum(weights[n].size for n in names)]
    weights = unflatten(theta, weights, names)
    tf_policy, numpy_policy = ESTFPolicy(obs_space, act_space, config), NumpyPolicy(obs_space, act_space, config)
    for policy in (torch_policy, tf_policy, numpy_policy):
        policy.set_weights(weights)
    obs = np.random.default_rng(0).uniform(-1, 1, (16, 4)).astype(np.float32)
    numpy_out, _ = numpy_policy.model(obs)
    for policy in (torch_policy, tf_policy):
        _, extras = policy.compute_actions(obs, explore=False)
        np.testing.assert_allclose(extras[SampleBatch.ACTION_DIST_INPUTS], numpy_out, rtol=1e-5, atol=1e-6)
