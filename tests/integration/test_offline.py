"""Experience out and in through trainers: rollout workers (remote ones too) write what
they sample (``output``, ``"logdir"``), trainers learn from those files with remote
readers, through Ray Data (``input: "dataset"``) or mixed with their own sampling, report
off-policy estimates, and a MARWIL checkpoint restores the same actions."""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest

from rlstack.offline import JsonReader
from rlstack.trainers.marwil import BCTrainer, MARWILTrainer
from rlstack.trainers.ppo import PPOTrainer

PPO_SMALL = {"train_batch_size": 400, "sgd_minibatch_size": 100, "num_sgd_iter": 2, "rollout_fragment_length": 200,
             "seed": 0, "framework": "torch"}
ESTIMATORS = {"is": {"type": "is"}, "wis": {"type": "wis"}}
# The detached actors Ray Data starts on first use (its stats and its autoscaling
# coordinator): left in the session's Ray they keep ~2% of a core each busy to its end.
RAY_DATA_ACTORS = (("datasets_stats_actor", "_dataset_stats_actor"), ("AutoscalingCoordinator", "AutoscalingCoordinator"))


@pytest.fixture(scope="module", autouse=True)
def _ray_data_actors_stopped():
    yield
    import ray

    if not ray.is_initialized():
        return
    for name, namespace in RAY_DATA_ACTORS:
        try:
            ray.kill(ray.get_actor(name, namespace=namespace))
        except ValueError:
            pass  # not started (no Ray Data test ran), or another Ray Data version's name


