"""The ``multiagent`` config: PolicySpec and its 1.13 spellings, per-policy overrides, the
mapping function's signatures, and the errors for bad input."""

from __future__ import annotations

import gymnasium as gym
import pytest

from rlstack.errors import ConfigError
from rlstack.evaluation.worker_policies import mapping_caller
from rlstack.examples.policy.random_policy import RandomPolicy
from rlstack.policies.policy import PolicySpec
from rlstack.trainers.a3c import A2CTrainer
from rlstack.trainers.dqn import DQNTrainer
from rlstack.trainers.common.multi_agent import configured_policies, policy_specs
from rlstack.trainers.ppo import PPOTrainer

BOX = gym.spaces.Box(-1.0, 1.0, (4,))
TWO = gym.spaces.Discrete(2)


def merged(**multiagent):
    return PPOTrainer.merge_and_validate({"multiagent": multiagent})


def test_policy_spec_is_1x_named_tuple_at_1x_path():
    from rlstack.policies.policy_map import PolicySpec as Same

    spec = PolicySpec(config={"lr": 0.1})
    assert spec is not None and PolicySpec is Same and spec._fields == (
        "policy_class", "observation_space", "action_space", "config")
    assert spec.policy_class is None and spec.observation_space is None and spec.config == {"lr": 0.1}


def test_every_1x_spelling_of_policies_reads_as_policy_specs():
    config = merged(policies={"spec": PolicySpec(None, BOX, TWO, {"lr": 0.1}), "tuple": (None, BOX, TWO, {}),
                              "yaml_list": [None, None, None, {"gamma": 0.9}], "yaml_map": {"config": {"lr": 0.2}},
                              "empty": None, "user": (RandomPolicy, BOX, TWO, {}),
                              "by_path": {"policy_class": "rlstack.examples.policy.random_policy:RandomPolicy"}})
    specs = configured_policies(config)
    assert all(isinstance(spec, PolicySpec) for spec in specs.values())
    assert specs["tuple"].observation_space == BOX and specs["yaml_list"].config == {"gamma": 0.9}
    assert specs["empty"] == PolicySpec() and specs["user"].policy_class is RandomPolicy
    assert configured_policies(merged(policies={"a", "b"})) == {"a": PolicySpec(), "b": PolicySpec()}
    assert configured_policies(merged(policies=["a"])) == {"a": PolicySpec()}
    assert configured_policies(merged()) == {}


def test_per_policy_overrides_merge_over_the_trainer_config():
    config = PPOTrainer.merge_and_validate({"lr": 1e-4, "gamma": 0.99, "model": {"fcnet_hiddens": [8]},
                                            "multiagent": {"policies": {
                                                "fast": PolicySpec(config={"lr": 1e-2, "model": {"fcnet_activation": "relu"}}),
                                                "slow": PolicySpec(config={"gamma": 0.5})}}})
    specs = policy_specs(config, "PPO")
    assert specs["fast"].config["lr"] == 1e-2 and specs["fast"].config["gamma"] == 0.99
    assert specs["fast"].config["model"]["fcnet_hiddens"] == [8]  # the model dict merges key by key
    assert specs["fast"].config["model"]["fcnet_activation"] == "relu"
    assert specs["slow"].config["gamma"] == 0.5 and specs["slow"].config["lr"] == 1e-4
    assert policy_specs(merged(), "PPO") is None


@pytest.mark.parametrize(("multiagent", "fragments"), [
    ({"policies": {"p": PolicySpec(config={"lr_shedule": None})}}, ["policies['p'].config", "did you mean 'lr_schedule'"]),
    ({"policies": {"p": PolicySpec(config={"gamma": 2.0})}}, ["policies['p'].config", "gamma must be in [0, 1]"]),
    ({"policies": {"p": PolicySpec(config={"sgd_minibatch_size": 8000})}},
     ["policies['p'].config", "sgd_minibatch_size (8000) must be <= train_batch_size"]),
    ({"policies": {1: PolicySpec()}}, ["Policy ids are strings", "1"]),
    ({"policies": {"p": "PPO"}}, ["policies['p']", "not a policy spec"]),
    ({"policies": {"p": PolicySpec(policy_class=dict)}}, ["policies['p'].policy_class", "not a Policy subclass"]),
    ({"policies": {"p": PolicySpec(observation_space=(4,))}}, ["policies['p'].observation_space", "gymnasium space"]),
    ({"policies": 3}, ["multiagent.policies must be", "3"]),
    ({"policies": ["a", "b"], "policies_to_train": ["a", "c"]}, ["policies_to_train names ['c']", "['a', 'b']"]),
    ({"policies_to_train": ["pol0"]}, ["['pol0']", "['default_policy']"]),
    ({"policies_to_train": "a"}, ["policies_to_train must be a list"]),
    ({"count_steps_by": "steps"}, ["count_steps_by='steps'", "env_steps, agent_steps"]),
    ({"replay_mode": "lockstep"}, ["replay_mode='lockstep'", "independent"]),
    ({"policy_mapping_fn": "no_such_module:fn"}, ["policy_mapping_fn='no_such_module:fn'", "cannot import"]),
    ({"policy_mapping_fn": "rlstack.examples.policy_mapping:nope"}, ["has no attribute 'nope'"]),
    ({"policy_mapping_fn": 3}, ["policy_mapping_fn must be a function"]),
    ({"policies": ["a"], "policy_map_capacity": 0}, ["policy_map_capacity must be an integer >= 1"]),
    ({"polices": ["a"]}, ["Unknown config key 'polices' in multiagent of PPO", "did you mean 'policies'"]),
])
def test_bad_multiagent_config_names_the_key_and_the_fix(multiagent, fragments):
    with pytest.raises(ConfigError) as info:
        merged(**multiagent)
    for fragment in fragments:
        assert fragment in str(info.value)


