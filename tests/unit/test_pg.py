"""PG (REINFORCE): the loss -mean(logp(a) * G) against a numpy reference, torch
and TF agreeing on one batch and one step from the same weights; the discounted returns
on hand-made pieces (a cut piece is not bootstrapped); workers record no bootstrap value
for PG; the config errors a user meets."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlstack.errors import ConfigError
from rlstack.evaluation.rollout_worker import RolloutWorker
from rlstack.sample_batch import SampleBatch
from rlstack.trainers.common.config import merge_config
from rlstack.trainers.pg import DEFAULT_CONFIG, PGTrainer, post_process_advantages
from rlstack.trainers.pg.pg_policy import postprocess_returns
from tests.helpers.tensors import loss_value

B = SampleBatch
OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
ACTION_SPACE = gym.spaces.Discrete(3)


def _config(**overrides):
    return merge_config(DEFAULT_CONFIG, {"seed": 2, "lr": 1e-2, "model": {"fcnet_hiddens": [16]}, **overrides}, "PG")


def _policy(framework: str, **overrides):
    if framework == "torch":
        from rlstack.trainers.pg.pg_torch_policy import PGTorchPolicy

        return PGTorchPolicy(OBS_SPACE, ACTION_SPACE, _config(**overrides))
    from rlstack.trainers.pg.pg_tf_policy import PGTFPolicy

    return PGTFPolicy(OBS_SPACE, ACTION_SPACE, _config(**overrides))


def _batch(n: int = 24, seed: int = 0) -> SampleBatch:
    rng = np.random.default_rng(seed)
    return SampleBatch({
        B.OBS: rng.uniform(-1, 1, (n, 4)).astype(np.float32),
        B.ACTIONS: rng.integers(0, 3, n),
        B.ADVANTAGES: rng.normal(0, 3, n).astype(np.float32),
    })


def numpy_pg_loss(weights: dict[str, np.ndarray], spec, batch: SampleBatch) -> float:
    """-mean_t log pi(a_t | s_t) G_t for a categorical policy, in float64."""
    from rlstack.models.numpy.model import NumpyModel

    model = NumpyModel(spec)
    model.set_canonical_weights(weights)
    logits, _ = model(batch[B.OBS].astype(np.float64))
    logits = logits.astype(np.float64)
    logits = logits - logits.max(axis=1, keepdims=True)
    logp_all = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    logp = logp_all[np.arange(batch.count), batch[B.ACTIONS]]
    return float(-(logp * batch[B.ADVANTAGES]).mean())


# ----- the loss ---------------------------------------------------------------------------

def test_loss_matches_numpy_reference(framework):
    policy = _policy(framework)
    batch = _batch()
    expected = numpy_pg_loss(policy.get_weights(), policy.model_spec(), batch)
    assert abs(expected) > 0.1  # a batch on which a wrong sign or a missing term shows
    np.testing.assert_allclose(loss_value(policy, batch), expected, rtol=1e-5)


def test_torch_and_tf_agree_on_the_loss_and_the_step_from_the_same_weights():
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    # Different seeds build different weights; the TF policy then takes the torch one's.
    torch_policy, tf_policy = _policy("torch", seed=3), _policy("tf", seed=4)
    assert not np.array_equal(torch_policy.get_weights()["logits/kernel"], tf_policy.get_weights()["logits/kernel"])
    tf_policy.set_weights(torch_policy.get_weights())
    batch = _batch(n=40, seed=3)
    np.testing.assert_allclose(loss_value(torch_policy, batch), loss_value(tf_policy, batch), rtol=1e-5)

    torch_stats, tf_stats = torch_policy.learn_on_batch(batch.copy()), tf_policy.learn_on_batch(batch.copy())
    np.testing.assert_allclose(torch_stats["policy_loss"], tf_stats["policy_loss"], rtol=1e-5)
    after_torch, after_tf = torch_policy.get_weights(), tf_policy.get_weights()
    for name in after_torch:
        np.testing.assert_allclose(after_torch[name], after_tf[name], rtol=1e-4, atol=1e-6, err_msg=name)
    # No critic: the value head never moves.
    start = _policy("torch", seed=3).get_weights()
    np.testing.assert_array_equal(after_torch["value_out/kernel"], start["value_out/kernel"])
    assert not np.allclose(after_torch["logits/kernel"], start["logits/kernel"])


def test_a_step_raises_the_likelihood_of_actions_with_positive_return(framework):
    policy = _policy(framework, lr=1e-2)
    batch = _batch(n=32, seed=1)
    batch[B.ADVANTAGES] = np.abs(batch[B.ADVANTAGES]) + 1.0  # every action was good
    spec = policy.model_spec()
    before = numpy_pg_loss(policy.get_weights(), spec, batch)
    policy.learn_on_batch(batch.copy())
    assert numpy_pg_loss(policy.get_weights(), spec, batch) < before


# ----- discounted returns -------------------------------------------------------------------

def _piece(rewards, terminated: bool, bootstrap_value: float = 0.0) -> SampleBatch:
    n = len(rewards)
    terminateds = np.zeros(n, dtype=bool)
    terminateds[-1] = terminated
    bootstrap = np.zeros(n, dtype=np.float32)
    bootstrap[-1] = bootstrap_value
    return SampleBatch({B.REWARDS: np.array(rewards, dtype=np.float32), B.TERMINATEDS: terminateds,
                        B.TRUNCATEDS: np.zeros(n, dtype=bool), B.BOOTSTRAP_VALUE: bootstrap})


def test_returns_by_hand():
    # gamma = 0.9, rewards [1, 0, 2, -1]:
    #   G_3 = -1
    #   G_2 = 2 + 0.9 * -1    = 1.1
    #   G_1 = 0 + 0.9 * 1.1   = 0.99
    #   G_0 = 1 + 0.9 * 0.99  = 1.891
    out = postprocess_returns(_piece([1.0, 0.0, 2.0, -1.0], terminated=True), {"gamma": 0.9})
    np.testing.assert_allclose(out[B.ADVANTAGES], [1.891, 0.99, 1.1, -1.0], rtol=1e-6)
    assert out[B.ADVANTAGES].dtype == np.float32
    assert B.VALUE_TARGETS not in out  # no critic, nothing to fit


def test_a_cut_piece_is_not_bootstrapped():
    # A piece cut at the fragment's end, whose (hypothetical) V(s_last) is 10: PG's
    # return stops at the cut, as 1.13's (the same numbers as a terminated piece).
    out = postprocess_returns(_piece([1.0, 1.0, 1.0], terminated=False, bootstrap_value=10.0), {"gamma": 0.5})
    # G_2 = 1; G_1 = 1 + 0.5 * 1 = 1.5; G_0 = 1 + 0.5 * 1.5 = 1.75
    np.testing.assert_allclose(out[B.ADVANTAGES], [1.75, 1.5, 1.0])


def test_gamma_one_sums_the_rest_of_the_piece():
    out = postprocess_returns(_piece([1.0, 2.0, 3.0], terminated=True), {"gamma": 1.0})
    np.testing.assert_allclose(out[B.ADVANTAGES], [6.0, 5.0, 3.0])


def test_1_13_post_process_advantages_reads_the_policys_gamma():
    class AnyPolicy:
        config = {"gamma": 0.9}

    out = post_process_advantages(AnyPolicy(), _piece([1.0, 0.0, 2.0, -1.0], terminated=True), None, None)
    np.testing.assert_allclose(out[B.ADVANTAGES], [1.891, 0.99, 1.1, -1.0], rtol=1e-6)


@pytest.mark.parametrize("rollout_inference", ["numpy", "framework"])
def test_workers_record_no_bootstrap_value_and_the_policy_returns(rollout_inference):
    # A remote worker (index 1) acting in numpy or through the torch policy: the pieces it
    # cuts every 30 steps carry no V(s) (the value head is there, untrained, and would
    # give non-zero values).
    pytest.importorskip("torch")
    config = _config(rollout_fragment_length=30, num_envs_per_worker=2, seed=0, rollout_inference=rollout_inference)
    worker = RolloutWorker("CartPole-v1", "rlstack.trainers.pg.pg_torch_policy:PGTorchPolicy", config,
                           worker_index=1, num_workers=1, postprocess_fn=postprocess_returns,
                           numpy_policy_class="rlstack.trainers.pg.pg_policy:PGNumpyPolicy")
    acting = worker.sampling_policy
    assert type(acting).__name__ == ("PGNumpyPolicy" if rollout_inference == "numpy" else "PGTorchPolicy")
    assert acting.compute_values(np.ones((1, 4), np.float32))[0] != 0.0
    batch = worker.sample()
    assert batch.count == 60
    np.testing.assert_array_equal(batch[B.BOOTSTRAP_VALUE], 0.0)
    # Each piece (rows of one episode of one sub-env) holds its own discounted returns.
    ends = np.flatnonzero(np.diff(batch[B.EPS_ID]) != 0) + 1
    for piece in np.split(np.arange(batch.count), ends):
        rewards = batch[B.REWARDS][piece].astype(np.float64)
        expected = [sum(0.99**k * r for k, r in enumerate(rewards[t:])) for t in range(len(rewards))]
        np.testing.assert_allclose(batch[B.ADVANTAGES][piece], expected, rtol=1e-5)
    worker.stop()


# ----- config ---------------------------------------------------------------------------------

def test_default_config_is_1_13s():
    assert DEFAULT_CONFIG["num_workers"] == 0 and DEFAULT_CONFIG["lr"] == 0.0004
    assert (DEFAULT_CONFIG["rollout_fragment_length"], DEFAULT_CONFIG["train_batch_size"],
            DEFAULT_CONFIG["batch_mode"]) == (200, 200, "truncate_episodes")
    assert PGTrainer._name == "PG" and PGTrainer.supports_multi_agent


def test_a_critic_key_is_unknown_to_pg():
    # PG has no value function: A2C's keys are typos here, with the closest valid keys named.
    with pytest.raises(ConfigError, match="'vf_loss_coeff'"):
        PGTrainer.merge_and_validate({"vf_loss_coeff": 0.5})


def test_exploration_other_than_sampling_is_refused():
    with pytest.raises(ConfigError, match="policy-gradient algorithms explore by sampling"):
        PGTrainer.merge_and_validate({"exploration_config": {"type": "EpsilonGreedy"}})


def test_recurrent_models_are_accepted_as_1_13_did():
    # (Training one: test_113_surfaces.test_pg_trains_an_lstm.)
    assert PGTrainer.merge_and_validate({"model": {"use_lstm": True}})["model"]["use_lstm"] is True
