"""APPO end to end on a local Ray, in torch and TF, on tiny budgets: a few asynchronous
iterations with remote workers (vtrace on and off), the target network refreshed every
``target_update_frequency`` learner steps (seen in the results and in the weights), a
checkpoint that restores the same greedy actions and the target network, and two
policies learning on their own rows."""

from __future__ import annotations

import numpy as np
import pytest

from rlstack.trainers.ppo.appo import APPOTrainer

SMALL_MODEL = {"fcnet_hiddens": [16]}
TINY = {"num_workers": 2, "num_cpus_per_worker": 0.5, "num_envs_per_worker": 2, "rollout_fragment_length": 10,
        "train_batch_size": 40, "min_time_s_per_reporting": 0, "min_sample_timesteps_per_reporting": 400, "seed": 0,
        "model": SMALL_MODEL}
# In the driver: one train batch (one learner step) per train().
DRIVER = {"num_workers": 0, "rollout_fragment_length": 20, "train_batch_size": 100, "min_time_s_per_reporting": 0,
          "min_sample_timesteps_per_reporting": 100, "seed": 0, "model": SMALL_MODEL}
OBSERVATIONS = np.random.default_rng(0).uniform(-0.5, 0.5, (30, 4)).astype(np.float32)


@pytest.mark.parametrize("vtrace", [True, False], ids=["vtrace", "gae"])
def test_appo_trains_asynchronously(ray_local, framework, vtrace):
    trainer = APPOTrainer({**TINY, "framework": framework, "vtrace": vtrace, "use_kl_loss": True}, "CartPole-v1")
    before = trainer.get_policy().get_weights()["logits/kernel"].copy()
    results = [trainer.train() for _ in range(3)]
    last = results[-1]
    assert [r["timesteps_total"] for r in results] == sorted(r["timesteps_total"] for r in results)
    assert last["timesteps_total"] >= 1200 and last["num_env_steps_trained"] > 0
    assert last["num_target_updates"] > 0 and last["last_target_update_ts"] > 0
    for key in ("sample_throughput", "learner_queue", "policy_lag", "num_weight_broadcasts"):
        assert key in last  # IMPALA's result keys
    stats = last["info"]["learner"]["default_policy"]["learner_stats"]
    for key in ("total_loss", "policy_loss", "vf_loss", "entropy", "kl", "KL_Coeff", "vf_explained_var", "cur_lr"):
        assert np.isfinite(stats[key]), key
    assert ("mean_IS" in stats) == vtrace
    assert not np.allclose(before, trainer.get_policy().get_weights()["logits/kernel"])
    trainer.stop()


def _target_logits_kernel(trainer) -> np.ndarray:
    return np.asarray(trainer.get_policy().get_state()["target/logits/kernel"])


def test_target_network_follows_target_update_frequency(framework):
    trainer = APPOTrainer({**DRIVER, "framework": framework, "target_update_frequency": 3}, "CartPole-v1")
    initial = _target_logits_kernel(trainer)
    np.testing.assert_array_equal(initial, trainer.get_policy().get_weights()["logits/kernel"])
    updates = []
    for step in range(1, 7):
        result = trainer.train()
        assert result["num_env_steps_trained"] == 100 * step  # one learner step per train()
        updates.append(result["num_target_updates"])
        current = trainer.get_policy().get_weights()["logits/kernel"]
        if step % 3:
            assert not np.allclose(_target_logits_kernel(trainer), current)  # left behind
        else:
            np.testing.assert_array_equal(_target_logits_kernel(trainer), current)  # refreshed
            assert result["last_target_update_ts"] == 100 * step
    assert updates == [0, 0, 1, 1, 1, 2]
    trainer.stop()


def test_checkpoint_restores_actions_and_target_network(framework, tmp_path):
    config = {**DRIVER, "framework": framework, "target_update_frequency": 2}
    trainer = APPOTrainer(config, "CartPole-v1")
    for _ in range(3):
        trainer.train()
    target = _target_logits_kernel(trainer)
    assert not np.allclose(target, trainer.get_policy().get_weights()["logits/kernel"])
    path = trainer.save(str(tmp_path / "checkpoint"))
    expected = [trainer.compute_single_action(obs, explore=False) for obs in OBSERVATIONS]
    trainer.stop()
    restored = APPOTrainer.from_checkpoint(path)
    assert [restored.compute_single_action(obs, explore=False) for obs in OBSERVATIONS] == expected
    np.testing.assert_array_equal(_target_logits_kernel(restored), target)
    result = restored.train()
    assert result["timesteps_total"] == 400 and result["num_target_updates"] == 2
    restored.stop()


def test_appo_trains_two_policies(ray_local, framework):
    multiagent = {"policies": ["pol0", "pol1"], "policy_mapping_fn": "rlstack.examples.policy_mapping:agent_id_mod_2"}
    trainer = APPOTrainer({**DRIVER, "framework": framework, "train_batch_size": 200, "multiagent": multiagent,
                           "env_config": {"num_agents": 4}}, "MultiAgentCartPole")
    before = {pid: trainer.get_policy(pid).get_weights()["logits/kernel"].copy() for pid in ("pol0", "pol1")}
    result = trainer.train()
    assert set(result["info"]["learner"]) == {"pol0", "pol1"}
    for pid in ("pol0", "pol1"):
        assert np.isfinite(result["info"]["learner"][pid]["learner_stats"]["policy_loss"])
        assert not np.allclose(before[pid], trainer.get_policy(pid).get_weights()["logits/kernel"])
    trainer.stop()
