"""Trainers as Ray Tune trainables: sweeps, checkpoints, names, PBT resets, logs."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from ray import tune

import rlstack.analysis
from rlstack.env import register_env
from rlstack.trainers.ppo import PPOTrainer

SMALL = {"train_batch_size": 400, "sgd_minibatch_size": 100, "num_sgd_iter": 2, "rollout_fragment_length": 200,
         "model": {"fcnet_hiddens": [16]}}


def test_tuner_grid_search_checkpoints_and_best_checkpoint_restores(ray_local, tmp_path):
    tuner = tune.Tuner(
        PPOTrainer,
        param_space={**SMALL, "env": "CartPole-v1", "num_workers": 1, "framework": "torch",
                     "lr": tune.grid_search([1e-3, 3e-4])},
        run_config=tune.RunConfig(stop={"training_iteration": 2}, storage_path=str(tmp_path), name="sweep",
                                  checkpoint_config=tune.CheckpointConfig(checkpoint_at_end=True), verbose=0),
    )
    results = tuner.fit()
    assert len(results) == 2 and not results.errors
    assert sorted(r.config["lr"] for r in results) == [3e-4, 1e-3]
    for result in results:
        assert result.metrics["training_iteration"] == 2
        assert result.metrics["timesteps_total"] == 800
        files = sorted(os.listdir(result.checkpoint.path))
        assert "rlstack_checkpoint.json" in files and not any(f.endswith(".pkl") for f in files)
    best = results.get_best_result("episode_reward_mean", "max")
    trainer = PPOTrainer.from_checkpoint(best.checkpoint, config_overrides={"num_workers": 0})
    assert trainer.iteration == 2
    assert trainer.compute_action(np.zeros(4, np.float32), explore=False) in (0, 1)
    trainer.stop()


def test_registered_name_and_relative_paths_under_tune(ray_local, tmp_path):
    """tune.Tuner("PPO") finds the trainer; a registered env reaches the trial actor; a
    relative path in env_config resolves from where the run was started."""
    def creator(ctx):
        import gymnasium as gym

        assert os.path.exists(ctx["must_exist"]), f"{ctx['must_exist']} not found from {os.getcwd()}"
        return gym.make("CartPole-v1")

    register_env("cartpole_checked", creator)
    relative = os.path.relpath(__file__)
    tuner = tune.Tuner(
        "PPO",
        param_space={**SMALL, "env": "cartpole_checked", "num_workers": 0, "env_config": {"must_exist": relative}},
        run_config=tune.RunConfig(stop={"training_iteration": 1}, storage_path=str(tmp_path), name="named",
                                  verbose=0),
    )
    results = tuner.fit()
    assert not results.errors, results.errors
    assert results[0].metrics["timesteps_total"] == 400


def test_reset_config_gives_a_fresh_trial_with_the_new_hyperparameters():
    """What Tune relies on when it reuses an actor: after reset_config the trainer behaves
    like a new one built with the new config (weights, optimizer, counters)."""
    base = {**SMALL, "num_workers": 0, "seed": 3, "env": "CartPole-v1"}
    trainer = PPOTrainer({**base, "lr": 1e-3})
    trainer.train()
    assert trainer.reset({**base, "lr": 5e-4, "entropy_coeff": 0.01})  # Tune's entry point
    fresh = PPOTrainer({**base, "lr": 5e-4, "entropy_coeff": 0.01})
    for name, value in fresh.get_weights()["default_policy"].items():
        np.testing.assert_array_equal(trainer.get_weights()["default_policy"][name], value, err_msg=name)
    policy = trainer.get_policy()
    assert policy.optimizer.lr == pytest.approx(5e-4) and policy.entropy_coeff == pytest.approx(0.01)
    assert float(policy.get_state()["optimizer/0/step"]) == 0.0
    result = trainer.train()
    assert result["timesteps_total"] == 400 and result["training_iteration"] == 1
    # A change that needs new workers or a new model is refused; Tune then builds a new actor.
    assert not trainer.reset({**base, "model": {"fcnet_hiddens": [8]}})
    assert trainer.config["lr"] == 5e-4  # and the running config is untouched
    trainer.stop()
    fresh.stop()


def test_standalone_trainer_writes_logs_that_analysis_loads():
    trainer = PPOTrainer({**SMALL, "num_workers": 0}, "CartPole-v1")
    trainer.train()
    trainer.train()
    trainer.stop()
    logdir = Path(trainer.logdir)
    names = os.listdir(logdir)
    assert {"progress.csv", "result.json", "params.json"} <= set(names)
    assert any(name.startswith("events.out.tfevents") for name in names)
    assert len((logdir / "progress.csv").read_text().strip().splitlines()) == 3  # header + 2 rows
    frame = rlstack.analysis.load(logdir)
    assert list(frame["training_iteration"]) == [1, 2]
    assert list(frame["timesteps_total"]) == [400, 800]
    assert "info/learner/default_policy/learner_stats/total_loss" in frame.columns


def test_analysis_load_of_an_empty_directory_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="No result.json under"):
        rlstack.analysis.load(tmp_path)


def test_population_based_training_exploits_and_explores(ray_local, tmp_path):
    """PBT clones the better trial's checkpoint into the worse one and perturbs lr; with
    reuse_actors Tune calls reset_config, which rlstack applies in place."""
    from ray.tune.schedulers import PopulationBasedTraining

    pbt = PopulationBasedTraining(time_attr="training_iteration", perturbation_interval=1,
                                  hyperparam_mutations={"lr": [1e-2, 1e-3, 1e-4]}, quantile_fraction=0.5)
    tuner = tune.Tuner(
        PPOTrainer,
        param_space={**SMALL, "env": "CartPole-v1", "num_workers": 0, "lr": tune.grid_search([1e-2, 1e-4])},
        tune_config=tune.TuneConfig(scheduler=pbt, metric="episode_reward_mean", mode="max", reuse_actors=True),
        run_config=tune.RunConfig(stop={"training_iteration": 4}, storage_path=str(tmp_path), name="pbt",
                                  checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=1), verbose=0),
    )
    results = tuner.fit()
    assert not results.errors, results.errors
    assert all(r.metrics["training_iteration"] == 4 for r in results)
    # Exploitation restores a checkpoint of the other trial: the counters carry on, so
    # every trial ends with 4 iterations' worth of steps.
    assert [r.metrics["timesteps_total"] for r in results] == [1600, 1600]


def test_legacy_tune_run_entry_point(ray_local, tmp_path):
    analysis = tune.run(PPOTrainer, config={**SMALL, "env": "CartPole-v1", "num_workers": 0},
                        stop={"training_iteration": 1}, storage_path=str(tmp_path), verbose=0)
    assert analysis.trials[0].last_result["timesteps_total"] == 400


def test_experiment_restore_starts_trials_from_a_checkpoint(ray_local, tmp_path):
    from rlstack.experiments import run_experiments

    trainer = PPOTrainer({**SMALL, "num_workers": 0}, "CartPole-v1")
    trainer.train()
    checkpoint = trainer.save(str(tmp_path / "start"))
    trainer.stop()
    rows = run_experiments({"resumed": {"run": "PPO", "env": "CartPole-v1", "restore": checkpoint,
                                        "stop": {"training_iteration": 2},
                                        "config": {**SMALL, "num_workers": 0}}},
                           verbose=0, storage_path=str(tmp_path / "results"))
    assert len(rows) == 1 and rows[0]["status"] == "TERMINATED"
    # One iteration restored from the checkpoint, one trained in the trial.
    assert rows[0]["iterations"] == 2 and rows[0]["timesteps"] == 800


def test_tensorboard_events_hold_every_scalar():
    tf = pytest.importorskip("tensorflow")
    trainer = PPOTrainer({**SMALL, "num_workers": 0}, "CartPole-v1")
    trainer.train()
    trainer.train()
    trainer.stop()
    (events,) = Path(trainer.logdir).glob("events.out.tfevents*")
    scalars = {}
    for event in tf.compat.v1.train.summary_iterator(str(events)):
        for value in event.summary.value:
            scalars.setdefault(value.tag, []).append((event.step, value.simple_value))
    assert [step for step, _ in scalars["ray/tune/timesteps_total"]] == [400, 800]
    assert "ray/tune/info/learner/default_policy/learner_stats/total_loss" in scalars
    assert len(scalars["ray/tune/episode_reward_mean"]) == 2
