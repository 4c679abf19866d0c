"""Classic RLlib's own image preprocessing (the ``model`` keys ``dim``, ``grayscale``,
``zero_mean``), on a fake env with ALE-sized screens: 1.x's observation shapes and ranges
under ``preprocessor_pref`` "rllib" / None, and where the DeepMind wrapper decides."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from rlstack.env.atari import SCREEN_SHAPE, RamPreprocessing
from rlstack.env.env_context import EnvContext
from rlstack.env.registry import make_env
from rlstack.errors import ConfigError
from rlstack.models.catalog import MODEL_DEFAULTS, validate_model_config

pytest.importorskip("cv2")

# 1.x's Atari tuned examples (pong-*.yaml, atari-*.yaml).
TUNED_1X = {"dim": 42, "grayscale": True, "zero_mean": False}


class FakeScreenEnv(gym.Env):
    """An env with ALE-sized RGB screens: the score rows (top 25) and the bottom border
    (last 25) are white, the playing field is one colour, (30, 60, 90) by default."""

    observation_space = gym.spaces.Box(0, 255, SCREEN_SHAPE, np.uint8)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config: Any = None) -> None:
        self.colour = tuple((config or {}).get("colour", (30, 60, 90)))

    def _screen(self) -> np.ndarray:
        screen = np.full(SCREEN_SHAPE, 255, np.uint8)
        screen[25:-25] = self.colour
        return screen

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        return self._screen(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        return self._screen(), 0.0, False, False, {}


@pytest.mark.parametrize("pref", ["rllib", None])
def test_1x_tuned_example_keys_give_grey_42x42_screens_in_0_1(pref):
    env = make_env(FakeScreenEnv, EnvContext({}), pref, TUNED_1X)
    assert env.observation_space.shape == (42, 42, 1) and env.observation_space.dtype == np.float32
    obs, _ = env.reset(seed=0)
    assert obs.shape == (42, 42, 1) and obs.dtype == np.float32
    # The white rows are cut off; the field's grey is the mean of its channels, / 255.
    np.testing.assert_allclose(obs, 60.0 / 255.0, rtol=1e-6)
    assert env.observation_space.contains(env.step(0)[0])


def test_defaults_give_colour_84x84_screens_centred_on_zero():
    env = make_env(FakeScreenEnv, EnvContext({}), "rllib", {"dim": 84, "grayscale": False, "zero_mean": True})
    obs, _ = env.reset(seed=0)
    assert obs.shape == (84, 84, 3) and obs.dtype == np.float32
    # (x - 128) / 128 per channel.
    np.testing.assert_allclose(obs[0, 0], [(30 - 128) / 128, (60 - 128) / 128, (90 - 128) / 128], rtol=1e-6)
    white = make_env(FakeScreenEnv, EnvContext({"colour": (255, 255, 255)}), "rllib", None).reset(seed=0)[0]
    black = make_env(FakeScreenEnv, EnvContext({"colour": (0, 0, 0)}), "rllib", None).reset(seed=0)[0]
    assert black.min() == -1.0 and white.max() == pytest.approx(127 / 128)  # [-1, 1)


def test_other_dims_and_a_screen_that_varies_keep_the_range():
    rng = np.random.default_rng(0)

    class NoisyScreens(FakeScreenEnv):
        def _screen(self) -> np.ndarray:
            return rng.integers(0, 256, SCREEN_SHAPE, dtype=np.uint8)

    for dim in (10, 42, 84, 100):
        env = make_env(NoisyScreens, EnvContext({}), None, {"dim": dim, "grayscale": False, "zero_mean": False})
        obs, _ = env.reset(seed=0)
        assert obs.shape == (dim, dim, 3)
        assert 0.0 <= obs.min() and obs.max() <= 1.0 and env.observation_space.contains(obs)


def test_the_deepmind_wrapper_does_not_take_a_screen_env_that_is_not_the_ales():
    # 1.x ran its own preprocessors on every env the DeepMind wrapper had not taken.
    env = make_env(FakeScreenEnv, EnvContext({}), "deepmind", TUNED_1X)
    assert env.reset(seed=0)[0].shape == (42, 42, 1)


def test_other_envs_are_left_as_they_are():
    for pref in ("rllib", None, "deepmind"):
        env = make_env("CartPole-v1", EnvContext({}), pref, TUNED_1X)
        assert env.observation_space.shape == (4,) and not isinstance(env, gym.ObservationWrapper)


def test_ram_scaling_is_1xs():
    class Ram(FakeScreenEnv):
        observation_space = gym.spaces.Box(0, 255, (128,), np.uint8)

        def _screen(self) -> np.ndarray:
            return np.arange(128, dtype=np.uint8) * 2

    env = RamPreprocessing(Ram())
    obs, _ = env.reset(seed=0)
    np.testing.assert_allclose(obs, (np.arange(128) * 2 - 128) / 128, rtol=1e-6)
    assert obs.dtype == np.float32 and env.observation_space.contains(obs)
    # A 128-wide observation of an env that is not the ALE's stays as it is.
    assert make_env(Ram, EnvContext({}), "rllib", None).reset(seed=0)[0].dtype == np.uint8


def test_grayscale_and_zero_mean_are_accepted_and_checked():
    from rlstack.trainers.ppo import PPOTrainer

    assert PPOTrainer.merge_and_validate({"model": TUNED_1X})["model"]["grayscale"] is True
    with pytest.raises(ConfigError, match="model.zero_mean must be True or False"):
        validate_model_config({**MODEL_DEFAULTS, "zero_mean": "no"})


def test_an_ale_game_gets_1xs_shapes():
    pytest.importorskip("ale_py")
    for pref in ("rllib", None):
        env = make_env("PongNoFrameskip-v4", EnvContext({}), pref, TUNED_1X)
        obs, _ = env.reset(seed=0)
        assert obs.shape == (42, 42, 1) and 0.0 <= obs.min() and obs.max() <= 1.0
    # "deepmind" decides for the ALE's screens: grey uint8, stacked; grayscale/zero_mean unused.
    deepmind = make_env("PongNoFrameskip-v4", EnvContext({}), "deepmind", {**TUNED_1X, "framestack": True})
    obs, _ = deepmind.reset(seed=0)
    assert obs.shape == (42, 42, 4) and obs.dtype == np.uint8


def test_a_trainer_sees_the_preprocessed_screens():
    from rlstack.trainers.pg import PGTrainer

    trainer = PGTrainer({"num_workers": 0, "train_batch_size": 20, "rollout_fragment_length": 20,
                         "preprocessor_pref": "rllib", "model": dict(TUNED_1X)}, FakeScreenEnv)
    try:
        assert trainer.get_policy().observation_space.shape == (42, 42, 1)
        assert trainer.train()["timesteps_total"] >= 20
    finally:
        trainer.stop()
