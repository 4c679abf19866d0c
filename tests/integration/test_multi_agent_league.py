"""Policies added and removed while training: ``add_policy`` builds the policy on
every worker (from the learner's state when given), new episodes follow the new mapping, a
policy outside ``policies_to_train`` keeps its weights, checkpoints hold the added
policies, ``remove_policy`` drops one everywhere; and 1.13's self-play pattern: snapshots
of the learner added from ``on_train_result``."""

from __future__ import annotations

import numpy as np
import pytest
import ray

from rlstack.errors import ConfigError
from rlstack.policies.policy import PolicySpec
from rlstack.trainers.callbacks import DefaultCallbacks
from rlstack.trainers.ppo import PPOTrainer
from tests.integration.test_multi_agent import SMALL, TWO_POLICIES, assert_same, weights_of


def to_pol0_or_pol2(agent_id, episode, worker, **kwargs):
    """Agents 0 and 2 act for pol0, 1 and 3 for the added pol2 (pol1 is left out)."""
    return "pol0" if agent_id % 2 == 0 else "pol2"


def test_an_added_policy_acts_on_every_worker_and_is_saved(ray_local, tmp_path):
    trainer = PPOTrainer({**SMALL, "num_workers": 1, "evaluation_duration": 2,
                          "multiagent": {**TWO_POLICIES, "policies_to_train": ["pol0"]}}, "MultiAgentCartPole")
    trainer.train()
    trainer.evaluate()  # builds the evaluation workers before the policy is added
    with pytest.raises(ConfigError, match="add_policy\\('pol1'\\): a policy of that id exists already"):
        trainer.add_policy("pol1")
    with pytest.raises(ConfigError, match="Unknown config key 'lrr'"):
        trainer.add_policy("pol2", config={"lrr": 1e-3})
    added = trainer.add_policy("pol2", type(trainer.get_policy("pol0")), policy_state=trainer.get_policy("pol0").get_state(),
                               policy_mapping_fn="tests.integration.test_multi_agent_league:to_pol0_or_pol2")
    assert added is trainer.get_policy("pol2")
    on_evaluation = trainer.evaluation_workers.local_worker().get_policy("pol2")
    assert on_evaluation.config["explore"] is False and added.config["explore"] is True  # evaluation_config's
    assert trainer.evaluate()["evaluation"]["episodes_this_iter"] == 2
    local, remote = weights_of(trainer, "pol2")
    assert_same(local, trainer.get_policy("pol0").get_weights())  # started from the learner's state
    assert_same(remote, local)  # and the rollout worker has it too
    result = trainer.train()
    while "pol1" in result["policy_reward_mean"]:  # episodes started before the new mapping may still end
        result = trainer.train()
    assert set(result["policy_reward_mean"]) == {"pol0", "pol2"}
    assert set(result["info"]["learner"]) == {"pol0"}  # policies_to_train is still ["pol0"]
    assert_same(weights_of(trainer, "pol2")[1], local)  # untrained: the snapshot stays as it was
    path = trainer.save(str(tmp_path / "checkpoint"))
    trainer.stop()
    restored = PPOTrainer.from_checkpoint(path)  # the stored config names pol2 and the new mapping
    assert set(restored.get_weights()) == {"pol0", "pol1", "pol2"}
    assert_same(restored.get_weights(["pol2"])["pol2"], local)
    restored.stop()


def test_a_removed_policy_leaves_every_worker_and_training_goes_on(ray_local):
    multiagent = {"policies": ["pol0", "pol1", "pol2"], "policies_to_train": ["pol0", "pol2"],
                  "policy_mapping_fn": lambda agent_id, episode, worker, **kw: f"pol{agent_id % 3}"}
    trainer = PPOTrainer({**SMALL, "num_workers": 1, "multiagent": multiagent}, "MultiAgentCartPole")
    trainer.train()
    with pytest.raises(KeyError, match="Unknown policy id 'nope'"):
        trainer.remove_policy("nope")
    trainer.remove_policy("pol2", policy_mapping_fn=lambda agent_id, episode, worker, **kw: f"pol{agent_id % 2}")
    remote_ids = ray.get(trainer.workers.remote_workers()[0].apply.remote(lambda w: sorted(w.policy_map)))
    assert sorted(trainer.workers.local_worker().policy_map) == remote_ids == ["pol0", "pol1"]
    assert trainer.config["multiagent"]["policies_to_train"] == ["pol0"]
    result = trainer.train()  # an agent still mapped to pol2 would fail the sampling
    assert set(result["info"]["learner"]) == {"pol0"} and result["episodes_this_iter"] > 0
    trainer.remove_policy("pol1", policy_mapping_fn=lambda agent_id, episode, worker, **kw: "pol0")
    with pytest.raises(ConfigError, match="Cannot remove 'pol0': it is the only policy"):
        trainer.remove_policy("pol0")
    trainer.stop()


def test_a_single_agent_trainer_has_no_policies_to_add():
    trainer = PPOTrainer({**SMALL, "num_workers": 0, "env_config": None}, "CartPole-v1")
    with pytest.raises(ConfigError, match="this PPO trainer is single-agent"):
        trainer.add_policy("other")
    trainer.stop()


class SelfPlay(DefaultCallbacks):
    """1.13's self-play pattern: after each iteration, a frozen copy of "main" joins the
    league and player_1 plays against the newest copy."""

    def on_train_result(self, *, trainer, result, **kwargs):
        version = len(trainer.workers.local_worker().policy_map)  # main, then main_v1, main_v2, ...
        newest = f"main_v{version}"

        def mapping(agent_id, episode, worker, **kw):
            return "main" if agent_id == "player_0" else newest

        main = trainer.get_policy("main")
        trainer.add_policy(newest, type(main), policy_state=main.get_state(), policy_mapping_fn=mapping)
        result["league_size"] = version + 1


def test_self_play_adds_snapshots_of_the_learner_from_on_train_result(ray_local):
    config = {"num_workers": 1, "num_envs_per_worker": 2, "rollout_fragment_length": 30, "train_batch_size": 60,
              "sgd_minibatch_size": 30, "num_sgd_iter": 2, "seed": 0, "callbacks": SelfPlay,
              "multiagent": {"policies": {"main": PolicySpec()}, "policies_to_train": ["main"]}}
    trainer = PPOTrainer(config, "RockPaperScissors")
    snapshots = []
    for _ in range(3):
        result = trainer.train()
        newest = f"main_v{result['league_size'] - 1}"
        snapshots.append((newest, trainer.get_policy("main").get_weights()))
    assert result["league_size"] == 4
    assert set(result["info"]["learner"]) == {"main"}  # the snapshots never learn
    assert {"main_v1", "main_v2"} <= set(result["policy_reward_mean"])  # and they play
    for policy_id, weights_when_added in snapshots:
        local, remote = weights_of(trainer, policy_id)
        assert_same(local, weights_when_added)
        assert_same(remote, weights_when_added)
    assert not all(np.array_equal(a, b) for a, b in zip(snapshots[0][1].values(), snapshots[-1][1].values()))
    trainer.stop()
