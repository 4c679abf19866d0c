"""Reliability: a save killed half-way leaves the previous checkpoint loadable; truncated,
edited and foreign checkpoints are refused with a message that says which; a Tune trial
whose trainer crashes resumes from its last checkpoint and ends with the planned counters.

tests/integration/test_checkpoint.py covers the happy path (same actions and counters
after restore, plain data, the torch/TF refusal by a real TF trainer); this file covers
what goes wrong.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from rlstack.errors import CheckpointError
from rlstack.trainers.common import checkpoint_files as ckpt
from rlstack.trainers.ppo import PPOTrainer

SMALL = {"num_workers": 0, "train_batch_size": 200, "sgd_minibatch_size": 100, "num_sgd_iter": 1,
         "rollout_fragment_length": 200, "seed": 3, "observation_filter": "MeanStdFilter",
         "model": {"fcnet_hiddens": [16]}}
OBSERVATIONS = np.random.default_rng(0).uniform(-0.5, 0.5, (20, 4)).astype(np.float32)


def _greedy_actions(trainer) -> list[int]:
    return [int(trainer.compute_single_action(obs, explore=False)) for obs in OBSERVATIONS]


# ----- a save killed half-way -------------------------------------------------------------

# Trains, saves checkpoint 1 and records its greedy actions, trains on, then saves again
# with a hook that SIGKILLs the process in the middle of that save.
KILLED_SAVE = textwrap.dedent("""
    import json, os, signal, sys
    import numpy as np
    from rlstack.trainers.common import checkpoint_files as ckpt
    from rlstack.trainers.ppo import PPOTrainer

    first, second, actions_file, kill_at, config = sys.argv[1:6]
    trainer = PPOTrainer(json.loads(config), "CartPole-v1")
    trainer.train()
    trainer.save(first)
    observations = np.random.default_rng(0).uniform(-0.5, 0.5, (20, 4)).astype(np.float32)
    with open(actions_file, "w") as f:
        json.dump([int(trainer.compute_single_action(o, explore=False)) for o in observations], f)
    trainer.train()  # the second save holds other weights

    def die():
        os.kill(os.getpid(), signal.SIGKILL)

    if kill_at == "mid_write":
        # One array file is complete on disk; the next file and the manifest never come.
        real_savez = np.savez
        def savez_then_die(*args, **kwargs):
            real_savez(*args, **kwargs)
            die()
        ckpt.np.savez = savez_then_die
    elif kill_at == "between_renames":
        # A filesystem without an atomic directory exchange: the old checkpoint is
        # renamed aside, and the process dies before the new one is renamed in.
        ckpt._exchange = lambda a, b: False
        real_rename = os.rename
        def rename_then_die(src, dst):
            real_rename(src, dst)
            die()
        ckpt.os.rename = rename_then_die
    trainer.save(second)
    sys.exit(3)  # not reached
