"""The record of RLlib 1.13's config keys (rlstack/trainers/common/keys_1x.py) and its page
(docs/reference/rllib-1x-keys.md): the key lists are 1.13's, each status is what a config
merge really does with the key, the committed page is the generated one, and no 1.13 key
is refused without a reason unless it is on the list of keys still to implement."""

from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path

import pytest

from rlstack.errors import ConfigError
from rlstack.trainers.common import classic_keys, keys_1x
from rlstack.trainers.common.config import merge_config
from rlstack.trainers.common.keys_1x import IMPLEMENTED, NO_EFFECT, REFUSED, RENAMED
from rlstack.trainers.common.registry import ALGORITHMS, get_trainer_class

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("rllib_1x_keys", ROOT / "docs" / "_tools" / "rllib_1x_keys.py")
generator = importlib.util.module_from_spec(spec)
spec.loader.exec_module(generator)

# The 1.13 keys rlstack refuses today with no reason in REFUSED_KEYS: the keys still to
# implement (or to accept at their no-op values), by refused_without_reason()'s groups.
# Take a key off when rlstack gains it; a key that is refused and on no list fails below.
NOT_YET = {
    "APEX": ("before_learn_on_batch", "replay_batch_size", "replay_buffer_shards_colocated_with_driver",
             "replay_sequence_length"),
    "APEX_DDPG": ("no_local_replay_buffer", "replay_buffer_shards_colocated_with_driver"),
    "DQN": ("before_learn_on_batch", "replay_batch_size", "replay_sequence_length"),
}


def test_the_committed_page_is_the_generated_one():
    page = generator.PAGE
    assert page.exists() and page.read_text() == generator.page(), (
        f"{page.relative_to(ROOT)} is out of date with the code: run `{generator.COMMAND}` and commit the page.")


def test_no_1x_key_is_refused_without_a_reason_unless_it_is_on_the_not_yet_list():
    found = keys_1x.refused_without_reason()
    new = {group: sorted(set(keys) - set(NOT_YET.get(group, ()))) for group, keys in found.items()}
    done = {group: sorted(set(keys) - set(found.get(group, ()))) for group, keys in NOT_YET.items()}
    assert not any(new.values()), (
        f"1.13 keys refused with no reason: {({g: k for g, k in new.items() if k})}. Implement them, accept them "
        "at their no-op values (classic_keys.NO_OP_KEYS), give the reason in keys_1x.REFUSED_KEYS, or add them "
        "to NOT_YET here.")
    assert not any(done.values()), (
        f"NOT_YET lists keys that are no longer refused without a reason: {({g: k for g, k in done.items() if k})}; "
        "take them off NOT_YET.")


def test_every_refused_key_reason_names_a_key_that_is_refused():
    refused = {status.key for name in ["COMMON", *keys_1x.algorithms()] for status in keys_1x.statuses(name)
               if status.status == REFUSED}
    refused |= {f"{section}.{status.key}" for section in ("model", "multiagent")
                for status in keys_1x.sub_key_statuses(section) if status.status == REFUSED}
    stale = sorted(set(keys_1x.REFUSED_KEYS) - refused)
    assert not stale, f"REFUSED_KEYS gives reasons for keys rlstack no longer refuses: {stale}; remove them."


def test_the_key_lists_are_1_13s():
    common = keys_1x.config_1x("COMMON")
    assert (common["num_workers"], common["sample_async"], common["framework"]) == (("2", False), ("False", False),
                                                                                   ("'tf'", False))
    assert common["output_max_file_size"][0] == "64 * 1024 * 1024"
    ppo = keys_1x.config_1x("PPO")
    assert (ppo["sgd_minibatch_size"], ppo["lr"], ppo["num_workers"]) == (("128", False), ("5e-05", False),
                                                                        ("2", False))
    assert ppo["model"] == ("{'vf_share_layers': False}", True)  # merged into MODEL_DEFAULTS
    # Inherited keys come through each base: DQN from SimpleQ, APPO from IMPALA, A2C from A3C.
    assert keys_1x.config_1x("DQN")["target_network_update_freq"] == ("500", False)
    assert keys_1x.config_1x("APPO")["vtrace_clip_rho_threshold"] == ("1.0", False)
    assert keys_1x.config_1x("A2C")["sample_async"] == ("False", False)
    assert keys_1x.config_1x("TD3")["policy_delay"] == ("2", False)
    # How many keys each 1.13 dict literal wrote: a list that lost or gained a key fails here.
    sizes = {name: len(entries) for name, (_, entries) in keys_1x.CONFIGS_1X.items()}
    assert sizes == {"COMMON": 93, "A3C": 13, "A2C": 4, "PPO": 20, "APPO": 32, "ARS": 12, "SAC": 34, "CQL": 14,
                     "DDPG": 40, "TD3": 25, "APEX_DDPG": 15, "SimpleQ": 23, "DQN": 16, "APEX": 16, "ES": 13,
                     "IMPALA": 33, "MARWIL": 16, "BC": 3, "PG": 4}
    assert dict(keys_1x.MODEL_KEYS_1X)["fcnet_hiddens"] == "[256, 256]" and len(keys_1x.MODEL_KEYS_1X) == 38
    assert [key for key, _ in keys_1x.MULTIAGENT_KEYS_1X] == [
        "policies", "policy_map_capacity", "policy_map_cache", "policy_mapping_fn", "policies_to_train",
        "observation_fn", "replay_mode", "count_steps_by"]


