"""Remote rollout workers on a local Ray: sampling, weight and filter sync, evaluation,
resources and shutdown."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import ray

from rlstack.trainers.ppo import PPOTrainer
from tests.helpers.actors import still_alive_after

SMALL = {"num_workers": 2, "train_batch_size": 400, "sgd_minibatch_size": 100, "num_sgd_iter": 2,
         "rollout_fragment_length": 100, "seed": 1, "model": {"fcnet_hiddens": [16]}}


def test_two_workers_two_iterations(ray_local, framework):
    trainer = PPOTrainer({**SMALL, "framework": framework, "observation_filter": "MeanStdFilter",
                          "num_envs_per_worker": 2}, "CartPole-v1")
    for _ in range(2):
        result = trainer.train()
    assert result["num_healthy_workers"] == 2
    assert result["timesteps_total"] == 800  # 2 workers x 2 envs x 100 steps per round
    assert result["episodes_total"] > 0
    for key in ("sample_time_ms", "learn_time_ms", "synch_weights_time_ms"):
        assert result["timers"][key] > 0
    assert result["sampler_perf"]["mean_inference_ms"] > 0
    # Weights and filter statistics reach every worker.
    local = trainer.workers.local_worker()
    weights = local.get_weights()
    states = ray.get([w.get_filter_state.remote() for w in trainer.workers.remote_workers()])
    remote_weights = ray.get([w.get_weights.remote() for w in trainer.workers.remote_workers()])
    for state, remote in zip(states, remote_weights):
        np.testing.assert_allclose(state["mean"], local.filter.get_state()["mean"])
        assert int(state["count"]) == int(local.filter.get_state()["count"]) > 0
        for name in weights:
            np.testing.assert_array_equal(remote[name], weights[name])
    trainer.stop()


def test_evaluation_interval_and_remote_evaluation_workers(ray_local):
    trainer = PPOTrainer({**SMALL, "num_workers": 1, "evaluation_interval": 1, "evaluation_duration": 3,
                          "evaluation_num_workers": 1}, "CartPole-v1")
    result = trainer.train()
    evaluation = result["evaluation"]
    assert evaluation["episodes_this_iter"] == 3
    assert evaluation["episode_reward_mean"] == pytest.approx(evaluation["timesteps_this_iter"] / 3)
    trainer.stop()


def test_local_evaluation_by_timesteps():
    # CartPole-v1 episodes last at most 500 steps, so 1,100 steps finish at least two.
    trainer = PPOTrainer({**SMALL, "num_workers": 0, "evaluation_duration": 1100,
                          "evaluation_duration_unit": "timesteps"}, "CartPole-v1")
    evaluation = trainer.evaluate()["evaluation"]  # 1.13: {"evaluation": metrics}
    assert evaluation["episodes_this_iter"] >= 2
    assert evaluation["timesteps_this_iter"] == pytest.approx(evaluation["episode_len_mean"] * evaluation["episodes_this_iter"])
    trainer.stop()


def test_stop_releases_worker_actors(ray_local):
    trainer = PPOTrainer({**SMALL, "framework": "torch"}, "CartPole-v1")
    workers = trainer.workers.remote_workers()
    trainer.stop()
    alive = still_alive_after(workers, "ping")
    assert not alive, f"{len(alive)} worker actors still answer 30 s after stop()"


def test_resource_request_bundles():
    factory = PPOTrainer.default_resource_request({"num_workers": 3, "num_gpus": 0.5, "evaluation_num_workers": 1,
                                                  "num_cpus_per_worker": 2, "placement_strategy": "SPREAD"})
    assert factory.bundles == [{"CPU": 1, "GPU": 0.5}] + [{"CPU": 2}] * 4
    assert factory.strategy == "SPREAD"


def test_workers_that_ask_for_no_cpu_start_without_a_reservation(ray_local):
    # 1.x let num_cpus_per_worker be 0 (workers sharing the driver's CPUs); Ray refuses a
    # placement-group bundle of nothing, so such workers get none.
    config = {**SMALL, "num_workers": 1, "num_cpus_per_worker": 0, "framework": "torch"}
    assert PPOTrainer.default_resource_request(config).bundles == [{"CPU": 1}]
    trainer = PPOTrainer(config, "CartPole-v1")
    try:
        assert trainer.train()["num_healthy_workers"] == 1
    finally:
        trainer.stop()


def test_rollout_workers_pin_framework_threads(ray_local, framework):
    def threads(worker):
        if worker.policy.framework == "torch":
            import torch

            return torch.get_num_threads()
        import tensorflow as tf

        return tf.config.threading.get_intra_op_parallelism_threads()

    trainer = PPOTrainer({**SMALL, "framework": framework, "rollout_inference": "framework"}, "CartPole-v1")
    assert trainer.workers.foreach_worker(threads, local=False) == [1, 1]
    trainer.stop()


@pytest.mark.parametrize(("algorithm", "num_workers", "user_threads", "threads"), [
    ("PPO", 2, None, "default"),  # synchronous: the workers wait while it learns
    ("PPO", 2, 1, 1),  # the user's own setting stays
    ("DDPG", 1, None, "default"),
    ("A3C", 2, None, 1),  # the driver learns while its workers sample
    ("A3C", 2, 3, 3),
])
def test_torch_learner_threads_follow_the_work_and_stop_puts_them_back(ray_local, monkeypatch, algorithm,
                                                                      num_workers, user_threads, threads):
    import torch

    from rlstack.trainers.common.registry import get_trainer_class
    from rlstack.utils.threads import torch_default_threads

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    before = torch.get_num_threads()
    start = torch_default_threads() if user_threads is None else user_threads
    torch.set_num_threads(start)
    try:
        config = {"num_workers": num_workers, "framework": "torch", "seed": 0}
        trainer = get_trainer_class(algorithm)(config, "Pendulum-v1" if algorithm == "DDPG" else "CartPole-v1")
        assert torch.get_num_threads() == (torch_default_threads() if threads == "default" else threads)
        trainer.stop()
        assert torch.get_num_threads() == start
    finally:
        torch.set_num_threads(before)


def test_omp_num_threads_wins_over_the_rule(ray_local, monkeypatch):
    # Ray sets OMP_NUM_THREADS inside an actor (a Tune trial's trainer) from the CPUs it reserved.
    import torch

    from rlstack.trainers.a3c import A3CTrainer
    from rlstack.utils.threads import torch_default_threads

    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    before = torch.get_num_threads()
    torch.set_num_threads(torch_default_threads())
    try:
        trainer = A3CTrainer({"num_workers": 2, "framework": "torch", "seed": 0}, "CartPole-v1")
        assert torch.get_num_threads() == torch_default_threads()
        trainer.stop()
    finally:
        torch.set_num_threads(before)


def test_numpy_acting_workers_import_no_framework(ray_local, framework):
    def loaded(worker):
        import sys

        return worker.policy.framework, "torch" in sys.modules, "tensorflow" in sys.modules

    trainer = PPOTrainer({**SMALL, "framework": framework}, "CartPole-v1")
    trainer.train()
    # The driver learns with the framework policy but samples through a numpy copy.
    assert trainer.get_policy().framework == framework
    assert trainer.workers.foreach_worker(loaded, local=False) == [("numpy", False, False)] * 2
    trainer.stop()


def test_numpy_and_framework_acting_see_the_same_distribution():
    """The numpy copy the driver samples with computes the learner's distribution."""
    trainer = PPOTrainer({**SMALL, "num_workers": 0}, "CartPole-v1")
    trainer.train()
    local = trainer.workers.local_worker()
    assert local.sampling_policy.framework == "numpy"
    obs = np.random.default_rng(0).normal(size=(64, 4)).astype(np.float32)
    _, numpy_extras = local.sampling_policy.compute_actions(obs, explore=False)
    _, torch_extras = local.policy.compute_actions(obs, explore=False)
    for key in ("action_dist_inputs", "vf_preds", "action_logp"):
        np.testing.assert_allclose(numpy_extras[key], torch_extras[key], rtol=1e-5, atol=1e-6, err_msg=key)
    trainer.stop()