""")


@pytest.mark.parametrize(
    ("kill_at", "second_name"),
    [("mid_write", "ckpt"), ("mid_write", "ckpt_2"), ("between_renames", "ckpt")],
    ids=["mid-write-replacing", "mid-write-new-name", "between-renames-no-exchange"],
)
def test_save_killed_midway_leaves_previous_checkpoint_loadable(tmp_path, kill_at, second_name):
    root = tmp_path / "checkpoints"
    first, second = root / "ckpt", root / second_name
    script, actions_file = tmp_path / "killed_save.py", tmp_path / "actions.json"
    script.write_text(KILLED_SAVE)
    proc = subprocess.run([sys.executable, str(script), str(first), str(second), str(actions_file), kill_at,
                           json.dumps(SMALL)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    expected_actions = json.loads(actions_file.read_text())

    visible = sorted(p.name for p in root.iterdir() if not p.name.startswith("."))
    leftovers = sorted(p for p in root.iterdir() if p.name.startswith("."))
    restored = PPOTrainer(SMALL, "CartPole-v1")
    if kill_at == "mid_write":
        # Nothing under a final name but checkpoint 1 (not even an empty ckpt_2), and
        # checkpoint 1 is the complete, unchanged first save.
        assert visible == ["ckpt"]
        # The half-written save is a hidden temporary sibling, without a manifest.
        assert [p.name.split("-")[0] for p in leftovers] == [f".{second_name}.tmp"]
        assert not (leftovers[0] / ckpt.METADATA_FILE).exists()
        assert os.listdir(leftovers[0]) == ["policy_state.npz"]  # the first file written
        restored.restore(str(first))
        assert restored.iteration == 1
        assert _greedy_actions(restored) == expected_actions
    else:
        # Without an atomic exchange there is a window with no directory under the final
        # name; the error says where the previous checkpoint is, and it loads from there.
        assert visible == []
        with pytest.raises(CheckpointError, match="a save that was replacing it was interrupted") as info:
            restored.restore(str(first))
        backup = Path(str(info.value).split("intact at '")[1].split("'")[0])
        assert backup.parent.name.startswith(".ckpt.old-") and backup.name == "ckpt"
        restored.restore(str(backup))
        assert restored.iteration == 1
        assert _greedy_actions(restored) == expected_actions
        shutil.move(str(backup), str(first))  # what the message tells the user to do
        restored.restore(str(first))

    # The next save into the directory removes what the dead writer left behind.
    assert restored.save(str(second)) == str(second)
    assert sorted(p.name for p in root.iterdir()) == sorted({"ckpt", second_name})
    restored.stop()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="renameat2 is Linux's")
def test_replacing_a_checkpoint_is_one_atomic_exchange(tmp_path, monkeypatch):
    exchanges = []
    real_exchange = ckpt._exchange
    monkeypatch.setattr(ckpt, "_exchange", lambda a, b: exchanges.append(real_exchange(a, b)) or exchanges[-1])
    trainer = PPOTrainer(SMALL, "CartPole-v1")
    path = trainer.save(str(tmp_path / "ckpt"))
    trainer.train()
    assert trainer.save(path) == path
    assert exchanges == [True]  # no window without a checkpoint under the final name
    assert _manifest(Path(path))["iteration"] == 1
    assert os.listdir(tmp_path) == ["ckpt"]  # the swapped-out checkpoint is deleted
    trainer.stop()


def test_save_never_replaces_a_directory_that_is_not_a_checkpoint(tmp_path):
    # A folder holding other files gets the checkpoint in a new subfolder (1.13's layout).
    precious = tmp_path / "experiments"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep me")
    trainer = PPOTrainer(SMALL, "CartPole-v1")
    path = trainer.save(str(precious))
    assert path == str(precious / "checkpoint_000000")
    assert (precious / "notes.txt").read_text() == "keep me"
    assert sorted(os.listdir(precious)) == ["checkpoint_000000", "notes.txt"]
    # and save_atomic itself still refuses to replace a folder that is not a checkpoint.
    with pytest.raises(CheckpointError, match="exists and is not an rlstack checkpoint.*Pass a new path"):
        ckpt.save_atomic(precious, trainer.save_checkpoint)
    assert (precious / "notes.txt").read_text() == "keep me"
    trainer.stop()


# ----- corrupt, edited and foreign checkpoints --------------------------------------------

@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """One trained PPO trainer and a pristine checkpoint of it; tests corrupt copies."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RLSTACK_RESULTS_DIR", str(tmp_path_factory.mktemp("results")))
        trainer = PPOTrainer(SMALL, "CartPole-v1")
        trainer.train()
        path = Path(trainer.save(str(tmp_path_factory.mktemp("pristine") / "ckpt")))
        yield trainer, path
        trainer.stop()


@pytest.fixture
def copy_of(saved, tmp_path):
    trainer, pristine = saved
    path = tmp_path / "ckpt"
    shutil.copytree(pristine, path)
    return trainer, path


def _manifest(path: Path) -> dict:
    return json.loads((path / ckpt.METADATA_FILE).read_text())


