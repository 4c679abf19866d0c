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
