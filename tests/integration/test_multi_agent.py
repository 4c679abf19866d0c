"""Multi-agent trainers on a local Ray: PPO (and A2C) learn per policy in both
frameworks, policies with different spaces share a trainer, per-policy overrides reach
their policy, a policy that is not trained keeps its weights, checkpoints hold every
policy, and acting names the policy."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import ray

from rlstack.env.multi_agent_env import MultiAgentEnv
from rlstack.errors import CheckpointError, ConfigError
from rlstack.examples.env.multi_agent import MultiAgentCartPole
from rlstack.policies.policy import Policy, PolicySpec
from rlstack.trainers.a3c import A2CTrainer, A3CTrainer
from rlstack.trainers.impala import IMPALATrainer
from rlstack.trainers.ppo import PPOTrainer

SMALL = {"train_batch_size": 400, "sgd_minibatch_size": 100, "num_sgd_iter": 2, "rollout_fragment_length": 100,
         "seed": 1, "model": {"fcnet_hiddens": [16]}, "env_config": {"num_agents": 4}}
TWO_POLICIES = {"policies": ["pol0", "pol1"], "policy_mapping_fn": "rlstack.examples.policy_mapping:agent_id_mod_2"}


def weights_of(trainer, policy_id):
    """The policy's weights on the driver and on every remote worker."""
    local = trainer.get_policy(policy_id).get_weights()
    remote = ray.get([w.get_weights.remote([policy_id]) for w in trainer.workers.remote_workers()])
    return [local] + [r[policy_id] for r in remote]


def assert_same(a, b):
    assert a.keys() == b.keys()
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])


def test_ppo_trains_two_policies_on_a_remote_worker(ray_local, framework):
    trainer = PPOTrainer({**SMALL, "framework": framework, "num_workers": 1, "observation_filter": "MeanStdFilter",
                          "multiagent": TWO_POLICIES}, "MultiAgentCartPole")
    for _ in range(2):
        result = trainer.train()
    assert result["timesteps_total"] == 800 and result["agent_timesteps_total"] > 800
    assert result["agent_steps_total"] == result["num_agent_steps_sampled"] == result["agent_timesteps_total"]
    assert set(result["policy_reward_mean"]) == {"pol0", "pol1"} and result["episodes_total"] > 0
    # An episode's return is all four agents'; each policy's is one agent's.
    assert result["episode_reward_mean"] > 3 * max(result["policy_reward_mean"].values())
    assert set(result["info"]["learner"]) == {"pol0", "pol1"}
    assert "policy_loss" in result["info"]["learner"]["pol1"]["learner_stats"]
    assert len(result["hist_stats"]["policy_pol0_reward"]) == 2 * len(result["hist_stats"]["episode_reward"])
    for policy_id in ("pol0", "pol1"):
        local, remote = weights_of(trainer, policy_id)
        assert_same(local, remote)  # the learners' weights reached the worker
    local_filters = trainer.workers.local_worker().get_filter_state()
    remote_filters = ray.get(trainer.workers.remote_workers()[0].get_filter_state.remote())
    assert set(local_filters) == {"pol0", "pol1"}
    np.testing.assert_allclose(remote_filters["pol1"]["mean"], local_filters["pol1"]["mean"])
    trainer.stop()


class Heuristic(Policy):
    """A fixed policy (1.13's hand-written shape): always action 0, learns nothing."""

    def compute_actions(self, obs_batch, state_batches=None, prev_action_batch=None, prev_reward_batch=None,
                        **kwargs):
        return np.zeros(len(obs_batch), dtype=np.int64), [], {}

    def learn_on_batch(self, samples):
        return {}

    def get_weights(self):
        return {}

    def set_weights(self, weights):
        pass