def _write_manifest(path: Path, metadata: dict, rehash: bool = True) -> None:
    # rehash: forge a self-consistent manifest, as a newer or foreign writer would.
    if rehash:
        metadata[ckpt.METADATA_HASH_KEY] = ckpt._metadata_hash(metadata)
    (path / ckpt.METADATA_FILE).write_text(json.dumps(metadata))


def test_manifest_records_versions_sizes_and_hashes(saved):
    import ray
    import torch

    import rlstack

    _, path = saved
    metadata = _manifest(path)
    assert metadata["format_version"] == ckpt.FORMAT_VERSION
    assert metadata["rlstack_version"] == rlstack.__version__ and metadata["ray_version"] == ray.__version__
    assert metadata["framework"] == "torch" and metadata["framework_version"] == torch.__version__
    assert set(metadata["files"]) == set(metadata["file_sizes"]) == {"policy_state.npz", "filters.npz"}
    for name, size in metadata["file_sizes"].items():
        assert (path / name).stat().st_size == size
    assert metadata[ckpt.METADATA_HASH_KEY] == ckpt._metadata_hash(metadata)


def test_truncated_array_file_is_named_as_truncated(copy_of):
    trainer, path = copy_of
    size = (path / "policy_state.npz").stat().st_size
    with open(path / "policy_state.npz", "r+b") as f:
        f.truncate(size // 2)
    with pytest.raises(CheckpointError, match=rf"policy_state.npz is {size // 2} bytes but the manifest records "
                                              rf"{size}: the file is truncated"):
        trainer.restore(str(path))


def test_flipped_bit_in_an_array_file_is_caught_by_its_hash(copy_of):
    trainer, path = copy_of
    data = bytearray((path / "filters.npz").read_bytes())
    data[len(data) // 2] ^= 0x01  # same size: only the hash can tell
    (path / "filters.npz").write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"filters.npz does not match its recorded SHA-256"):
        trainer.restore(str(path))


def test_edited_manifest_is_refused(copy_of):
    trainer, path = copy_of
    metadata = _manifest(path)
    metadata["counters"]["num_env_steps_sampled"] = 10**6  # hand-edited, hash left alone
    _write_manifest(path, metadata, rehash=False)
    with pytest.raises(CheckpointError, match="was edited after it was written.*config_overrides"):
        trainer.restore(str(path))


def test_truncated_manifest_is_refused(copy_of):
    trainer, path = copy_of
    text = (path / ckpt.METADATA_FILE).read_text()
    (path / ckpt.METADATA_FILE).write_text(text[: len(text) // 2])
    with pytest.raises(CheckpointError, match="is not valid JSON.*the checkpoint is corrupt"):
        trainer.restore(str(path))


def test_missing_array_file_is_named(copy_of):
    trainer, path = copy_of
    (path / "filters.npz").unlink()
    with pytest.raises(CheckpointError, match="is missing filters.npz, which its manifest lists"):
        trainer.restore(str(path))


def test_manifest_pointing_outside_the_checkpoint_is_refused(copy_of):
    trainer, path = copy_of
    metadata = _manifest(path)
    metadata["files"]["../../elsewhere.npz"] = "0" * 64
    _write_manifest(path, metadata)
    with pytest.raises(CheckpointError, match=r"lists '../../elsewhere.npz', which is not a .npz file inside"):
        trainer.restore(str(path))


def test_object_arrays_are_never_unpickled_even_with_a_consistent_manifest(copy_of):
    trainer, path = copy_of
    np.savez(path / "filters.npz", evil=np.array([{"a": 1}], dtype=object))  # would need pickle to load
    metadata = _manifest(path)
    metadata["files"]["filters.npz"] = ckpt._sha256(path / "filters.npz")
    metadata["file_sizes"]["filters.npz"] = (path / "filters.npz").stat().st_size
    _write_manifest(path, metadata)
    with pytest.raises(CheckpointError, match="cannot be read as plain numpy arrays"):
        trainer.restore(str(path))


def test_newer_format_version_asks_for_an_upgrade(copy_of):
    trainer, path = copy_of
    metadata = _manifest(path)
    metadata["format_version"], metadata["rlstack_version"] = ckpt.FORMAT_VERSION + 1, "9.0.0"
    _write_manifest(path, metadata)
    with pytest.raises(CheckpointError, match=rf"format version {ckpt.FORMAT_VERSION + 1}, written by rlstack "
                                              r"9.0.0.*Upgrade rlstack"):
        trainer.restore(str(path))


def test_other_framework_version_loads_with_a_warning(copy_of, caplog):
    trainer, path = copy_of
    metadata = _manifest(path)
    metadata["framework_version"] = "1.0.0"
    _write_manifest(path, metadata)
    with caplog.at_level("WARNING", logger="rlstack.trainers.common.checkpoint_files"):
        trainer.restore(str(path))
    assert "was written with torch 1.0.0; this process runs torch" in caplog.text


def test_checkpoint_of_another_framework_names_both(copy_of):
    # test_checkpoint.py restores a real torch checkpoint into a TF trainer; this one
    # needs no TensorFlow: the manifest of a TF checkpoint, checked by a torch trainer.
    trainer, path = copy_of
    metadata = _manifest(path)
    metadata["framework"] = "tf"
    _write_manifest(path, metadata)
    with pytest.raises(CheckpointError, match=r"holds a 'tf' policy but this trainer uses framework='torch'; "
                                              r"set config\['framework'\] = 'tf'"):
        trainer.restore(str(path))


def test_checkpoint_of_another_algorithm_names_both(saved, tmp_path):
    from rlstack.trainers.dqn import DQNTrainer

    dqn = DQNTrainer({"num_workers": 0, "model": {"fcnet_hiddens": [16]}, "learning_starts": 0}, "CartPole-v1")
    path = dqn.save(str(tmp_path / "dqn_ckpt"))
    dqn.stop()
    trainer, _ = saved
    with pytest.raises(CheckpointError, match=r"written by 'DQN', not 'PPO'; restore it with the DQN trainer: "
                                              r"rlstack.get_trainer_class\('DQN'\).from_checkpoint\(path\)"):
        trainer.restore(path)
    with pytest.raises(CheckpointError, match="written by 'DQN'.*not PPO's"):
        PPOTrainer.from_checkpoint(path)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: None, r"holds nothing\. Pass the path a trainer's save\(\) returned"),
        (lambda d: (d / "model.pt").write_bytes(b"\x80\x04"), r"the directory holds model.pt\. Pass the path"),
        (lambda d: [(d / "rllib_checkpoint.json").write_text("{}"), (d / "algorithm_state.pkl").write_bytes(b"")],
         "it is a Ray RLlib checkpoint, which rlstack does not load"),
        (lambda d: [(d / "checkpoint-10").write_bytes(b"\x80\x04"),
                    (d / "checkpoint-10.tune_metadata").write_bytes(b"")],
         r"it is an RLlib 1.x checkpoint .* Retrain with rlstack, or move the weights yourself"),
        (lambda d: np.savez(d / "policy_state.npz", w=np.zeros(2)),
         "the save was interrupted before the manifest was written"),
    ],
    ids=["empty", "other-files", "rllib", "rllib-1.x", "no-manifest"],
)
def test_foreign_directory_says_what_it_holds(saved, tmp_path, make, message):
    trainer, _ = saved
    directory = tmp_path / "foreign"
    directory.mkdir()
    make(directory)
    with pytest.raises(CheckpointError, match=message):
        trainer.restore(str(directory))


