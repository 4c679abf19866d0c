"""IMPALA, A2C and A3C end to end, in torch and TF, on tiny budgets.

* IMPALA with remote workers sampling asynchronously (a learner thread, V-trace) and in
  the driver (``num_workers=0``): counters, its result keys (learner queue, policy lag,
  throughputs, weight broadcasts), checkpoint restore, stop;
* A2C in the driver and with workers: one gradient step per train batch;
* A3C: workers' gradients applied by the driver;
* ``tune.Tuner("IMPALA")``, and the config errors a user meets first.
"""

from __future__ import annotations

import numpy as np
import pytest
from ray import tune

from rlstack.errors import ConfigError
from rlstack.trainers.a3c import A2CTrainer, A3CTrainer
from rlstack.trainers.impala import IMPALATrainer

SMALL_MODEL = {"fcnet_hiddens": [16]}
OBSERVATIONS = np.random.default_rng(0).uniform(-0.5, 0.5, (50, 4)).astype(np.float32)

IMPALA_TINY = {
    "num_workers": 2,
    "num_cpus_per_worker": 0.5,
    "num_envs_per_worker": 2,
    "rollout_fragment_length": 10,
    "train_batch_size": 40,
    "min_time_s_per_reporting": 0,
    "min_sample_timesteps_per_reporting": 400,
    "seed": 0,
    "model": SMALL_MODEL,
}


def test_impala_with_workers(ray_local, framework, tmp_path):
    trainer = IMPALATrainer({**IMPALA_TINY, "framework": framework}, "CartPole-v1")
    results = [trainer.train() for _ in range(3)]
    last = results[-1]
    assert [r["timesteps_total"] for r in results] == sorted(r["timesteps_total"] for r in results)
    assert last["timesteps_total"] >= 1200
    # Every sample is whole fragments: 2 envs x 10 steps.
    assert last["timesteps_total"] % 20 == 0
    assert last["num_env_steps_trained"] > 0
    assert last["num_env_steps_trained"] <= last["timesteps_total"]
    assert last["num_weight_broadcasts"] > 0
    assert last["sample_throughput"] > 0
    assert set(last["learner_queue"]) == {"size_mean", "size_max", "capacity"}
    assert last["policy_lag"]["mean"] >= 0
    stats = last["info"]["learner"]["default_policy"]["learner_stats"]
    for key in ("total_loss", "policy_loss", "vf_loss", "entropy", "mean_rho", "cur_lr", "grad_gnorm"):
        assert np.isfinite(stats[key]), key
    assert last["timers"]["learn_time_ms"] > 0

    path = trainer.save(str(tmp_path / "ckpt"))
    expected = [trainer.compute_single_action(obs, explore=False) for obs in OBSERVATIONS]
    trainer.stop()
    assert not trainer.learner.is_alive()
    restored = IMPALATrainer({**IMPALA_TINY, "framework": framework}, "CartPole-v1")
    restored.restore(path)
    assert [restored.compute_single_action(obs, explore=False) for obs in OBSERVATIONS] == expected
    assert restored.train()["timesteps_total"] > last["timesteps_total"]
    restored.stop()


def test_impala_in_the_driver(framework):
    config = {**IMPALA_TINY, "num_workers": 0, "framework": framework, "min_sample_timesteps_per_reporting": 0}
    trainer = IMPALATrainer(config, "CartPole-v1")
    first, second = trainer.train(), trainer.train()
    assert first["timesteps_total"] == 40 and second["timesteps_total"] == 80
    assert second["num_env_steps_trained"] == 80
    assert second["policy_lag"]["mean"] == 0
    trainer.stop()


def test_impala_learns_from_rmsprop_too():
    trainer = IMPALATrainer({**IMPALA_TINY, "num_workers": 0, "opt_type": "rmsprop",
                             "min_sample_timesteps_per_reporting": 0}, "CartPole-v1")
    before = trainer.get_policy().get_weights()["logits/kernel"].copy()
    trainer.train()
    assert not np.allclose(trainer.get_policy().get_weights()["logits/kernel"], before)
    assert any(key.endswith("mean_square") for key in trainer.get_policy().get_state())
    trainer.stop()


@pytest.mark.parametrize(("num_workers", "microbatch_size"), [(0, None), (2, None), (0, 40)])
def test_a2c_one_step_per_batch(ray_local, framework, num_workers, microbatch_size):
    # With microbatch_size the step's gradient is summed over microbatches first.
    config = {"num_workers": num_workers, "num_cpus_per_worker": 0.5, "framework": framework, "seed": 0,
              "min_time_s_per_reporting": 0, "train_batch_size": 100, "rollout_fragment_length": 25,
              "model": SMALL_MODEL, "microbatch_size": microbatch_size}
    trainer = A2CTrainer(config, "CartPole-v1")
    policy = trainer.get_policy()
    before = policy.get_weights()
    result = trainer.train()
    assert result["timesteps_total"] >= 100
    assert result["num_env_steps_trained"] == result["timesteps_total"]
    stats = result["info"]["learner"]["default_policy"]["learner_stats"]
    assert np.isfinite(stats["total_loss"]) and stats["grad_gnorm"] > 0
    after = policy.get_weights()
    assert any(not np.allclose(before[k], after[k]) for k in before)
    trainer.stop()


def test_a3c_applies_workers_gradients(ray_local, framework):
    config = {"num_workers": 2, "num_cpus_per_worker": 0.5, "framework": framework, "seed": 0,
              "min_time_s_per_reporting": 0, "min_sample_timesteps_per_reporting": 100, "model": SMALL_MODEL}
    trainer = A3CTrainer(config, "CartPole-v1")
    before = trainer.get_policy().get_weights()
    result = trainer.train()
    # Each update is one worker's 10-step fragment.
    assert result["timesteps_total"] >= 100
    assert result["num_gradient_updates"] == result["timesteps_total"] // 10
    after = trainer.get_policy().get_weights()
    assert any(not np.allclose(before[k], after[k]) for k in before)
    trainer.stop()


def test_tuner_runs_impala_by_name(ray_local, tmp_path):
    tuner = tune.Tuner(
        "IMPALA",
        param_space={**IMPALA_TINY, "num_workers": 1, "env": "CartPole-v1", "framework": "torch"},
        run_config=tune.RunConfig(stop={"training_iteration": 1}, storage_path=str(tmp_path), name="impala_by_name",
                                  verbose=0),
    )
    results = tuner.fit()
    assert not results.errors, results.errors
    assert results[0].metrics["timesteps_total"] >= 400


@pytest.mark.parametrize(("trainer_class", "config", "key"), [
    (IMPALATrainer, {"vtrace": False}, "vtrace"),
    (IMPALATrainer, {"opt_type": "sgd"}, "opt_type"),
    (IMPALATrainer, {"rollout_fragment_length": 1}, "rollout_fragment_length"),
    (A3CTrainer, {"num_workers": 0}, "num_workers"),
    (A2CTrainer, {"microbatch_size": 0}, "microbatch_size"),
    (A2CTrainer, {"lambda": 2.0}, "lambda"),
])
def test_config_errors_name_the_key(trainer_class, config, key):
    with pytest.raises(ConfigError, match=key):
        trainer_class.merge_and_validate(config)
