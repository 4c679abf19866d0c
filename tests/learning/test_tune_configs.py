"""Learning tests: every tuned example in tune_configs/ reaches its stop reward within its
step budget, through the same code path as `rlstack train -f`.

Thresholds come from the YAML files (classic RLlib's bars); seeds are fixed; no retries.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rlstack.cli import load_experiments, run_experiment

CONFIG_DIR = Path(__file__).resolve().parents[2] / "tune_configs"


def _frameworks(spec: dict) -> list[str]:
    # A file that fixes its framework runs in that one; otherwise in both.
    fixed = (spec.get("config") or {}).get("framework")
    return [fixed] if fixed else ["torch", "tf"]


CASES = [
    (path, name, framework)
    for path in sorted(CONFIG_DIR.glob("*.yaml"))
    for name, spec in load_experiments(str(path)).items()
    for framework in _frameworks(spec)
]


@pytest.mark.parametrize(("path", "name", "framework"), CASES, ids=[f"{p.stem}-{f}" for p, _, f in CASES])
def test_reaches_stop_reward(ray_local, path, name, framework):
    pytest.importorskip("torch" if framework == "torch" else "tensorflow")
    spec = load_experiments(str(path))[name]
    reward_bar = spec["stop"]["episode_reward_mean"]
    step_budget = spec["stop"]["timesteps_total"]
    row = run_experiment(name, spec, framework=framework, verbose=False)
    assert row["reward_mean"] >= reward_bar, f"{name} ({framework}) reached only {row['reward_mean']} in {row['timesteps']} steps"
    assert row["timesteps"] <= step_budget + spec["config"].get("train_batch_size", 4000)
