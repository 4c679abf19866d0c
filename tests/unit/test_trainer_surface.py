"""RLlib 1.13's trainer surface: compute_single_action / compute_actions, evaluate(),
weights by policy id, the local worker's policy and env accessors, logger_creator."""

from __future__ import annotations

import json
import warnings

import gymnasium as gym
import numpy as np
import pytest

from rlstack.errors import ConfigError
from rlstack.trainers.ppo import PPOTrainer
from rlstack.trainers.common.result_logger import UnifiedLogger
from tests.helpers.envs import ContinuousEnv

SMALL = {"num_workers": 0, "train_batch_size": 200, "sgd_minibatch_size": 64, "num_sgd_iter": 2,
         "rollout_fragment_length": 200, "model": {"fcnet_hiddens": [16]}, "framework": "torch", "seed": 0}
OBS = np.array([0.01, -0.02, 0.03, 0.04], np.float32)


@pytest.fixture(scope="module")
def cartpole():
    trainer = PPOTrainer(SMALL, "CartPole-v1")
    yield trainer
    trainer.stop()


# ----- compute_single_action ------------------------------------------------------------------

def test_compute_single_action_returns_the_action_or_1_13s_3_tuple(cartpole):
    assert cartpole.compute_single_action(OBS, explore=False) in (0, 1)
    # 1.13 returns (action, state_out, extra_fetches) with full_fetch or a non-empty state.
    for kwargs in ({"full_fetch": True}, {"state": [np.zeros(2, np.float32)]}):
        action, state_out, extras = cartpole.compute_single_action(OBS, explore=False, **kwargs)
        assert action == cartpole.compute_single_action(OBS, explore=False) and state_out == []
        assert extras["action_dist_inputs"].shape == (2,) and np.ndim(extras["vf_preds"]) == 0
        assert extras["action_logp"] == pytest.approx(np.log(np.exp(extras["action_dist_inputs"])[action]
                                                             / np.exp(extras["action_dist_inputs"]).sum()), abs=1e-5)
    assert cartpole.compute_single_action(OBS, state=[], explore=False) in (0, 1)  # an empty state: the action only


def test_compute_single_action_takes_1_13s_arguments(cartpole):
    greedy = cartpole.compute_single_action(OBS, explore=False)
    assert cartpole.compute_single_action(input_dict={"obs": OBS}, explore=False) == greedy
    assert cartpole.compute_single_action(observation=OBS, prev_action=0, prev_reward=1.0, info={}, timestep=3,
                                          episode=None, policy_id="default_policy", explore=False) == greedy
    assert cartpole.compute_action(OBS, explore=False) == greedy  # 1.13's deprecated alias
    with pytest.raises(TypeError):
        cartpole.compute_single_action(OBS, None, False)  # explore is keyword-only, as in 1.13
    with pytest.raises(ValueError, match="needs an observation"):
        cartpole.compute_single_action()
    with pytest.raises(KeyError, match="default_policy"):
        cartpole.compute_single_action(OBS, policy_id="other")
    with pytest.warns(DeprecationWarning, match="unsquash_action"):
        cartpole.compute_single_action(OBS, explore=False, unsquash_actions=True)


def test_box_actions_unsquash_and_clip_as_asked():
    trainer = PPOTrainer(SMALL, ContinuousEnv)  # Box [-2, 2], normalize_actions=True
    obs = np.array([0.9, -0.7], np.float32)
    try:
        raw = trainer.compute_single_action(obs, explore=False, unsquash_action=False)
        assert raw[0] != 0.0
        mapped = trainer.compute_single_action(obs, explore=False)  # default: config["normalize_actions"]
        np.testing.assert_allclose(mapped, -2.0 + (np.clip(raw, -1, 1) + 1.0) * 2.0, rtol=1e-6)
        clipped = trainer.compute_single_action(obs * 50, explore=False, unsquash_action=False, clip_action=True)
        unclipped = trainer.compute_single_action(obs * 50, explore=False, unsquash_action=False)
        np.testing.assert_allclose(clipped, np.clip(unclipped, -2.0, 2.0))
        actions = trainer.compute_actions([obs, obs], explore=False, unsquash_actions=False)
        np.testing.assert_allclose(actions[:, 0], raw[0], rtol=1e-6)
    finally:
        trainer.stop()


def test_compute_actions_dict_in_dict_out_and_full_fetch(cartpole):
    greedy = cartpole.compute_single_action(OBS, explore=False)
    actions = cartpole.compute_actions({"agent_0": OBS, "agent_1": OBS}, explore=False)
    assert actions == {"agent_0": greedy, "agent_1": greedy}
    actions, states, extras = cartpole.compute_actions({"a": OBS, "b": -OBS}, explore=False, full_fetch=True)
    assert set(actions) == {"a", "b"} and states == {"a": [], "b": []}
    assert extras["vf_preds"].shape == (2,) and extras["action_dist_inputs"].shape == (2, 2)
    # rlstack's convenience: a list or batch array in, an array out.
    assert list(cartpole.compute_actions(np.stack([OBS, OBS]), explore=False)) == [greedy, greedy]


