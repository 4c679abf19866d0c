"""Learning from recorded experience: a trained PPO expert records
50,000 steps of CartPole to JSON files (``output``); BC and MARWIL, reading those files
alone (``input``, no sampler), reach a mean evaluation return >= 150 in both frameworks,
each run exactly as a user runs it: ``rlstack train -f tune_configs/cartpole-{bc,marwil}.yaml
--config '{"input": DIR}'``. Importance sampling and weighted importance sampling,
estimating the expert's own value from its recorded episodes, land within 15% of the
return it measured while recording. CQL, from 10,000 steps a trained SAC recorded on
Pendulum, reaches an evaluation return >= -700 (tune_configs/pendulum-cql.yaml).

The experts train and record here, in the test process (seeded; PPO torch with no
rollout workers ~40 s, SAC torch ~60 s), once for the module each.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import rlstack.analysis
from rlstack.experiments import load_experiments
from rlstack.offline.estimators import ImportanceSampling, WeightedImportanceSampling
from rlstack.offline.json_reader import JsonReader
from rlstack.trainers.ppo import PPOTrainer

ROOT = Path(__file__).resolve().parents[2]
# The experts train once per module: under make test-learning's xdist workers, this file's
# tests share one worker.
pytestmark = pytest.mark.xdist_group("offline-learning")
EXAMPLES = {"BC": ROOT / "tune_configs" / "cartpole-bc.yaml", "MARWIL": ROOT / "tune_configs" / "cartpole-marwil.yaml",
            "CQL": ROOT / "tune_configs" / "pendulum-cql.yaml"}
SAC_EXPERT_RETURN = -400  # SAC trains until its last episodes average this much
EXPERT_STEPS = 50_000
EXPERT_RETURN = 400  # the expert trains until its sampled episodes average this much
EXPERT_CONFIG = {"num_workers": 0, "framework": "torch", "seed": 0, "lr": 1e-3, "train_batch_size": 4000,
                 "sgd_minibatch_size": 256, "num_sgd_iter": 15}


@pytest.fixture(scope="module")
def expert_data(tmp_path_factory):
    """The directory of the expert's 50,000 recorded steps, the expert's mean return
    while recording, and the expert (for the estimators)."""
    out = tmp_path_factory.mktemp("cartpole-expert")
    trainer = PPOTrainer(dict(EXPERT_CONFIG), "CartPole-v1")
    for _ in range(40):
        if trainer.train()["episode_reward_mean"] >= EXPERT_RETURN:
            break
    checkpoint = trainer.save()
    trainer.stop()
    # Recording: the expert acts as it learned to (sampling its actions, so that the
    # files hold the probabilities the estimators need), whole episodes per batch.
    recorder = PPOTrainer({**EXPERT_CONFIG, "output": str(out), "batch_mode": "complete_episodes"}, "CartPole-v1")
    recorder.restore(checkpoint)
    worker = recorder.workers.local_worker()
    worker.get_metrics()  # drop what restoring left
    steps = 0
    while steps < EXPERT_STEPS:
        steps += worker.sample().count
    episodes = worker.get_metrics()
    measured = float(np.mean([episode.episode_return for episode in episodes]))
    yield out, measured, recorder
    recorder.stop()


def test_the_expert_recorded_50k_steps_in_13_layout(expert_data):
    out, measured, _ = expert_data
    assert measured >= 300, f"the expert is no expert: {measured:.0f}"
    batches = list(JsonReader(str(out)).read_all_files())
    assert sum(batch.count for batch in batches) >= EXPERT_STEPS
    line = json.loads(next(iter(sorted(out.glob("*.json")))).open().readline())
    assert line["type"] == "SampleBatch"
    assert isinstance(line["obs"], str)  # packed, as 1.13 writes obs and new_obs
    for column in ("actions", "rewards", "dones", "eps_id", "action_prob", "action_logp", "new_obs"):
        assert column in line


@pytest.mark.parametrize("estimator_class", [ImportanceSampling, WeightedImportanceSampling])
def test_importance_sampling_estimates_the_expert_within_15_percent(expert_data, estimator_class):
    out, measured, recorder = expert_data
    estimator = estimator_class("est", recorder.get_policy(), gamma=1.0)
    for batch in JsonReader(str(out)).read_all_files():
        estimator.process(batch)
    estimates = estimator.get_metrics()
    key = "V_step_IS" if estimator_class is ImportanceSampling else "V_step_WIS"
    estimate = float(np.mean([e.metrics[key] for e in estimates]))
    behaviour = float(np.mean([e.metrics["V_prev"] for e in estimates]))
    assert behaviour == pytest.approx(measured, rel=0.02)  # the recorded episodes are the measured ones
    assert abs(estimate - measured) <= 0.15 * measured, (estimate, measured)


@pytest.fixture(scope="module")
def sac_data(tmp_path_factory):
    """The directory of 10,000 steps a trained SAC recorded on Pendulum."""
    from rlstack.trainers.sac import SACTrainer

    out = tmp_path_factory.mktemp("pendulum-sac")
    spec = next(iter(load_experiments(str(ROOT / "tune_configs" / "pendulum-sac.yaml")).values()))
    config = {**spec["config"], "framework": "torch", "evaluation_interval": None}
    trainer = SACTrainer(config, "Pendulum-v1")
    for _ in range(30):
        if trainer.train()["episode_reward_mean"] >= SAC_EXPERT_RETURN:
            break
    checkpoint = trainer.save()
    trainer.stop()
    recorder = SACTrainer({**config, "output": str(out), "rollout_fragment_length": 200}, "Pendulum-v1")
    recorder.restore(checkpoint)
    worker, steps = recorder.workers.local_worker(), 0
    while steps < 10_000:
        steps += worker.sample().count
    recorder.stop()
    return out


def _learns_offline(path: Path, framework: str, data: Path, tmp_path: Path) -> None:
    """``rlstack train -f PATH --config '{"input": DATA}'`` reaches the file's evaluation
    bar within its budget of steps read, without one env step sampled while learning."""
    if importlib.util.find_spec({"torch": "torch", "tf": "tensorflow"}[framework]) is None:
        pytest.skip(f"{framework} is not installed")
    name, spec = next(iter(load_experiments(str(path)).items()))
    proc = subprocess.run(
        [sys.executable, "-m", "rlstack", "train", "-f", str(path), "--framework", framework,
         "--config", json.dumps({"input": str(data)}), "--storage-path", str(tmp_path)],
        capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = rlstack.analysis.load(tmp_path / name)
    last = results.iloc[-1]
    bar = spec["stop"]["evaluation/episode_reward_mean"]
    assert last["evaluation/episode_reward_mean"] >= bar, (
        f"{name} ({framework}) reached {last['evaluation/episode_reward_mean']:.1f} in {last['timesteps_total']} "
        "steps read")
    assert last["timesteps_total"] <= spec["stop"]["timesteps_total"]
    assert results["episodes_this_iter"].sum() == 0  # nothing was sampled from the env while learning


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_cql_learns_pendulum_from_a_sacs_recorded_files(sac_data, framework, tmp_path):
    _learns_offline(EXAMPLES["CQL"], framework, sac_data, tmp_path)


@pytest.mark.parametrize("framework", ["torch", "tf"])
@pytest.mark.parametrize("algorithm", ["BC", "MARWIL"])
def test_learns_cartpole_from_the_recorded_files_alone(expert_data, algorithm, framework, tmp_path):
    _learns_offline(EXAMPLES[algorithm], framework, expert_data[0], tmp_path)
