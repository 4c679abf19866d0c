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


@pytest.fixture(params=["torch", "tf"])
def framework(request):
    pytest.importorskip("torch" if request.param == "torch" else "tensorflow")
    return request.param


def test_restore_same_actions_and_counters(framework, tmp_path):
    config = {**SMALL, "framework": framework}
    trainer = PPOTrainer(config, "CartPole-v1")
    trainer.train()
    result = trainer.train()
    path = trainer.save(str(tmp_path / "ckpt"))
    observations = np.random.default_rng(0).uniform(-0.5, 0.5, (100, 4)).astype(np.float32)
    expected = [trainer.compute_action(obs, explore=False) for obs in observations]
    filter_state = trainer.workers.local_worker().filter.get_state()

    restored = PPOTrainer(config, "CartPole-v1")
    restored.restore(path)
    assert [restored.compute_action(obs, explore=False) for obs in observations] == expected
    np.testing.assert_array_equal(restored.workers.local_worker().filter.get_state()["mean"], filter_state["mean"])
    assert restored.iteration == 2
    next_result = restored.train()
    assert next_result["training_iteration"] == 3
    assert next_result["timesteps_total"] == result["timesteps_total"] + next_result["timesteps_this_iter"]
    assert next_result["info"]["learner"]["default_policy"]["learner_stats"]["kl_coeff"] > 0
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
    assert tf_trainer.compute_action(obs, explore=False) == torch_trainer.compute_action(obs, explore=False)
    torch_trainer.stop()
    tf_trainer.stop()
