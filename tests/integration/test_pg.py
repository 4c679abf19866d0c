"""PG end to end on a local Ray, in torch and TF, on tiny budgets: two iterations in the
driver and on a remote worker (one gradient step per train batch, weights synced,
checkpoint restored with the same greedy actions), and multi-agent training with one
PG policy per agent group, each learning on its own rows."""

from __future__ import annotations

import numpy as np
import ray

from rlstack.trainers.pg import PGTrainer

TINY = {"train_batch_size": 100, "rollout_fragment_length": 50, "min_time_s_per_reporting": 0, "seed": 0,
        "model": {"fcnet_hiddens": [16]}}
OBSERVATIONS = np.random.default_rng(0).uniform(-0.5, 0.5, (30, 4)).astype(np.float32)


def test_pg_in_the_driver_and_from_a_checkpoint(framework, tmp_path):
    trainer = PGTrainer({**TINY, "framework": framework}, "CartPole-v1")
    before = trainer.get_policy().get_weights()
    first, second = trainer.train(), trainer.train()
    assert (first["timesteps_total"], second["timesteps_total"]) == (100, 200)
    assert second["num_env_steps_trained"] == 200
    stats = second["info"]["learner"]["default_policy"]["learner_stats"]
    assert np.isfinite(stats["policy_loss"]) and stats["cur_lr"] > 0
    after = trainer.get_policy().get_weights()
    assert not np.allclose(before["logits/kernel"], after["logits/kernel"])
    np.testing.assert_array_equal(before["value_out/kernel"], after["value_out/kernel"])  # no critic

    path = trainer.save(str(tmp_path / "checkpoint"))
    expected = [trainer.compute_single_action(obs, explore=False) for obs in OBSERVATIONS]
    trainer.stop()
    restored = PGTrainer.from_checkpoint(path)
    assert [restored.compute_single_action(obs, explore=False) for obs in OBSERVATIONS] == expected
    assert restored.train()["timesteps_total"] == 300
    restored.stop()


def test_pg_with_a_remote_worker(ray_local, framework):
    trainer = PGTrainer({**TINY, "framework": framework, "num_workers": 1}, "CartPole-v1")
    for _ in range(2):
        result = trainer.train()
    assert result["timesteps_total"] == 200 and result["episodes_total"] > 0
    local = trainer.get_policy().get_weights()
    remote = ray.get(trainer.workers.remote_workers()[0].get_weights.remote())
    for name, value in local.items():
        np.testing.assert_array_equal(value, remote[name], err_msg=name)  # the learned weights reached it
    trainer.stop()


def test_pg_trains_two_policies(ray_local, framework):
    multiagent = {"policies": ["pol0", "pol1"], "policy_mapping_fn": "rlstack.examples.policy_mapping:agent_id_mod_2"}
    trainer = PGTrainer({**TINY, "framework": framework, "train_batch_size": 200, "multiagent": multiagent,
                         "env_config": {"num_agents": 4}}, "MultiAgentCartPole")
    before = {pid: trainer.get_policy(pid).get_weights()["logits/kernel"].copy() for pid in ("pol0", "pol1")}
    result = trainer.train()
    assert result["timesteps_total"] == 200 and result["agent_timesteps_total"] > 200
    assert set(result["info"]["learner"]) == {"pol0", "pol1"}
    for pid in ("pol0", "pol1"):
        assert np.isfinite(result["info"]["learner"][pid]["learner_stats"]["policy_loss"])
        assert not np.allclose(before[pid], trainer.get_policy(pid).get_weights()["logits/kernel"])
    trainer.stop()
