"""Exported policy models (TorchScript, SavedModel, ONNX) compute the policy's logits
without rlstack, in both frameworks."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

from rlstack.examples.env.action_mask_env import ActionMaskEnv
from rlstack.sample_batch import SampleBatch
from rlstack.trainers.ppo import PPOTrainer

SMALL = {"num_workers": 0, "train_batch_size": 200, "sgd_minibatch_size": 64, "num_sgd_iter": 2,
         "model": {"fcnet_hiddens": [16, 16]}, "seed": 3}

# Loads an exported file in a fresh interpreter where importing rlstack fails.
_LOADER = r"""
import json, sys
import numpy as np
sys.modules["rlstack"] = None  # the exported files must not need rlstack
kind, path, obs_file, out_file = sys.argv[1:]
obs = np.load(obs_file)
if kind == "torchscript":
    import torch
    out = torch.jit.load(path)(torch.from_numpy(obs)).detach().numpy()
else:
    import tensorflow as tf
    out = tf.saved_model.load(path).signatures["serving_default"](obs=tf.constant(obs))["output"].numpy()
np.save(out_file, out)
"""


def _policy_logits(trainer: PPOTrainer, obs: np.ndarray) -> np.ndarray:
    _, extras = trainer.get_policy().compute_actions(obs, explore=False)
    return extras[SampleBatch.ACTION_DIST_INPUTS]


def _load_without_rlstack(kind: str, path: str, obs: np.ndarray, tmp_path) -> np.ndarray:
    obs_file, out_file = tmp_path / "obs.npy", tmp_path / "out.npy"
    np.save(obs_file, obs)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    subprocess.run([sys.executable, "-c", _LOADER, kind, path, str(obs_file), str(out_file)], check=True, env=env,
                   cwd=tmp_path)
    return np.load(out_file)


def _onnx_logits(path: str, obs: np.ndarray) -> np.ndarray:
    onnxruntime = pytest.importorskip("onnxruntime")
    session = onnxruntime.InferenceSession(path)
    if [i.name for i in session.get_inputs()] == ["obs", "state_ins"]:
        # torch's file has 1.13's signature (1.13's export/onnx_torch.py runs it so).
        assert [o.name for o in session.get_outputs()] == ["output", "state_outs"]
        inputs = {"obs": obs, "state_ins": np.array([0.0], np.float32)}
        output, state_outs = session.run(["output", "state_outs"], inputs)
        assert state_outs.tolist() == [0.0]
        return output
    assert [i.name for i in session.get_inputs()] == ["obs"]
    assert [o.name for o in session.get_outputs()] == ["output"]
    return session.run(["output"], {"obs": obs})[0]


def test_exported_models_match_the_policy(framework, tmp_path):
    trainer = PPOTrainer({**SMALL, "framework": framework}, "CartPole-v1")
    trainer.train()  # trained weights, not the initial ones
    space = gym.make("CartPole-v1").observation_space
    space.seed(0)
    obs = np.stack([space.sample() for _ in range(100)]).astype(np.float32)
    expected = _policy_logits(trainer, obs)

    native = trainer.export_policy_model(str(tmp_path / "native"))
    kind = "torchscript" if framework == "torch" else "savedmodel"
    got = _load_without_rlstack(kind, native, obs, tmp_path)
    np.testing.assert_allclose(got, expected, atol=1e-5)

    onnx_path = trainer.export_policy_model(str(tmp_path / "onnx"), onnx=13)
    assert os.path.basename(onnx_path) == "model.onnx"
    np.testing.assert_allclose(_onnx_logits(onnx_path, obs), expected, atol=1e-5)
    trainer.stop()


def test_exported_custom_masking_model_keeps_the_mask(framework, tmp_path):
    """A 1.13-style custom ModelV2 on Dict observations exports too: ``obs`` is the flat
    observation, and masked actions keep logits at FLOAT_MIN."""
    if framework == "torch":
        from rlstack.examples.models.action_mask_model import TorchActionMaskModel as model_class
    else:
        from rlstack.examples.models.action_mask_model import ActionMaskModel as model_class
    config = {"action_space": gym.spaces.Discrete(6)}
    trainer = PPOTrainer({**SMALL, "framework": framework, "env_config": config,
                          "model": {"custom_model": model_class, "fcnet_hiddens": [16]}}, ActionMaskEnv)
    env = ActionMaskEnv(config)
    raw = [env.reset(seed=i)[0] for i in range(20)]
    policy = trainer.get_policy()
    obs = policy.preprocessor.transform_batch(raw)
    expected = _policy_logits(trainer, obs)
    got = _onnx_logits(trainer.export_policy_model(str(tmp_path), onnx=13), obs)
    masks = np.stack([o["action_mask"] for o in raw])
    np.testing.assert_allclose(got[masks == 1], expected[masks == 1], atol=1e-5)
    assert (got[masks == 0] < -1e30).all()
    assert (got.argmax(axis=1) == expected.argmax(axis=1)).all()
    trainer.stop()


def test_export_policy_checkpoint_restores_the_same_actions(framework, tmp_path):
    trainer = PPOTrainer({**SMALL, "framework": framework}, "CartPole-v1")
    trainer.train()
    path = trainer.export_policy_checkpoint(str(tmp_path), filename_prefix="ppo")
    assert path == str(tmp_path / "ppo.npz")
    fresh = PPOTrainer({**SMALL, "framework": framework, "seed": 11}, "CartPole-v1")
    with np.load(path, allow_pickle=False) as saved:
        fresh.get_policy().set_state(dict(saved))
    obs = np.random.default_rng(0).normal(size=(50, 4)).astype(np.float32)
    np.testing.assert_allclose(_policy_logits(fresh, obs), _policy_logits(trainer, obs), atol=1e-6)
    trainer.stop()
    fresh.stop()