def test_num_gpus_without_gpu_falls_back_to_cpu_with_warning(caplog):
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible; this test covers the CPU fallback")
    with caplog.at_level("WARNING", logger="rlstack"):
        trainer = PPOTrainer({**SMALL, "num_workers": 0, "num_gpus": 1}, "CartPole-v1")
    assert "num_gpus=1 but torch sees no GPU" in caplog.text
    assert trainer.get_policy().device.type == "cpu"
    trainer.train()
    trainer.stop()


def test_trainer_starts_local_ray_when_none_is_running(tmp_path):
    """A trainer built before ray.init() starts its own local Ray (in a fresh process),
    importing the driver policy's framework on a second thread meanwhile."""
    import subprocess
    import sys

    script = (
        "import os, threading, ray\n"
        "os.environ.pop('RAY_ADDRESS', None)\n"
        "init, seen = ray.init, []\n"
        "def spy(*args, **kwargs):\n"
        "    seen.extend(t.name for t in threading.enumerate())\n"
        "    return init(*args, **kwargs)\n"
        "ray.init = spy\n"
        "from rlstack.trainers.ppo import PPOTrainer\n"
        "t = PPOTrainer({'num_workers': 1, 'train_batch_size': 200, 'sgd_minibatch_size': 50, 'num_sgd_iter': 1,"
        " 'model': {'fcnet_hiddens': [8]}}, 'CartPole-v1')\n"
        "assert ray.is_initialized()\n"
        "assert 'rlstack-preload' in seen, seen\n"
        "r = t.train(); t.stop()\n"
        "print('OK', r['num_healthy_workers'], ray.cluster_resources().get('CPU'))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "OK 1" in proc.stdout


def test_evaluation_does_not_disturb_training_randomness():
    """Evaluating between iterations must not reseed or consume training's random streams."""
    def run(evaluate: bool) -> float:
        trainer = PPOTrainer({**SMALL, "num_workers": 0, "seed": 7}, "CartPole-v1")
        trainer.train()
        if evaluate:
            trainer.evaluate()
        result = trainer.train()
        trainer.stop()
        return result["info"]["learner"]["default_policy"]["learner_stats"]["total_loss"]

    assert run(evaluate=True) == run(evaluate=False)


def test_custom_model_reaches_remote_workers(ray_local):
    pytest.importorskip("torch")
    from rlstack.models.catalog import ModelCatalog
    from tests.helpers.custom_models import TinyTorchModel

    ModelCatalog.register_custom_model("tiny_torch", TinyTorchModel)
    trainer = PPOTrainer({**SMALL, "num_workers": 1, "model": {"custom_model": "tiny_torch",
                                                                "custom_model_config": {"hidden": 8}}},
                         "CartPole-v1")
    result = trainer.train()
    assert result["timesteps_total"] == 400
    names = trainer.workers.foreach_worker(lambda w: sorted(w.get_weights()), local=False)[0]
    assert names == sorted(trainer.get_weights()["default_policy"])
    trainer.stop()


def test_custom_tf_model_trains():
    pytest.importorskip("tensorflow")
    from rlstack.models.catalog import ModelCatalog
    from tests.helpers.custom_models import TinyTFModel

    ModelCatalog.register_custom_model("tiny_tf", TinyTFModel)
    trainer = PPOTrainer({**SMALL, "num_workers": 0, "framework": "tf",
                          "model": {"custom_model": "tiny_tf"}}, "CartPole-v1")
    before = {k: v.copy() for k, v in trainer.get_weights()["default_policy"].items()}
    trainer.train()
    after = trainer.get_weights()["default_policy"]
    assert before and any(not np.array_equal(before[k], after[k]) for k in before)
    trainer.stop()



def test_flush_to_zero_is_on_while_a_torch_trainer_lives_and_stop_puts_it_back(tmp_path):
    # A fresh process, as a user's is: torch starts without flush-to-zero.
    script = tmp_path / "flush.py"
    script.write_text(
        "from rlstack.trainers.ppo import PPOTrainer\n"
        "from rlstack.utils.threads import denormals_flushed\n"
        "before = denormals_flushed()\n"
        "config = {'num_workers': 0, 'framework': 'torch', 'seed': 0, 'train_batch_size': 200,\n"
        "          'sgd_minibatch_size': 100, 'num_sgd_iter': 1}\n"
        "first, second = PPOTrainer(config, 'CartPole-v1'), PPOTrainer(config, 'CartPole-v1')\n"
        "first.train()\n"
        "during = denormals_flushed()\n"
        "first.stop()\n"
        "one_left = denormals_flushed()\n"
        "second.stop()\n"
        "print(before, during, one_left, denormals_flushed())\n")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-4:] == ["False", "True", "True", "False"]