def test_directory_of_checkpoints_points_at_one(saved, tmp_path):
    trainer, pristine = saved
    for name in ("checkpoint_000001", "checkpoint_000002"):
        shutil.copytree(pristine, tmp_path / "trial" / name)
    with pytest.raises(CheckpointError, match=r"holds checkpoints \(checkpoint_000001, checkpoint_000002\); pass "
                                              r"one of them, e\.g\. '.*checkpoint_000002'"):
        trainer.restore(str(tmp_path / "trial"))


def test_a_file_instead_of_the_directory_is_explained(saved):
    trainer, pristine = saved
    with pytest.raises(CheckpointError, match="is a file, not a checkpoint directory; pass the directory"):
        trainer.restore(str(pristine / ckpt.METADATA_FILE))


# ----- Tune: a crashed trial resumes from its last checkpoint ---------------------------------

def test_tune_trial_that_crashes_once_resumes_and_ends_with_planned_counters(ray_local, tmp_path):
    from ray import tune

    from rlstack.env import register_env

    batch, iterations = 200, 4
    crash_flag = tmp_path / "crashed_once"
    crash_at_step = 2 * batch + 50  # in iteration 3, after the checkpoint of iteration 2

    def creator(ctx):
        import gymnasium as gym

        class CrashOnce(gym.Wrapper):
            """Raises on one env step, once: the flag file outlives the trial's actor."""

            def __init__(self, env):
                super().__init__(env)
                self.steps = 0

            def step(self, action):
                self.steps += 1
                if ctx["crash"] and self.steps == crash_at_step and not crash_flag.exists():
                    crash_flag.write_text(str(os.getpid()))
                    raise RuntimeError("injected env crash")
                return self.env.step(action)

        return CrashOnce(gym.make("CartPole-v1"))

    register_env("cartpole_crash_once", creator)
    # "PPO" is rlstack's trainer for Tune once rlstack is imported (rlstack/trainers/common/registry.py).
    tuner = tune.Tuner(
        "PPO",
        param_space={**SMALL, "train_batch_size": batch, "rollout_fragment_length": batch, "seed": 1,
                     "env": "cartpole_crash_once", "env_config": {"crash": tune.grid_search([True, False])}},
        run_config=tune.RunConfig(
            stop={"training_iteration": iterations}, storage_path=str(tmp_path), name="crash", verbose=0,
            failure_config=tune.FailureConfig(max_failures=1),
            checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=1)),
    )
    results = tuner.fit()
    assert not results.errors, results.errors
    assert crash_flag.exists()
    by_crash = {result.config["env_config"]["crash"]: result for result in results}
    crashed, clean = by_crash[True], by_crash[False]

    # Both trials end at the planned iteration with the counters of an uninterrupted run.
    for result in (crashed, clean):
        assert result.metrics["training_iteration"] == iterations
        for key in ("timesteps_total", "num_env_steps_sampled", "num_env_steps_trained"):
            assert result.metrics[key] == iterations * batch, key
        assert (Path(result.checkpoint.path) / ckpt.METADATA_FILE).exists()  # an rlstack checkpoint
    # The crashed trial failed once (Tune's error file) and went on from the checkpoint of
    # iteration 2, not from scratch: iterations 3 and 4 are its only ones since the restore.
    errors = (Path(crashed.path) / "error.txt").read_text()
    assert errors.count("Failure # ") == 1 and "injected env crash" in errors
    assert crashed.metrics["iterations_since_restore"] == 2
    # The rows logged since the restore continue the checkpoint's counters. (Rows 1 and 2
    # are there as far as Tune's periodic sync of its driver's log files had got before the
    # crash: on a restore, Ray 2.60's loggers copy the synced progress.csv / result.json
    # over their local files (Logger._restore_from_remote), an older copy when the sync
    # had not caught up, so none, row 1 or both survive by Tune's timing, not rlstack's.)
    frame = crashed.metrics_dataframe
    logged = list(zip(frame["training_iteration"], frame["timesteps_total"]))
    planned = [(i, i * batch) for i in range(1, iterations + 1)]
    assert logged in [planned[:synced] + planned[2:] for synced in range(3)], logged
    assert not (Path(clean.path) / "error.txt").exists()
    assert clean.metrics["iterations_since_restore"] == iterations
