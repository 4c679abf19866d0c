"""Atari: the standard preprocessing and one iteration of tune_configs/pong-impala.yaml on CPU.

Skipped where the ALE (ale-py) is not installed; `make test` installs it (the `atari` extra).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rlstack.env.env_context import EnvContext
from rlstack.env.registry import make_env
from rlstack.errors import ConfigError
from rlstack.experiments import load_experiments

ale_py = pytest.importorskip("ale_py")
pytest.importorskip("cv2")

PONG_YAML = Path(__file__).resolve().parents[2] / "tune_configs" / "pong-impala.yaml"


@pytest.mark.parametrize("env_id", ["PongNoFrameskip-v4", "ALE/Pong-v5"])
def test_deepmind_preprocessing_gives_stacked_grey_screens(env_id):
    env = make_env(env_id, EnvContext({}), "deepmind", {"dim": 84, "framestack": True})
    assert env.observation_space.shape == (84, 84, 4)
    assert env.observation_space.dtype == np.uint8
    obs, _ = env.reset(seed=0)
    assert obs.shape == (84, 84, 4) and obs.dtype == np.uint8
    # Every step repeats the action for 4 frames of the emulator (not 16: ALE/...-v5 is
    # made with frameskip=1 so the wrapper's skip is the only one).
    frames_before = env.unwrapped.ale.getEpisodeFrameNumber()
    next_obs, *_ = env.step(0)
    assert env.unwrapped.ale.getEpisodeFrameNumber() - frames_before == 4
    # The stack slides by one screen per step: the oldest drops out, the newest comes last.
    np.testing.assert_array_equal(next_obs[..., :3], obs[..., 1:])
    env.close()


def test_preprocessing_follows_model_dim_and_framestack():
    env = make_env("PongNoFrameskip-v4", EnvContext({}), "deepmind", {"dim": 42, "framestack": False})
    assert env.reset(seed=0)[0].shape == (42, 42, 1)
    # Without the DeepMind wrapper, classic RLlib's own image preprocessing (its defaults:
    # 84 x 84 colour screens in [-1, 1)).
    rllib = make_env("PongNoFrameskip-v4", EnvContext({}), None)
    obs = rllib.reset(seed=0)[0]
    assert obs.shape == (84, 84, 3) and obs.dtype == np.float32 and -1.0 <= obs.min() and obs.max() < 1.0


def test_atari_rewards_are_clipped_to_their_sign_by_default():
    pytest.importorskip("torch")
    from rlstack.evaluation.rollout_worker import RolloutWorker
    from rlstack.trainers.impala import IMPALATrainer
    from rlstack.trainers.impala.impala_torch_policy import ImpalaTorchPolicy as Policy

    config = IMPALATrainer.merge_and_validate({"num_workers": 0})
    rewards = np.array([3.0, -2.0, 0.0], dtype=np.float32)
    atari = RolloutWorker("PongNoFrameskip-v4", Policy, config)
    np.testing.assert_array_equal(atari.clip_rewards(rewards), [1.0, -1.0, 0.0])
    unclipped = RolloutWorker("PongNoFrameskip-v4", Policy, {**config, "clip_rewards": False})
    np.testing.assert_array_equal(unclipped.clip_rewards(rewards), rewards)
    cartpole = RolloutWorker("CartPole-v1", Policy, config)
    np.testing.assert_array_equal(cartpole.clip_rewards(rewards), rewards)


def test_unknown_preprocessor_pref_is_rejected():
    from rlstack.trainers.impala import IMPALATrainer

    with pytest.raises(ConfigError, match="preprocessor_pref"):
        IMPALATrainer({"num_workers": 0, "preprocessor_pref": "opencv"}, "PongNoFrameskip-v4")


@pytest.mark.parametrize("pref", ["rllib", None])
def test_rllib_preprocessing_of_1x_tuned_examples_gives_42x42_grey_screens(pref):
    # 1.x's Atari tuned examples: grayscale: True, zero_mean: False, dim: 42.
    env = make_env("PongNoFrameskip-v4", EnvContext({}), pref, {"dim": 42, "grayscale": True, "zero_mean": False})
    assert env.observation_space.shape == (42, 42, 1)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (42, 42, 1) and obs.dtype == np.float32 and 0.0 <= obs.min() and obs.max() <= 1.0
    assert env.observation_space.contains(env.step(0)[0])
    # The RAM of a game: 1.x's (x - 128) / 128, under every preprocessor_pref.
    ram = make_env("ALE/Pong-v5", EnvContext({"obs_type": "ram"}), pref or "deepmind", None)
    obs, _ = ram.reset(seed=0)
    assert obs.shape == (128,) and obs.dtype == np.float32 and -1.0 <= obs.min() and obs.max() < 1.0


def test_pong_impala_yaml_runs_one_iteration(ray_local, framework):
    """The GPU-sized example, shrunk to this machine: one remote worker, no GPU, one iteration."""
    from rlstack.trainers.impala import IMPALATrainer

    spec = load_experiments(str(PONG_YAML))["pong-impala"]
    config = {**spec["config"], "framework": framework, "num_workers": 1, "num_envs_per_worker": 2,
              "num_gpus": 0, "seed": 0, "min_sample_timesteps_per_reporting": 500}
    trainer = IMPALATrainer(config, spec["env"])
    try:
        result = trainer.train()
        assert trainer.get_policy().observation_space.shape == (84, 84, 4)
        assert result["timesteps_total"] >= 500
        # The learner thread trains asynchronously: give it at most two more iterations.
        for _ in range(2):
            if result["num_env_steps_trained"] > 0:
                break
            result = trainer.train()
        assert result["num_env_steps_trained"] >= 500
        stats = result["info"]["learner"]["default_policy"]["learner_stats"]
        assert np.isfinite(stats["total_loss"])
        obs, _ = make_env(spec["env"], EnvContext({}), "deepmind", {"dim": 84}).reset(seed=1)
        action = trainer.compute_single_action(obs, explore=False)
        assert 0 <= int(action) < 6
    finally:
        trainer.stop()