def test_policy_compute_single_action_returns_the_3_tuple(cartpole):
    policy = cartpole.get_policy()
    action, state_out, extras = policy.compute_single_action(OBS, explore=False)
    batch_actions, batch_extras = policy.compute_actions(OBS[None], explore=False)
    assert action == batch_actions[0] and state_out == []
    np.testing.assert_allclose(extras["vf_preds"], batch_extras["vf_preds"][0])
    assert policy.compute_single_action(input_dict={"obs": OBS}, explore=False)[0] == action


# ----- evaluate ------------------------------------------------------------------------------

def test_evaluate_returns_1_13s_nested_dict_and_train_reports_the_inner_one():
    trainer = PPOTrainer({**SMALL, "evaluation_interval": 1, "evaluation_duration": 2}, "CartPole-v1")
    try:
        evaluation = trainer.evaluate()
        assert set(evaluation) == {"evaluation"}
        assert evaluation["evaluation"]["episodes_this_iter"] == 2
        assert {"episode_reward_mean", "episode_len_mean", "timesteps_this_iter"} <= set(evaluation["evaluation"])
        result = trainer.train()
        assert result["evaluation"]["episodes_this_iter"] == 2 and "evaluation" not in result["evaluation"]
    finally:
        trainer.stop()


# ----- weights and policies by id ----------------------------------------------------------------

def test_weights_by_policy_id_round_trip(cartpole):
    weights = cartpole.get_weights()
    assert list(weights) == ["default_policy"]
    assert list(cartpole.get_weights(["default_policy"])) == ["default_policy"]
    for call in (lambda: cartpole.get_weights(["pol1"]), lambda: cartpole.set_weights({"pol1": {}}),
                 lambda: cartpole.get_policy("pol1")):
        with pytest.raises(KeyError, match="'pol1'.*default_policy"):
            call()
    zeroed = {"default_policy": {name: np.zeros_like(value) for name, value in weights["default_policy"].items()}}
    try:
        cartpole.set_weights(zeroed)
        _, _, extras = cartpole.compute_single_action(OBS, explore=False, full_fetch=True)
        np.testing.assert_array_equal(extras["action_dist_inputs"], [0.0, 0.0])
    finally:
        cartpole.set_weights(weights)
    _, _, extras = cartpole.compute_single_action(OBS, explore=False, full_fetch=True)
    assert np.abs(extras["action_dist_inputs"]).sum() > 0


