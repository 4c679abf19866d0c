"""Resources: GPU requests (checked against a Ray that declares GPUs this machine lacks),
``_fake_gpus``, placement groups for rollout workers, and the learner device in results.

On a machine with a CUDA GPU, ``test_learner_on_the_gpu`` (both frameworks) and
``test_every_algorithm_learns_on_the_gpu_and_restores_on_the_cpu`` (torch) also train on it.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap

import gymnasium as gym
import numpy as np
import pytest
import ray

from rlstack.errors import ConfigError
from rlstack.trainers.common.registry import ALGORITHMS
from rlstack.trainers.ppo import PPOTrainer

SMALL = {"num_workers": 2, "train_batch_size": 200, "sgd_minibatch_size": 100, "num_sgd_iter": 1,
         "rollout_fragment_length": 100, "seed": 1, "model": {"fcnet_hiddens": [16]}}


def test_resource_request_has_a_bundle_for_the_learner_and_each_worker():
    factory = PPOTrainer.default_resource_request({**SMALL, "num_gpus": 0.5, "num_gpus_per_worker": 0.25,
                                                   "evaluation_num_workers": 1, "placement_strategy": "SPREAD"})
    assert factory.bundles == [{"CPU": 1, "GPU": 0.5}] + [{"CPU": 1, "GPU": 0.25}] * 3
    assert factory.strategy == "SPREAD"
    # _fake_gpus keeps the config but asks Ray for no GPUs at all.
    fake = PPOTrainer.default_resource_request({**SMALL, "num_gpus": 1, "num_gpus_per_worker": 0.5, "_fake_gpus": True})
    assert all(bundle.get("GPU", 0) == 0 for bundle in fake.bundles)


@pytest.mark.parametrize(("override", "fragment"), [
    ({"num_gpus": 2}, "learner runs on one GPU"),
    ({"num_gpus_per_worker": -1}, "num_gpus_per_worker must be a number >= 0"),
    ({"_fake_gpus": "yes"}, "_fake_gpus must be True or False"),
])
def test_bad_gpu_settings_are_rejected(override, fragment):
    with pytest.raises(ConfigError, match=fragment):
        PPOTrainer({**SMALL, "num_workers": 0, **override}, "CartPole-v1")


def test_standalone_workers_live_in_their_own_placement_group(ray_local):
    from ray.util.placement_group import placement_group_table

    trainer = PPOTrainer({**SMALL, "placement_strategy": "SPREAD"}, "CartPole-v1")
    group = trainer.workers._placement_group
    assert group is not None
    group_ids = ray.get([w.apply.remote(lambda w: ray.get_runtime_context().get_placement_group_id())
                         for w in trainer.workers.remote_workers()])
    assert group_ids == [group.id.hex()] * 2
    assert placement_group_table(group)["strategy"] == "SPREAD"
    result = trainer.train()
    assert result["info"]["learner_device"] == "cpu"
    trainer.stop()
    # Stopping frees the reserved resources.
    assert placement_group_table(group)["state"] == "REMOVED"


# Run in a fresh process: it needs a Ray that declares 2 (logical) GPUs.
GPU_ACCOUNTING = textwrap.dedent("""
    import json, ray
    from ray import tune
    from rlstack.trainers.ppo import PPOTrainer

    ray.init(address="local", num_cpus=4, num_gpus=2, include_dashboard=False, log_to_driver=False)
    small = json.loads({small!r})
    out = {{}}
    trainer = PPOTrainer({{**small, "num_gpus_per_worker": 0.25}}, "CartPole-v1")
    out["worker_gpu_ids"] = ray.get([w.apply.remote(lambda w: ray.get_gpu_ids())
                                     for w in trainer.workers.remote_workers()])
    out["free_gpus_standalone"] = ray.available_resources().get("GPU", 0)
    trainer.stop()
    fake = PPOTrainer({{**small, "num_gpus_per_worker": 0.25, "_fake_gpus": True}}, "CartPole-v1")
    out["free_gpus_fake"] = ray.available_resources().get("GPU", 0)
    out["fake_worker_devices"] = ray.get([w.apply.remote(lambda w: w.policy.device_name)
                                          for w in fake.workers.remote_workers()])
    fake.stop()
    tuner = tune.Tuner("PPO", param_space={{**small, "env": "CartPole-v1", "num_gpus": 0.5}},
                       run_config=tune.RunConfig(stop={{"training_iteration": 1}}, verbose=0,
                                                 storage_path={storage!r}))
    result = tuner.fit()[0]
    out["tune_error"] = repr(result.error) if result.error else None
    out["tune_learner_gpu_ids"] = result.metrics["info"]["learner_gpu_ids"]
    out["tune_learner_device"] = result.metrics["info"]["learner_device"]
    print("RESULT " + json.dumps(out))