def test_policies_not_trained_keep_their_weights(ray_local):
    multiagent = {"policies": {"learner": PolicySpec(), "frozen": PolicySpec(), "fixed": PolicySpec(Heuristic)},
                  "policy_mapping_fn": lambda agent_id, episode, worker, **kw: ["learner", "frozen", "fixed"][agent_id % 3],
                  "policies_to_train": ["learner"]}
    trainer = PPOTrainer({**SMALL, "num_workers": 1, "multiagent": multiagent}, "MultiAgentCartPole")
    frozen_before, learner_before = weights_of(trainer, "frozen"), trainer.get_policy("learner").get_weights()
    result = trainer.train()
    assert set(result["info"]["learner"]) == {"learner"}
    assert set(result["policy_reward_mean"]) == {"learner", "frozen", "fixed"}
    for before, after in zip(frozen_before, weights_of(trainer, "frozen")):
        assert_same(before, after)
    assert any(not np.array_equal(learner_before[k], v) for k, v in trainer.get_policy("learner").get_weights().items())
    assert isinstance(trainer.get_policy("fixed"), Heuristic)
    assert trainer.compute_single_action(np.zeros(4, np.float32), policy_id="fixed") == 0
    assert [id_ for id_ in trainer.workers.local_worker().foreach_trainable_policy(lambda p, id_: id_)] == ["learner"]
    trainer.stop()


class TwoKinds(MultiAgentEnv):
    """A CartPole agent ("pole": Box(4) obs, 2 actions) beside a Pendulum one ("swing":
    Box(3) obs, a Box(1) torque), each with its own spaces (by agent id)."""

    def __init__(self, config=None):
        super().__init__()
        self.envs = {"pole": gym.make("CartPole-v1", max_episode_steps=50),
                     "swing": gym.make("Pendulum-v1", max_episode_steps=50)}
        self._agent_ids = set(self.envs)
        self.observation_space = gym.spaces.Dict({k: e.observation_space for k, e in self.envs.items()})
        self.action_space = gym.spaces.Dict({k: e.action_space for k, e in self.envs.items()})

    def reset(self, *, seed=None, options=None):
        self.done = set()
        return {k: e.reset(seed=seed)[0] for k, e in self.envs.items()}, {}

    def step(self, action_dict):
        obs, rewards, terminateds, truncateds = {}, {}, {}, {}
        for k, action in action_dict.items():
            obs[k], rewards[k], terminateds[k], truncateds[k], _ = self.envs[k].step(action)
            if terminateds[k] or truncateds[k]:
                self.done.add(k)
        terminateds["__all__"] = len(self.done) == 2
        truncateds["__all__"] = False
        return obs, rewards, terminateds, truncateds, {}


def test_policies_with_different_spaces_and_configs_in_one_trainer(framework):
    multiagent = {"policies": {"pole": PolicySpec(config={"lr": 1e-3}), "swing": PolicySpec(config={"gamma": 0.9})},
                  "policy_mapping_fn": lambda agent_id, *args, **kwargs: agent_id}
    trainer = PPOTrainer({**SMALL, "framework": framework, "num_workers": 0, "lr": 1e-4,
                          "multiagent": multiagent}, TwoKinds)
    result = trainer.train()
    assert trainer.get_policy("pole").action_space == gym.spaces.Discrete(2)
    assert trainer.get_policy("swing").observation_space.shape == (3,)
    learner = result["info"]["learner"]
    assert learner["pole"]["learner_stats"]["cur_lr"] == pytest.approx(1e-3)
    assert learner["swing"]["learner_stats"]["cur_lr"] == pytest.approx(1e-4)
    assert trainer.get_policy("swing").config["gamma"] == 0.9 and trainer.get_policy("pole").config["gamma"] == 0.99
    torque = trainer.compute_single_action(np.zeros(3, np.float32), policy_id="swing", explore=False)
    assert torque.shape == (1,) and -2.0 <= torque[0] <= 2.0
    actions = trainer.compute_actions({"pole": np.zeros(4, np.float32)}, policy_id="pole")
    assert set(actions) == {"pole"} and actions["pole"] in (0, 1)
    with pytest.raises(KeyError, match="Unknown policy id 'nope'"):
        trainer.compute_single_action(np.zeros(4, np.float32), policy_id="nope")
    trainer.stop()