class TaskEnv(gym.Env):
    """An env with a task to set, as in 1.13's curriculum example."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config=None):
        self.task = 0

    def set_task(self, task):
        self.task = task

    def reset(self, *, seed=None, options=None):
        return np.zeros(2, np.float32), {}

    def step(self, action):
        return np.zeros(2, np.float32), float(self.task), False, True, {}


def test_local_worker_policy_and_env_accessors():
    trainer = PPOTrainer({**SMALL, "num_envs_per_worker": 2, "env_config": {"level": 1}}, TaskEnv)
    try:
        worker = trainer.workers.local_worker()
        assert worker.get_policy() is trainer.get_policy() is worker.policy_map["default_policy"]
        assert worker.foreach_policy(lambda policy, policy_id: (policy_id, policy is trainer.get_policy())) == [
            ("default_policy", True)]
        assert worker.foreach_trainable_policy(lambda policy, policy_id: policy_id) == ["default_policy"]
        assert trainer.workers.foreach_policy(lambda policy, policy_id: policy_id) == ["default_policy"]
        trainer.workers.foreach_worker(lambda w: w.foreach_env(lambda env: env.set_task(3)))
        assert trainer.workers.foreach_env(lambda env: env.task) == [[3, 3]]
        contexts = worker.foreach_env_with_context(lambda env, ctx: (ctx["level"], ctx.worker_index, ctx.vector_index))
        assert contexts == [(1, 0, 0), (1, 0, 1)]
        assert trainer.workers.foreach_worker_with_index(lambda w, index: index) == [0]
        # The task reaches the episodes: each one-step episode pays the task.
        assert trainer.train()["episode_reward_mean"] == 3.0
    finally:
        trainer.stop()


# ----- logger_creator ----------------------------------------------------------------------------

def test_logger_creator_sets_the_logdir_and_gets_the_results(tmp_path):
    logdir = tmp_path / "my_logs"
    trainer = PPOTrainer(SMALL, "CartPole-v1", logger_creator=lambda cfg: UnifiedLogger(cfg, str(logdir), loggers=None))
    try:
        assert trainer.logdir == str(logdir)
        trainer.train()
        assert trainer.save().startswith(str(logdir))
    finally:
        trainer.stop()
    lines = (logdir / "result.json").read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["training_iteration"] == 1
    assert (logdir / "progress.csv").exists() and (logdir / "params.json").exists()


def test_logger_creator_with_a_logger_of_ones_own(tmp_path):
    class RecordingLogger:
        def __init__(self, config, logdir):
            self.config, self.logdir, self.results, self.closed = config, logdir, [], False

        def on_result(self, result):
            self.results.append(result)

        def close(self):
            self.closed = True

    made = []
    trainer = PPOTrainer(SMALL, "CartPole-v1",
                         logger_creator=lambda cfg: made.append(RecordingLogger(cfg, str(tmp_path))) or made[-1])
    trainer.train()
    trainer.train()
    trainer.stop()
    (logger,) = made
    assert [r["training_iteration"] for r in logger.results] == [1, 2] and logger.closed
    assert logger.config["env"] == "CartPole-v1" and not (tmp_path / "result.json").exists()


class PrefixLogger:
    """A 1.x-style Logger: built with (config, logdir=...), fed on_result, closed at the end."""

    made: list = []

    def __init__(self, config, logdir):
        self.config, self.logdir, self.lines, self.closed = config, logdir, [], False
        PrefixLogger.made.append(self)

    def on_result(self, result):
        self.lines.append(f"{self.config['prefix']}: {result['training_iteration']}")

    def close(self):
        self.closed = True


def test_logger_config_type_builds_the_standalone_trainers_logger(tmp_path):
    PrefixLogger.made.clear()
    trainer = PPOTrainer({**SMALL, "logger_config": {"type": PrefixLogger, "prefix": "ABC",
                                                     "logdir": str(tmp_path / "abc")}}, "CartPole-v1")
    trainer.train()
    trainer.stop()
    (logger,) = PrefixLogger.made
    # 1.13 built the class with logger_config's other keys and the logdir.
    assert logger.config == {"prefix": "ABC"} and logger.logdir == str(tmp_path / "abc") == trainer.logdir
    assert logger.lines == ["ABC: 1"] and logger.closed
    with pytest.raises(ConfigError, match="logger_config must be None or a dict"):
        PPOTrainer({**SMALL, "logger_config": {"type": 3}}, "CartPole-v1")


def test_a_checkpoint_naming_a_shared_module_at_its_former_path_still_loads(tmp_path):
    from rlstack.trainers.common import checkpoint_files as ckpt

    # rlstack/trainers/result_logger.py is rlstack/trainers/common/result_logger.py now; a
    # checkpoint keeps the import path its config was given.
    assert ckpt.with_moved_paths({"a": ["rlstack.trainers.result_logger:UnifiedLogger"],
                                  "b": "rlstack.trainers.checkpoint.to_jsonable", "c": "rlstack.trainers.ppo:X"}) == {
        "a": ["rlstack.trainers.common.result_logger:UnifiedLogger"],
        "b": "rlstack.trainers.common.checkpoint_files.to_jsonable", "c": "rlstack.trainers.ppo:X"}
    trainer = PPOTrainer({**SMALL, "logger_config": {"type": "rlstack.trainers.common.result_logger.UnifiedLogger",
                                                     "logdir": str(tmp_path / "logs")}}, "CartPole-v1")
    saved = trainer.save(str(tmp_path / "new"))
    trainer.stop()
    metadata, arrays = ckpt.read_checkpoint(saved)
    metadata["config"]["logger_config"]["type"] = "rlstack.trainers.result_logger.UnifiedLogger"
    (tmp_path / "old").mkdir()
    ckpt.write_checkpoint(tmp_path / "old", {k: v for k, v in metadata.items() if k != ckpt.METADATA_HASH_KEY},
                          arrays)
    restored = PPOTrainer.from_checkpoint(str(tmp_path / "old"))
    try:
        assert restored.config["logger_config"]["type"] == "rlstack.trainers.common.result_logger.UnifiedLogger"
        assert restored.logdir == str(tmp_path / "logs")
    finally:
        restored.stop()


def test_logger_creator_and_1_13_arguments_are_checked(tmp_path):
    with pytest.raises(ConfigError, match="without a logdir attribute"):
        PPOTrainer(SMALL, "CartPole-v1", logger_creator=lambda cfg: object())
    with pytest.raises(ConfigError, match="remote_checkpoint_dir"):
        PPOTrainer(SMALL, "CartPole-v1", remote_checkpoint_dir="s3://bucket/x")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        PPOTrainer(SMALL, "CartPole-v1", remote_checkpoint_dir=None, sync_function_tpl=None).stop()


@pytest.mark.parametrize("value", [0, -1, "5", True])
def test_placement_timeout_must_be_positive_seconds(value):
    with pytest.raises(ConfigError, match="placement_timeout_s must be a number of seconds > 0"):
        PPOTrainer({**SMALL, "placement_timeout_s": value}, "CartPole-v1")


# ----- learns_asynchronously ---------------------------------------------------------------------
@pytest.mark.parametrize("run, config, expected", [
    ("PPO", {"num_workers": 2}, False),
    ("DQN", {}, False),
    ("SAC", {}, False),
    ("A3C", {"num_workers": 1}, False),  # one worker waits for the weights its gradients made
    ("A3C", {}, True),  # 1.13's default: 2 workers whose gradients arrive in any order
    ("APEX", {}, True),
    ("APEX_DDPG", {"num_workers": 3}, True),
    ("IMPALA", {"num_workers": 2}, True),
])
def test_learns_asynchronously_says_which_runs_depend_on_their_speed(run, config, expected):
    from rlstack.trainers.common.registry import get_trainer_class

    assert get_trainer_class(run).learns_asynchronously(config) is expected
