"""Framework isolation: a torch run never imports TensorFlow, and the reverse, for every
algorithm that trains in the driver.

Each case runs in a fresh interpreter, since this test process may already have
imported both frameworks.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import sys
    import rlstack
    assert "torch" not in sys.modules and "tensorflow" not in sys.modules, "import rlstack loaded a framework"
    from rlstack.trainers.registry import get_trainer_class
    # Every algorithm that can train in the driver, one short iteration each.
    configs = {{
        "PPO": {{"train_batch_size": 200, "sgd_minibatch_size": 50, "num_sgd_iter": 1,
                 "rollout_fragment_length": 100}},
        "DQN": {{"learning_starts": 50, "min_sample_timesteps_per_reporting": 100}},
        "IMPALA": {{"train_batch_size": 100, "min_time_s_per_reporting": 0}},
        "A2C": {{"min_time_s_per_reporting": 0}},
    }}
    for name, config in configs.items():
        config.update(framework="{framework}", num_workers=0, model={{"fcnet_hiddens": [8]}})
        trainer = get_trainer_class(name)(config, "CartPole-v1")
        result = trainer.train()
        assert result["timesteps_total"] >= 100, (name, result["timesteps_total"])
        trainer.stop()
    print("LOADED", "torch" in sys.modules, "tensorflow" in sys.modules)
    """
)


@pytest.mark.parametrize(("framework", "present", "absent"), [("torch", "torch", "tensorflow"), ("tf", "tensorflow", "torch")])
def test_training_imports_only_its_framework(framework, present, absent):
    pytest.importorskip(present)
    proc = subprocess.run([sys.executable, "-c", SCRIPT.format(framework=framework)],
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [l for l in proc.stdout.splitlines() if l.startswith("LOADED")][-1]
    loaded = dict(zip(("torch", "tensorflow"), line.split()[1:]))
    assert loaded[present] == "True"
    assert loaded[absent] == "False", f"framework={framework} imported {absent}"


KERAS_SCRIPT = textwrap.dedent(
    """
    import os, sys
    from rlstack.trainers.ppo.ppo_tf_policy import PPOTFPolicy
    from rlstack.models.tf.framework import tf
    assert not any(m == "keras" or m.startswith("keras.") for m in sys.modules), "importing TF pulled in Keras"
    assert "TF_USE_LEGACY_KERAS" not in os.environ, "the import switch leaked into the environment"
    # A user's Keras model still works: tf.keras and the module path both import Keras 3.
    layer = tf.keras.layers.Dense(3)
    assert tuple(layer(tf.zeros([2, 4])).shape) == (2, 3)
    from tensorflow.keras import layers
    assert layers.Dense is type(layer)
    print("OK")
    """
)


def test_tensorflow_import_skips_keras_and_keeps_tf_keras_working():
    pytest.importorskip("tensorflow")
    proc = subprocess.run([sys.executable, "-c", KERAS_SCRIPT], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines()[-1] == "OK"
