"""Framework isolation: a torch run never imports TensorFlow, and the reverse, for every
registered algorithm (rlstack.trainers.ALGORITHMS: a new algorithm folder is covered with
no edit here).

Each case runs in a fresh interpreter, since this test process may already have
imported both frameworks. Each algorithm trains one short iteration on the env of its
tuned example, in the driver where it can; algorithms that sample only on remote workers
(A3C, APEX) get one worker on a local Ray, and the check is on the driver, which holds
their learner.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from rlstack.trainers.common.registry import ALGORITHMS
from tests.helpers.tuned_examples import tuned_examples

# One short iteration: each key an algorithm's defaults have is lowered to this value
# (never raised: DQN's train batch of 32 stays 32).
SMOKE = {
    "train_batch_size": 100, "sgd_minibatch_size": 50, "num_sgd_iter": 1, "rollout_fragment_length": 50,
    "learning_starts": 50, "min_sample_timesteps_per_reporting": 100, "min_time_s_per_reporting": 0,
    "num_replay_buffer_shards": 1, "buffer_size": 10000,
    # ES / ARS: a small noise table (1.13's default is 1 GB) and few episodes per iteration.
    "noise_size": 100000, "episodes_per_batch": 10, "num_rollouts": 10,
}

SCRIPT = textwrap.dedent(
    """
    import json, sys
    import rlstack
    assert "torch" not in sys.modules and "tensorflow" not in sys.modules, "import rlstack loaded a framework"
    from rlstack.errors import ConfigError
    from rlstack.trainers.common.registry import get_trainer_class

    cases, smoke, framework = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
    for name, env in cases:
        trainer_class = get_trainer_class(name)
        defaults = trainer_class.get_default_config()
        config = {key: value if defaults[key] is None else min(defaults[key], value)
                  for key, value in smoke.items() if key in defaults}
        config.update(framework=framework, num_workers=0, model={"fcnet_hiddens": [8]}, seed=0)
        try:
            trainer_class.merge_and_validate(config)
        except ConfigError as error:
            if "num_workers" not in str(error):
                raise
            config["num_workers"] = 1  # it samples on remote workers only
            import ray
            if not ray.is_initialized():
                ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
        trainer = trainer_class(config, env)
        result = trainer.train()
        assert result["timesteps_total"] >= 100, (name, result["timesteps_total"])
        trainer.stop()
        print("TRAINED", name, env, config["num_workers"])
    print("LOADED", "torch" in sys.modules, "tensorflow" in sys.modules)
    """
)


def _cases() -> list[tuple[str, str]]:
    # Each algorithm on the env of its first tuned example that fits this machine
    # (TD3 on Pendulum, not CartPole); tests/unit/test_algorithm_folders.py requires one.
    envs: dict[str, str] = {}
    for _, _, spec in tuned_examples():
        # (examples that learn from recorded files smoke-train on their env's sampler here)
        if not (spec.get("config") or {}).get("num_gpus") and isinstance(spec.get("env"), str):
            envs.setdefault(spec["run"], spec["env"])
    missing = sorted(set(ALGORITHMS) - set(envs))
    assert not missing, f"no tuned example in tune_configs/ runs {missing}: add one (see ARCHITECTURE.md)"
    return [(name, envs[name]) for name in ALGORITHMS]


@pytest.mark.parametrize(("framework", "present", "absent"), [("torch", "torch", "tensorflow"), ("tf", "tensorflow", "torch")])
def test_training_imports_only_its_framework(framework, present, absent):
    pytest.importorskip(present)
    cases = _cases()
    proc = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(cases), json.dumps(SMOKE), framework],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    trained = [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("TRAINED")]
    assert trained == [name for name, _ in cases]
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
