"""``tune.run("PPO")`` / ``tune.Tuner("PPO")`` run rlstack's trainers after ``import rlstack``,
even beside an RLlib that registers the same names the way Ray's does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rlstack.trainers.common.registry import ALGORITHMS

ROOT = Path(__file__).resolve().parents[2]

# A stand-in for ray[rllib]: Tune imports ray.rllib and calls _register_all() for a name it
# does not know, which registers RLlib's trainables under every algorithm name (over any
# earlier registration, in the job-wide registry). It registers every name rlstack has and
# one rlstack will never have.
RLLIB_ONLY = "RLLIB_ONLY_ALGORITHM"
FAKE_RLLIB = f'''
from ray.tune.registry import register_trainable


def _register_all():
    from fake_rllib_trainables import FakeRLlibTrainable

    for name in {(*ALGORITHMS, RLLIB_ONLY)!r}:
        register_trainable(name, FakeRLlibTrainable)
'''

FAKE_TRAINABLES = '''
from ray import tune


class FakeRLlibTrainable(tune.Trainable):
    def step(self):
        return {"fake_rllib": 1, "done": True}
'''

SCRIPT = '''
import json, os, sys
import rlstack                                # installs the Tune name lookup
import ray
ray.__path__.insert(0, sys.argv[1])           # the fake ray.rllib shadows any real one
from ray import tune
from ray.tune.registry import get_trainable_cls

# A Ray of its own: a bare ray.init() would join a `ray start` head another test runs.
ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
assert ray.rllib.__file__.startswith(sys.argv[1]) if "ray.rllib" in sys.modules else True
# A name rlstack lacks: Tune runs the fake RLlib's _register_all, which overwrites "PPO".
assert get_trainable_cls(sys.argv[3]).__name__ == "FakeRLlibTrainable"
assert sys.modules["ray.rllib"].__file__.startswith(sys.argv[1])
small = {"env": "CartPole-v1", "num_workers": 0, "train_batch_size": 200, "sgd_minibatch_size": 64,
         "num_sgd_iter": 2, "model": {"fcnet_hiddens": [16]}}
out = {}
results = tune.Tuner("PPO", param_space=small, run_config=tune.RunConfig(
    stop={"training_iteration": 1}, storage_path=sys.argv[2], name="tuner", verbose=0)).fit()
assert not results.errors, results.errors
out["tuner"] = sorted(results[0].metrics)
analysis = tune.run("PPO", config=small, stop={"training_iteration": 1}, storage_path=sys.argv[2], name="run",
                    verbose=0)
out["run"] = sorted(analysis.trials[0].last_result)
from rlstack.trainers.common.registry import ALGORITHMS
out["classes"] = {name: get_trainable_cls(name).__module__ for name in ALGORITHMS}
print("RESULT " + json.dumps(out))
'''


def test_tune_names_resolve_to_rlstack_beside_a_registering_rllib(tmp_path):
    fake_root = tmp_path / "fake"
    (fake_root / "rllib").mkdir(parents=True)
    (fake_root / "rllib" / "__init__.py").write_text(FAKE_RLLIB)
    (tmp_path / "fake_rllib_trainables.py").write_text(FAKE_TRAINABLES)
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(SCRIPT))
    # The fake trainables module must import in Tune's trial processes too (were they used).
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)]), "RAY_AUTH_MODE": "disabled"}
    proc = subprocess.run([sys.executable, str(script), str(fake_root), str(tmp_path / "results"), RLLIB_ONLY], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=400)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stdout[-3000:] + proc.stderr[-5000:]
    out = json.loads(lines[-1][len("RESULT "):])
    for keys in (out["tuner"], out["run"]):
        # Keys only rlstack's trainer reports; the fake RLlib reports "fake_rllib".
        assert "fake_rllib" not in keys
        assert {"episode_reward_mean", "num_env_steps_sampled", "sampler_perf"} <= set(keys)
    assert set(out["classes"]) == set(ALGORITHMS)
    assert all(module.startswith("rlstack.trainers.") for module in out["classes"].values()), out["classes"]


def test_every_name_resolves_to_rlstack_when_tune_was_imported_first():
    """``from ray import tune`` before ``import rlstack``; no Ray started; RLlib never imported."""
    code = textwrap.dedent('''
        import sys
        from ray import tune
        from ray.tune.registry import get_trainable_cls
        import rlstack
        from rlstack.trainers.common.registry import ALGORITHMS, get_trainer_class
        assert all(get_trainable_cls(name) is get_trainer_class(name) for name in ALGORITHMS)
        assert "ray.rllib" not in sys.modules and "torch" not in sys.modules and "tensorflow" not in sys.modules
        print("OK")
    ''')
    proc = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("OK"), proc.stderr[-3000:]


def test_import_rlstack_imports_neither_ray_nor_a_trainer():
    # The algorithm packages are imported (their declarations are read); no trainer module is.
    trainer_modules = sorted({target.partition(":")[0] for target in ALGORITHMS.values()})
    code = (f"import sys, rlstack; bad = [m for m in {['ray', 'ray.tune', *trainer_modules]!r} if m in sys.modules]; "
            "print(bad)")
    proc = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "[]", proc.stdout + proc.stderr[-2000:]