def test_checkpoints_restore_every_policy(tmp_path, framework):
    config = {**SMALL, "framework": framework, "num_workers": 0, "observation_filter": "MeanStdFilter",
              "multiagent": TWO_POLICIES}
    trainer = PPOTrainer(config, "MultiAgentCartPole")
    trainer.train()
    path = trainer.save(str(tmp_path / "checkpoint"))
    observations = [np.array([0.02, -0.1, 0.03, 0.2], np.float32), np.array([-0.1, 0.3, -0.05, -0.4], np.float32)]
    greedy = {pid: [trainer.compute_single_action(o, policy_id=pid, explore=False, full_fetch=True)[2]
                    ["action_dist_inputs"] for o in observations] for pid in ("pol0", "pol1")}
    assert not np.allclose(greedy["pol0"], greedy["pol1"])
    weights, filters = trainer.get_weights(), trainer.workers.local_worker().get_filter_state()
    trainer.stop()
    restored = PPOTrainer.from_checkpoint(path)  # the stored config builds it again (ids, an import path)
    for pid in ("pol0", "pol1"):
        assert_same(restored.get_weights([pid])[pid], weights[pid])
        np.testing.assert_allclose(restored.workers.local_worker().get_filter_state()[pid]["mean"], filters[pid]["mean"])
        again = [restored.compute_single_action(o, policy_id=pid, explore=False, full_fetch=True)[2]
                 ["action_dist_inputs"] for o in observations]
        np.testing.assert_allclose(again, greedy[pid], rtol=1e-6)
    assert restored.train()["training_iteration"] == 2
    restored.stop()
    single = PPOTrainer({**SMALL, "num_workers": 0, "framework": framework, "env_config": None}, "CartPole-v1")
    with pytest.raises(CheckpointError, match="multi-agent checkpoint but this trainer is not"):
        single.restore(path)
    single.stop()


def test_a_checkpoint_of_an_unstorable_mapping_asks_for_it_again(tmp_path):
    multiagent = {**TWO_POLICIES, "policy_mapping_fn": lambda agent_id, *args, **kwargs: f"pol{agent_id % 2}"}
    trainer = PPOTrainer({**SMALL, "num_workers": 0, "multiagent": multiagent}, "MultiAgentCartPole")
    path = trainer.save(str(tmp_path / "checkpoint"))
    trainer.stop()
    with pytest.raises(CheckpointError, match="multiagent.policy_mapping_fn: <function"):
        PPOTrainer.from_checkpoint(path)
    restored = PPOTrainer.from_checkpoint(path, config_overrides={"multiagent": multiagent})
    assert set(restored.get_weights()) == {"pol0", "pol1"}
    restored.stop()


def test_a_multi_agent_env_without_policies_trains_one_default_policy_and_evaluates():
    trainer = A2CTrainer({"train_batch_size": 400, "seed": 1, "num_workers": 0, "min_time_s_per_reporting": 0,
                          "evaluation_duration": 2, "env_config": {"num_agents": 2}}, MultiAgentCartPole)
    result = trainer.train()
    assert list(result["info"]["learner"]) == ["default_policy"] and result["agent_timesteps_total"] > 400
    assert result["policy_reward_mean"] == {}  # 1.13 leaves default_policy out of the per-policy keys
    evaluation = trainer.evaluate()["evaluation"]
    assert evaluation["episodes_this_iter"] == 2 and evaluation["episode_reward_mean"] > 0
    trainer.stop()


class OnePolicyA2C(A2CTrainer):
    """A trainer that learns one policy only (every built-in one learns several)."""

    supports_multi_agent = False


def test_a_trainer_without_multi_agent_refuses_a_multi_agent_env(ray_local):
    with pytest.raises(ConfigError, match="multi-agent training is supported by A2C, A3C, APEX, APEX_DDPG, APPO, DDPG, DQN, "
                                          "IMPALA, PG, PPO, SAC, TD3 so far, not by A2C"):
        OnePolicyA2C({"num_workers": 0}, "MultiAgentCartPole")


def test_reset_config_rebuilds_every_policy_with_the_new_hyper_parameters():
    trainer = PPOTrainer({**SMALL, "num_workers": 0, "multiagent": TWO_POLICIES}, "MultiAgentCartPole")
    trainer.train()
    assert trainer.reset_config({**SMALL, "env": "MultiAgentCartPole", "num_workers": 0, "lr": 1e-3,
                                 "multiagent": TWO_POLICIES})
    assert trainer.get_policy("pol1").config["lr"] == 1e-3
    result = trainer.train()
    assert result["info"]["learner"]["pol0"]["learner_stats"]["cur_lr"] == pytest.approx(1e-3)
    assert result["timesteps_total"] == 400  # the counters started over
    trainer.stop()