def test_recurrent_policies_only_where_the_trainer_trains_them_and_multi_agent_only_where_supported():
    config = PPOTrainer.merge_and_validate({"multiagent": {"policies": {
        "p": PolicySpec(), "q": PolicySpec(config={"model": {"use_lstm": True}})}}})
    assert policy_specs(config, "PPO")["q"].config["model"]["use_lstm"]
    with pytest.raises(ConfigError, match="In multiagent.policies\\['q'\\].config: model.use_attention=True is not "
                                          "supported by DQN"):
        DQNTrainer.merge_and_validate({"multiagent": {"policies": {
            "p": PolicySpec(), "q": PolicySpec(config={"model": {"use_attention": True}})}}})
    class OnePolicyDQN(DQNTrainer):
        supports_multi_agent = False

    with pytest.raises(ConfigError, match="supported by A2C, A3C, APEX, APEX_DDPG, APPO, DDPG, DQN, IMPALA, PG, PPO, SAC, "
                                          "TD3 so far, not by DQN"):
        OnePolicyDQN.merge_and_validate({"multiagent": {"policies": ["p"]}})
    assert A2CTrainer.merge_and_validate({"multiagent": {"policies": ["p"]}})["multiagent"]["policies"] == ["p"]


def _one(agent_id):
    return f"one-{agent_id}"


def _two(agent_id, episode):
    return f"two-{agent_id}-{episode}"


def _three(agent_id, episode, worker):
    return f"three-{agent_id}-{episode}-{worker}"


def _keywords(agent_id, episode, **kwargs):
    return f"kw-{agent_id}-{episode}-{kwargs['worker']}"


def _only_keywords(agent_id, **kwargs):
    return f"only-{agent_id}-{kwargs['episode']}-{kwargs['worker']}"


@pytest.mark.parametrize(("fn", "expected"), [
    (_one, "one-a"), (_two, "two-a-E"), (_three, "three-a-E-W"), (_keywords, "kw-a-E-W"),
    (_only_keywords, "only-a-E-W"), (lambda agent_id, *args, **kwargs: f"any-{args}", "any-('E', 'W')"),
    (str, "a"), ("rlstack.examples.policy_mapping:agent_id_mod_2", None),
])
def test_mapping_functions_of_every_1x_signature_get_what_they_take(fn, expected):
    call = mapping_caller(fn, ["x", "y"])
    if expected is None:
        assert call(3, "E", "W") == "pol1"
    else:
        assert call("a", "E", "W") == expected


def test_without_a_mapping_function_agents_go_to_the_only_policy_or_the_default():
    assert mapping_caller(None, ["only"])("any", None, None) == "only"
    assert mapping_caller(None, ["a", "b"])("any", None, None) == "default_policy"


def test_each_policy_starts_from_its_own_weights_reproducibly():
    from rlstack.trainers.common.multi_agent import policy_specs
    from rlstack.trainers.ppo import DEFAULT_CONFIG

    config = {**DEFAULT_CONFIG, "seed": 3,
              "multiagent": {**DEFAULT_CONFIG["multiagent"], "policies": {
                  "a": PolicySpec(), "b": PolicySpec(), "c": PolicySpec(config={"seed": 9})}}}
    specs = policy_specs(config, "PPO")
    seeds = [specs[pid].config["seed"] for pid in ("a", "b", "c")]
    # The first keeps the trainer's seed; the others get their own, and an explicit one wins.
    assert seeds[0] == 3 and seeds[1] not in (3, 9) and seeds[2] == 9
    assert [s.config["seed"] for s in policy_specs(config, "PPO").values()] == seeds