def test_every_algorithm_of_rlstack_has_its_1_13_keys():
    assert keys_1x.algorithms() == list(ALGORITHMS), (
        f"no 1.13 keys for {sorted(set(ALGORITHMS) - set(keys_1x.CONFIGS_1X))}: add its DEFAULT_CONFIG's keys to "
        "keys_1x.CONFIGS_1X")


def test_statuses_say_what_to_do_and_follow_rlstacks_tables(monkeypatch):
    status = keys_1x.key_status("PPO", "sgd_minibatch_size")
    assert (status.status, status.differs) == (IMPLEMENTED, False)
    framework = keys_1x.key_status("COMMON", "framework")
    assert (framework.status, framework.differs, framework.rlstack_default) == (IMPLEMENTED, True, "torch")
    assert keys_1x.key_status("PPO", "timesteps_per_iteration").to == ("min_sample_timesteps_per_reporting",)
    assert keys_1x.key_status("PPO", "monitor").to == ("record_env",)
    no_op = keys_1x.key_status("PPO", "simple_optimizer")
    assert (no_op.status, no_op.accepted) == (NO_EFFECT, (True, False)) and no_op.reason
    apex = keys_1x.key_status("APEX", "optimizer")
    assert (apex.status, apex.to) == (RENAMED, ("num_replay_buffer_shards", "max_weight_sync_delay"))
    assert keys_1x.key_status("PPO", "optimizer").accepted == ({},)
    # DQN's iteration length was 1.13's timesteps_per_iteration, copied over the new key.
    assert keys_1x.key_status("DQN", "min_sample_timesteps_per_reporting").set_from == "timesteps_per_iteration"
    assert keys_1x.sub_key_status("model", "lstm_use_prev_action_reward").to == ("lstm_use_prev_action",
                                                                                 "lstm_use_prev_reward")
    timeout = keys_1x.key_status("COMMON", "metrics_episode_collection_timeout_s")
    assert (timeout.status, timeout.accepted) == (NO_EFFECT, None)  # any value
    assert keys_1x.key_status("A2C", "sample_async").status == IMPLEMENTED
    assert keys_1x.key_status("PPO", "sample_async").status == NO_EFFECT
    assert keys_1x.key_status("MARWIL", "use_gae").accepted == (True, False)
    assert keys_1x.sub_key_status("model", "_time_major").accepted == (False,)
    assert keys_1x.sub_key_status("model", "no_final_linear").status == IMPLEMENTED
    assert keys_1x.key_status("COMMON", "fake_sampler").status == NO_EFFECT
    monkeypatch.delitem(classic_keys.NO_OP_KEYS, "fake_sampler")
    assert keys_1x.key_status("COMMON", "fake_sampler").status == REFUSED
    monkeypatch.setitem(keys_1x.REFUSED_KEYS, "fake_sampler", "a reason")
    assert keys_1x.key_status("PPO", "fake_sampler").reason == "a reason"


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_each_status_is_what_the_config_merge_does(name):
    # A key the page calls refused is refused by the trainer's merge; one it accepts at a
    # value is accepted there at that value.
    defaults = get_trainer_class(name).get_default_config()
    for status in keys_1x.statuses(name):
        if status.status == REFUSED:
            with pytest.raises(ConfigError, match=f"Unknown config key '{status.key}'"):
                merge_config(defaults, {status.key: None}, name)
        elif status.status == NO_EFFECT:
            merge_config(defaults, {status.key: 180 if status.accepted is None else status.accepted[0]}, name)
        elif status.status == RENAMED and status.key != "optimizer":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                merged = merge_config(defaults, {status.key: 7}, name)
            assert merged[status.to[0]] == 7, status


def test_the_page_is_in_the_nav_beside_the_other_reference_pages():
    nav = (ROOT / "mkdocs.yml").read_text()
    assert "reference/rllib-1x-keys.md" in nav
