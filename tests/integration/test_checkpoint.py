"""Checkpoints: restore gives the same actions and counters, holds no pickle, and
refuses what it cannot load."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from rlstack.errors import CheckpointError
from rlstack.trainers.ppo import PPOTrainer

SMALL = {"num_workers": 0, "train_batch_size": 400, "sgd_minibatch_size": 100, "num_sgd_iter": 2,
         "rollout_fragment_length": 200, "seed": 3, "observation_filter": "MeanStdFilter",
         "model": {"fcnet_hiddens": [16, 16]}}


def test_restore_same_actions_and_counters(framework, tmp_path):
    config = {**SMALL, "framework": framework}
    trainer = PPOTrainer(config, "CartPole-v1")
    trainer.train()
    result = trainer.train()
    path = trainer.save(str(tmp_path / "ckpt"))
    observations = np.random.default_rng(0).uniform(-0.5, 0.5, (100, 4)).astype(np.float32)
    expected = [trainer.compute_action(obs, explore=False) for obs in observations]
    filter_state = trainer.workers.local_worker().filter.get_state()
    saved_state = trainer.get_policy().get_state()

    restored = PPOTrainer(config, "CartPole-v1")
    restored.restore(path)
    assert [restored.compute_action(obs, explore=False) for obs in observations] == expected
    np.testing.assert_array_equal(restored.workers.local_worker().filter.get_state()["mean"], filter_state["mean"])
    assert restored.iteration == 2
    restored_state = restored.get_policy().get_state()
    assert restored_state.keys() == saved_state.keys()
    for key in saved_state:  # weights, Adam moments and step, kl_coeff, minibatch RNG
        np.testing.assert_array_equal(restored_state[key], saved_state[key], err_msg=key)
    assert any(key.startswith("optimizer/") for key in saved_state)
    assert float(saved_state["kl_coeff"]) != 0.2  # adapted during training, and carried over
    next_result = restored.train()
    assert next_result["training_iteration"] == 3
    assert next_result["timesteps_total"] == result["timesteps_total"] + next_result["timesteps_this_iter"]
    trainer.stop()
    restored.stop()


def test_checkpoint_is_plain_data(tmp_path):
    trainer = PPOTrainer(SMALL, "CartPole-v1")
    trainer.train()
    path = Path(trainer.save(str(tmp_path / "ckpt")))
    trainer.stop()
    names = sorted(os.listdir(path))
    assert names == ["filters.npz", "policy_state.npz", "rlstack_checkpoint.json"]
    metadata = json.loads((path / "rlstack_checkpoint.json").read_text())
    assert metadata["algorithm"] == "PPO" and metadata["framework"] == "torch" and metadata["iteration"] == 1
    assert metadata["counters"]["num_env_steps_sampled"] >= 400
    for name in ("filters.npz", "policy_state.npz"):
        with np.load(path / name, allow_pickle=False) as data:  # would raise on object arrays
            assert all(data[key].dtype != object for key in data.files)
    # No temporary directories are left beside the checkpoint.
    assert sorted(os.listdir(tmp_path)) == ["ckpt"]


def test_save_without_dir_goes_to_logdir():
    trainer = PPOTrainer(SMALL, "CartPole-v1")
    trainer.train()
    path = trainer.save()
    trainer.stop()
    assert isinstance(path, str) and path.endswith("checkpoint_000001")
    assert Path(path).parent == Path(trainer.logdir)


def test_incomplete_or_edited_checkpoint_is_refused(tmp_path):
    trainer = PPOTrainer(SMALL, "CartPole-v1")
    trainer.train()
    path = Path(trainer.save(str(tmp_path / "ckpt")))
    with open(path / "policy_state.npz", "r+b") as f:
        f.seek(100)
        f.write(b"\x00garbage")
    with pytest.raises(CheckpointError, match="SHA-256"):
        trainer.restore(str(path))
    (path / "rlstack_checkpoint.json").unlink()
    with pytest.raises(CheckpointError, match="not a complete rlstack checkpoint"):
        trainer.restore(str(path))
    with pytest.raises(CheckpointError, match="does not exist"):
        trainer.restore(str(tmp_path / "nowhere"))
    trainer.stop()


def test_checkpoint_of_other_framework_is_refused(tmp_path):
    pytest.importorskip("tensorflow")
    trainer = PPOTrainer(SMALL, "CartPole-v1")
    path = trainer.save(str(tmp_path / "ckpt"))
    trainer.stop()
    tf_trainer = PPOTrainer({**SMALL, "framework": "tf"}, "CartPole-v1")
    with pytest.raises(CheckpointError, match="holds a 'torch' policy.*framework='tf'"):
        tf_trainer.restore(path)
    tf_trainer.stop()


def test_weights_move_between_frameworks():
    pytest.importorskip("tensorflow")
    torch_trainer = PPOTrainer(SMALL, "CartPole-v1")
    torch_trainer.train()
    tf_trainer = PPOTrainer({**SMALL, "framework": "tf"}, "CartPole-v1")
    tf_trainer.set_weights(torch_trainer.get_weights())
    obs = np.array([0.02, -0.1, 0.03, 0.2], dtype=np.float32)
    # Different filters would change the input; compare with the filter state copied too.
    tf_trainer.workers.local_worker().set_filter_state(torch_trainer.workers.local_worker().filter.get_state())
    _, _, torch_extras = torch_trainer.compute_single_action(obs, explore=False, full_fetch=True)
    _, _, tf_extras = tf_trainer.compute_single_action(obs, explore=False, full_fetch=True)
    np.testing.assert_allclose(tf_extras["action_dist_inputs"], torch_extras["action_dist_inputs"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(tf_extras["vf_preds"], torch_extras["vf_preds"], rtol=1e-5, atol=1e-6)
    torch_trainer.stop()
    tf_trainer.stop()


def test_pickled_tune_dict_checkpoint_is_never_loaded(tmp_path):
    import pickle

    directory = tmp_path / "tune_dict"
    directory.mkdir()
    with open(directory / "_dict_checkpoint.pkl", "wb") as f:
        pickle.dump({"a": 1}, f)
    trainer = PPOTrainer(SMALL, "CartPole-v1")
    with pytest.raises(CheckpointError, match="pickled Tune dict checkpoint"):
        trainer.restore(str(directory))
    trainer.stop()


def test_checkpoint_of_other_model_config_names_the_keys(tmp_path):
    trainer = PPOTrainer(SMALL, "CartPole-v1")
    path = trainer.save(str(tmp_path / "ckpt"))
    trainer.stop()
    other = PPOTrainer({**SMALL, "model": {"fcnet_hiddens": [32]}}, "CartPole-v1")
    with pytest.raises(CheckpointError, match=r"fcnet_hiddens: checkpoint \[16, 16\] vs trainer \[32\]"):
        other.restore(path)
    other.stop()


def test_restore_accepts_tune_checkpoint_objects(tmp_path):
    from ray import tune

    trainer = PPOTrainer(SMALL, "CartPole-v1")
    trainer.train()
    path = trainer.save(str(tmp_path / "ckpt"))
    restored = PPOTrainer(SMALL, "CartPole-v1")
    restored.restore(tune.Checkpoint.from_directory(path))
    assert restored.iteration == 1
    trainer.stop()
    restored.stop()