@pytest.fixture(scope="module")
def recorded(tmp_path_factory, ray_local):
    """800 PPO steps written by one remote rollout worker into the trial's log directory."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RLSTACK_RESULTS_DIR", str(tmp_path_factory.mktemp("results")))
        trainer = PPOTrainer({**PPO_SMALL, "num_workers": 1, "output": "logdir"}, "CartPole-v1")
        for _ in range(2):
            trainer.train()
        logdir = trainer.logdir
        trainer.stop()
    return logdir


def test_a_remote_worker_writes_every_sampled_step_into_the_logdir(recorded):
    files = glob.glob(os.path.join(recorded, "output-*_worker-1_0.json"))
    assert len(files) == 1
    batches = list(JsonReader(files).read_all_files())
    assert sum(batch.count for batch in batches) == 800
    for column in ("obs", "new_obs", "actions", "rewards", "terminateds", "truncateds", "dones", "eps_id",
                   "action_prob", "action_logp", "vf_preds"):
        assert column in batches[0], column


def test_remote_readers_learn_without_stepping_an_env_and_report_estimates(recorded, ray_local):
    trainer = BCTrainer({"input": recorded, "num_workers": 1, "train_batch_size": 400, "framework": "torch",
                         "off_policy_estimation_methods": ESTIMATORS, "seed": 0}, "CartPole-v1")
    result = trainer.train()
    trainer.stop()
    assert result["timesteps_total"] >= 400 and result["episodes_this_iter"] == 0
    assert np.isfinite(result["info"]["learner"]["default_policy"]["learner_stats"]["policy_loss"])
    assert set(result["off_policy_estimator"]) == {"is", "wis"}
    assert {"V_prev", "V_step_IS", "V_gain_est"} <= set(result["off_policy_estimator"]["is"])
    assert {"V_prev", "V_step_WIS", "V_gain_est"} <= set(result["off_policy_estimator"]["wis"])


def test_ray_data_streams_the_files(recorded, ray_local):
    trainer = MARWILTrainer({"input": "dataset", "input_config": {"format": "json", "path": recorded},
                             "train_batch_size": 400, "framework": "torch", "seed": 0}, "CartPole-v1")
    result = trainer.train()
    trainer.stop()
    assert result["timesteps_total"] >= 400 and result["episodes_this_iter"] == 0
    assert "vf_loss" in result["info"]["learner"]["default_policy"]["learner_stats"]


def test_a_mix_of_files_and_sampler_reads_both(recorded):
    trainer = MARWILTrainer({"input": {"sampler": 0.5, recorded: 0.5}, "train_batch_size": 2000,
                             "rollout_fragment_length": 200, "framework": "torch", "seed": 1}, "CartPole-v1")
    result = trainer.train()
    trainer.stop()
    # Some of the 2,000 steps came from the env (episodes ended there), the rest from files.
    assert result["timesteps_total"] >= 2000 and result["episodes_this_iter"] > 0


def test_a_marwil_checkpoint_restores_the_same_actions(recorded, tmp_path):
    config = {"input": recorded, "train_batch_size": 400, "framework": "torch", "seed": 0}
    trainer = MARWILTrainer(config, "CartPole-v1")
    trainer.train()
    path = trainer.save(str(tmp_path))
    obs = np.random.default_rng(0).uniform(-0.1, 0.1, (20, 4)).astype(np.float32)
    actions = [trainer.compute_single_action(o, explore=False) for o in obs]
    norm = trainer.get_policy().get_state()["moving_average_sqd_adv_norm"]
    trainer.stop()
    restored = MARWILTrainer(config, "CartPole-v1")
    restored.restore(path)
    assert [restored.compute_single_action(o, explore=False) for o in obs] == actions
    assert restored.get_policy().get_state()["moving_average_sqd_adv_norm"] == pytest.approx(norm)
    restored.stop()


def test_evaluation_plays_in_the_env_and_writes_nothing(recorded, tmp_path):
    out = tmp_path / "eval-out"
    trainer = BCTrainer({"input": recorded, "train_batch_size": 400, "framework": "torch", "output": str(out),
                         "evaluation_interval": 1, "evaluation_duration": 2, "seed": 0}, "CartPole-v1")
    result = trainer.train()
    trainer.stop()
    assert result["evaluation"]["episodes_this_iter"] == 2
    # The reading worker wrote what it read (1.13's output of an input); evaluation wrote nothing.
    rows = sum(batch.count for batch in JsonReader(str(out)).read_all_files())
    assert rows == result["timesteps_total"]


def test_the_113_saving_experiences_example_writes_what_bc_reads(tmp_path):
    # rlstack/examples/saving_experiences.py is 1.13's script after the renames.
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "rlstack.examples.saving_experiences"], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "TMPDIR": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    batches = list(JsonReader(str(tmp_path / "demo-out")).read_all_files())
    assert len(batches) == 100 and all(batch["dones"][-1] for batch in batches)
    assert {"t", "agent_index", "prev_actions", "prev_rewards", "infos", "action_prob"} <= set(batches[0])
    trainer = BCTrainer({"input": str(tmp_path / "demo-out"), "train_batch_size": 500, "framework": "torch",
                         "input_evaluation": ["is", "wis"]}, "CartPole-v1")
    result = trainer.train()
    trainer.stop()
    assert result["timesteps_total"] >= 500
    # The random recorder's probabilities were written as 1.0: V_prev is its discounted return.
    assert result["off_policy_estimator"]["is"]["V_prev"] > 0


def test_parquet_output_is_read_back_through_ray_data(tmp_path, ray_local):
    out = tmp_path / "parquet"
    trainer = PPOTrainer({**PPO_SMALL, "num_workers": 0, "output": str(out), "output_config": {"format": "parquet"}},
                         "CartPole-v1")
    trainer.train()
    trainer.stop()
    files = sorted(out.glob("output-*_worker-0_*.parquet"))
    assert len(files) == 2  # one file per sampled batch
    import pandas as pd

    frame = pd.read_parquet(files[0])
    assert len(frame) == 200 and len(frame["obs"].iloc[0]) == 4
    reader_config = {"input": "dataset", "input_config": {"format": "parquet", "path": str(out)},
                     "train_batch_size": 400, "framework": "torch", "seed": 0}
    bc = BCTrainer(reader_config, "CartPole-v1")
    batch = bc.workers.local_worker().input_reader.next()
    assert batch["obs"].shape == (200, 4) and batch["obs"].dtype == np.float32
    assert bc.train()["timesteps_total"] >= 400
    bc.stop()