def test_count_steps_by_agent_steps_sizes_batches_and_timesteps_in_agent_steps():
    trainer = PPOTrainer({**SMALL, "num_workers": 0, "multiagent": {**TWO_POLICIES, "count_steps_by": "agent_steps"}},
                         "MultiAgentCartPole")
    result = trainer.train()
    assert result["timesteps_total"] == result["agent_timesteps_total"] >= 400
    assert result["num_env_steps_sampled"] < result["timesteps_total"]  # four agents act per env step
    trainer.stop()


def test_impala_learns_per_policy_through_its_learner_thread(ray_local):
    trainer = IMPALATrainer({"num_workers": 1, "seed": 0, "min_time_s_per_reporting": 0, "rollout_fragment_length": 20,
                             "train_batch_size": 100, "model": {"fcnet_hiddens": [16]}, "env_config": {"num_agents": 4},
                             "multiagent": {**TWO_POLICIES, "policies_to_train": ["pol1"]}}, "MultiAgentCartPole")
    pol0_before, pol1_before = weights_of(trainer, "pol0")[0], weights_of(trainer, "pol1")[0]
    learned = {}
    for _ in range(50):
        learned.update(trainer.train()["info"]["learner"])
        if "pol1" in learned and trainer.learner.num_steps >= 3:
            break
    assert set(learned) == {"pol1"} and "policy_loss" in learned["pol1"]["learner_stats"]
    assert_same(weights_of(trainer, "pol0")[0], pol0_before)
    assert any(not np.array_equal(pol1_before[k], v) for k, v in weights_of(trainer, "pol1")[0].items())
    trainer.stop()


def test_a3c_workers_send_gradients_per_policy(ray_local):
    trainer = A3CTrainer({"num_workers": 1, "seed": 1, "min_time_s_per_reporting": 0, "rollout_fragment_length": 20,
                          "model": {"fcnet_hiddens": [16]}, "env_config": {"num_agents": 4},
                          "multiagent": {**TWO_POLICIES, "policies_to_train": ["pol0"]}}, "MultiAgentCartPole")
    pol1_before = weights_of(trainer, "pol1")[0]
    pol0_before = weights_of(trainer, "pol0")[0]
    result = trainer.train()
    while not result["info"]["learner"]:
        result = trainer.train()
    assert set(result["info"]["learner"]) == {"pol0"} and result["num_gradient_updates"] >= 1
    assert result["agent_timesteps_total"] > result["timesteps_total"] > 0
    assert_same(weights_of(trainer, "pol1")[0], pol1_before)
    local, remote = weights_of(trainer, "pol0")
    assert any(not np.array_equal(pol0_before[k], v) for k, v in local.items())
    trainer.stop()


@pytest.mark.parametrize("names", [("TorchSharedWeightsModel",) * 2, ("SharedWeightsModel1", "SharedWeightsModel2")],
                         ids=["torch", "tf"])
def test_policies_of_the_shared_weights_example_train_one_shared_layer(names):
    from rlstack.examples.models import shared_weights_model

    framework = "torch" if names[0].startswith("Torch") else "tf"
    policies = {f"policy_{i}": PolicySpec(config={"model": {"custom_model": getattr(shared_weights_model, name)}})
                for i, name in enumerate(names)}
    trainer = PPOTrainer({**SMALL, "framework": framework, "num_workers": 0,
                          "multiagent": {"policies": policies,
                                         "policy_mapping_fn": lambda agent_id, *a, **kw: f"policy_{agent_id % 2}"}},
                         "MultiAgentCartPole")

    def shared(policy_id):
        model = trainer.get_policy(policy_id).model
        return [np.array(w) for w in ([p.detach().numpy() for p in model._global_shared_layer.parameters()]
                                      if framework == "torch"
                                      else shared_weights_model._tf_shared_layer().get_weights())]

    before = shared("policy_0")
    trainer.train()
    after_0, after_1 = shared("policy_0"), shared("policy_1")
    for a, b, c in zip(before, after_0, after_1):
        np.testing.assert_array_equal(b, c)  # one layer, seen by both policies
        assert not np.array_equal(a, b)  # and trained
    trainer.stop()