""")


def test_gpu_requests_reach_ray(tmp_path):
    script = GPU_ACCOUNTING.format(small=json.dumps({**SMALL, "framework": "torch"}), storage=str(tmp_path))
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stdout[-2000:] + proc.stderr[-4000:]
    out = json.loads(lines[-1][len("RESULT "):])
    # Each worker got a quarter of one GPU; the two quarters are reserved while they run.
    assert [len(ids) for ids in out["worker_gpu_ids"]] == [1, 1]
    assert out["free_gpus_standalone"] == pytest.approx(1.5)
    # _fake_gpus: nothing reserved, every policy on the CPU.
    assert out["free_gpus_fake"] == pytest.approx(2.0)
    assert out["fake_worker_devices"] == ["cpu", "cpu"]
    # Under Tune the trial's learner got a GPU id (half a GPU). Where torch sees no CUDA
    # (CI) it warned and computed on the CPU, and the result says so.
    assert out["tune_error"] is None
    assert len(out["tune_learner_gpu_ids"]) == 1
    import torch

    assert out["tune_learner_device"] == ("cuda:0" if torch.cuda.is_available() else "cpu")


@pytest.mark.parametrize("algorithm", ["PPO", "IMPALA", "APPO"])
def test_learner_on_the_gpu(ray_local, framework, algorithm):
    """Runs only where the framework sees a GPU (the lent GPU machine, not CI)."""
    from rlstack.trainers.common.registry import get_trainer_class

    if framework == "torch":
        import torch

        if not torch.cuda.is_available():
            pytest.skip("torch sees no CUDA GPU")
        expected = "cuda:0"
    else:
        import tensorflow as tf

        if not tf.config.list_physical_devices("GPU"):
            pytest.skip("TensorFlow sees no GPU")
        expected = "/GPU:0"
    trainer_class = get_trainer_class(algorithm)
    config = {**SMALL, "framework": framework, "num_gpus": 1}
    if algorithm in ("IMPALA", "APPO"):
        for key in ("sgd_minibatch_size", "num_sgd_iter"):
            del config[key]
        config.update(rollout_fragment_length=50, min_sample_timesteps_per_reporting=400)
    trainer = trainer_class(config, "CartPole-v1")
    result = trainer.train()
    while result["num_env_steps_trained"] == 0:  # IMPALA's learner thread lags a little
        result = trainer.train()
    assert result["info"]["learner_device"] == expected
    assert math.isfinite(result["info"]["learner"]["default_policy"]["learner_stats"]["total_loss"])
    obs = [0.01, -0.02, 0.03, 0.0]
    action = trainer.compute_single_action(obs, explore=False)
    checkpoint = trainer.save()
    trainer.stop()
    # A GPU-trained checkpoint restores on the CPU and acts the same.
    cpu = trainer_class.from_checkpoint(checkpoint, config_overrides={"num_gpus": 0, "num_workers": 0})
    assert cpu.get_policy().device_name in ("cpu", "/CPU:0")
    assert cpu.compute_single_action(obs, explore=False) == action
    cpu.stop()


def _tiny_gpu_configs() -> dict[str, tuple[str, dict]]:
    # (env, config) per algorithm: the integration tests' tiny settings, learner on one GPU.
    from tests.integration.test_actor_critic import IMPALA_TINY
    from tests.integration.test_apex_ddpg import TINY as APEX_DDPG_TINY
    from tests.integration.test_appo import TINY as APPO_TINY
    from tests.integration.test_dqn import APEX_TINY
    from tests.integration.test_dqn import TINY as DQN_TINY
    from tests.integration.test_sac import TINY as SAC_TINY

    deterministic = {"num_workers": 0, "seed": 0, "min_sample_timesteps_per_reporting": 100,
                     "min_time_s_per_reporting": 0, "learning_starts": 50, "buffer_size": 1000,
                     "train_batch_size": 16, "actor_hiddens": [16], "critic_hiddens": [16],
                     "exploration_config": {"random_timesteps": 20}}
    actor_critic = {"rollout_fragment_length": 20, "min_time_s_per_reporting": 0, "seed": 0,
                    "model": {"fcnet_hiddens": [16]}}
    return {
        "A2C": ("CartPole-v1", {**actor_critic, "num_workers": 0, "train_batch_size": 40}),
        "A3C": ("CartPole-v1", {**actor_critic, "num_workers": 1}),
        "APEX": ("CartPole-v1", APEX_TINY),
        "APEX_DDPG": ("Pendulum-v1", APEX_DDPG_TINY),
        "APPO": ("CartPole-v1", APPO_TINY),
        "DDPG": ("Pendulum-v1", deterministic),
        "DQN": ("CartPole-v1", DQN_TINY),
        "IMPALA": ("CartPole-v1", IMPALA_TINY),
        "PG": ("CartPole-v1", {**actor_critic, "num_workers": 0, "train_batch_size": 40}),
        "PPO": ("CartPole-v1", SMALL),
        "SAC": ("Pendulum-v1", SAC_TINY),
        "TD3": ("Pendulum-v1", deterministic),
    }


# ES and ARS search the weights with episodes on CPU actors; their torch policy only acts.
NO_GRADIENT_LEARNER = {"ES", "ARS"}


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_every_algorithm_learns_on_the_gpu_and_restores_on_the_cpu(ray_local, algorithm):
    """torch, where it sees a GPU (the lent GPU machine, not CI): the learner's weights,
    optimizer and loss run on cuda:0, the statistics are finite, and the checkpoint
    restores on the CPU with the same greedy actions."""
    import torch

    from rlstack.trainers.common.registry import get_trainer_class

    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA GPU")
    if algorithm in NO_GRADIENT_LEARNER:
        pytest.skip(f"{algorithm} moves its weights by black-box search in numpy on the driver: no learner device")
    configs = _tiny_gpu_configs()
    assert set(configs) | NO_GRADIENT_LEARNER == set(ALGORITHMS), "a new algorithm needs a tiny GPU config here"
    env, config = configs[algorithm]
    trainer_class = get_trainer_class(algorithm)
    trainer = trainer_class({**config, "framework": "torch", "num_gpus": 1}, env)
    result = trainer.train()
    for _ in range(20):
        if result["num_env_steps_trained"]:
            break
        result = trainer.train()  # the replay warm-up, or an asynchronous learner lagging
    assert result["num_env_steps_trained"] > 0
    assert result["info"]["learner_device"] == "cuda:0"
    policy = trainer.get_policy()
    assert {param.device.type for param in policy.model.parameters()} == {"cuda"}
    stats = result["info"]["learner"]["default_policy"]["learner_stats"]
    assert stats and all(math.isfinite(value) for value in stats.values() if isinstance(value, float))
    space = gym.make(env).observation_space
    space.seed(0)
    observations = [space.sample() for _ in range(5)]
    actions = [trainer.compute_single_action(obs, explore=False) for obs in observations]
    checkpoint = trainer.save()
    trainer.stop()
    cpu = trainer_class.from_checkpoint(checkpoint, config_overrides={"num_gpus": 0})
    assert cpu.get_policy().device_name == "cpu"
    for obs, action in zip(observations, actions):
        np.testing.assert_allclose(np.asarray(cpu.compute_single_action(obs, explore=False), np.float64),
                                   np.asarray(action, np.float64), rtol=1e-4, atol=1e-5)
    cpu.stop()
