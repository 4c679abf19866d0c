"""1.13 names that user code imports beside the trainers: each exists at its renamed path
and behaves as 1.13 documented it."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from rlstack.sample_batch import SampleBatch


def test_policy_at_the_package_root():
    import rlstack
    from rlstack.policies.policy import Policy

    assert rlstack.Policy is Policy and "Policy" in rlstack.__all__


def test_with_common_config_merges_sub_dicts_and_leaves_common_config_alone():
    from rlstack.trainers.trainer import COMMON_CONFIG, with_common_config

    config = with_common_config({"my_key": 3, "model": {"fcnet_hiddens": [8]}})
    assert config["my_key"] == 3 and config["model"]["fcnet_hiddens"] == [8]
    assert config["model"]["fcnet_activation"] == COMMON_CONFIG["model"]["fcnet_activation"]
    assert "my_key" not in COMMON_CONFIG and COMMON_CONFIG["model"]["fcnet_hiddens"] != [8]
    from rlstack.trainers import with_common_config as from_the_package  # 1.13's ray.rllib.agents path

    assert from_the_package is with_common_config


def test_1_13_trainer_callbacks_and_registry_paths_give_the_objects_they_re_export():
    import importlib

    for path, home in (("rlstack.trainers.trainer", "rlstack.trainers.common.trainer"),
                       ("rlstack.trainers.registry", "rlstack.trainers.common.registry"),
                       ("rlstack.trainers.callbacks", "rlstack.evaluation.callbacks")):
        module, source = importlib.import_module(path), importlib.import_module(home)
        assert module.__all__ and all(getattr(module, name) is getattr(source, name) for name in module.__all__)
    from rlstack.trainers.registry import get_trainer_class
    from rlstack.trainers.trainer import COMMON_CONFIG, DEFAULT_POLICY_ID, Trainer, with_common_config  # noqa: F401

    assert issubclass(get_trainer_class("PPO"), Trainer)


def test_task_settable_env_and_env_state():
    from rlstack.env.apis.task_settable_env import TaskSettableEnv
    from rlstack.env.multi_agent_env import ENV_STATE

    class Levels(TaskSettableEnv):
        def __init__(self):
            self.level = 0

        def set_task(self, task):
            self.level = task

        def get_task(self):
            return self.level

    env = Levels()
    env.set_task(2)
    assert env.get_task() == 2 and isinstance(env, gym.Env) and ENV_STATE == "state"
    with pytest.raises(NotImplementedError, match="Levels.sample_tasks"):
        env.sample_tasks(3)


def test_compute_advantages_1_13_signature_and_layout():
    from rlstack.evaluation.postprocessing import Postprocessing, compute_advantages

    rewards = np.array([1.0, 0.0, 2.0], np.float32)
    vf_preds = np.array([0.5, 0.25, 1.0], np.float32)
    gamma, lam, last_r = 0.9, 0.8, 3.0
    batch = compute_advantages(SampleBatch({"rewards": rewards, "vf_preds": vf_preds}), last_r, gamma, lam)
    values = np.append(vf_preds, last_r)
    deltas = rewards + gamma * values[1:] - values[:-1]
    expected = np.array([sum((gamma * lam) ** k * deltas[t + k] for k in range(3 - t)) for t in range(3)])
    np.testing.assert_allclose(batch[Postprocessing.ADVANTAGES], expected, rtol=1e-6)
    np.testing.assert_allclose(batch[Postprocessing.VALUE_TARGETS], expected + vf_preds, rtol=1e-6)

    plain = compute_advantages(SampleBatch({"rewards": rewards}), 0.0, 0.5, use_gae=False, use_critic=False)
    np.testing.assert_allclose(plain["advantages"], [1.5, 1.0, 2.0])
    assert plain["value_targets"].tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="use_critic=True"):
        compute_advantages(SampleBatch({"rewards": rewards}), 0.0, use_gae=True, use_critic=False)


def test_one_hot_of_discrete_and_multi_discrete(framework):
    if framework == "torch":
        import torch

        from rlstack.utils.torch_utils import one_hot

        as_input = torch.as_tensor
    else:
        from rlstack.utils.tf_utils import one_hot

        as_input = np.asarray
    assert one_hot(as_input(np.array([0, 2])), gym.spaces.Discrete(3)).numpy().tolist() == [[1, 0, 0], [0, 0, 1]]
    encoded = one_hot(as_input(np.array([[1, 0]])), gym.spaces.MultiDiscrete([2, 3])).numpy()
    assert encoded.tolist() == [[0, 1, 1, 0, 0]]
    with pytest.raises(ValueError, match="Discrete or MultiDiscrete"):
        one_hot(as_input(np.zeros(2)), gym.spaces.Box(0, 1, (2,)))


class _ClassicCounter(gym.Env):
    """1.x API: obs-only reset, 4-tuple step; done after ``length`` steps."""

    observation_space = gym.spaces.Box(-1.0, 1000.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, length):
        self.length, self.t = length, 0

    def reset(self):
        self.t = 0
        return np.zeros(1, np.float32)

    def step(self, action):
        self.t += 1
        return np.array([self.t], np.float32), 1.0, self.t >= self.length, {}


def _classic_vector_env_class():
    from rlstack.env.vector_env import VectorEnv

    class ClassicVector(VectorEnv):
        # Written to 1.13's VectorEnv API, as 1.13's examples/env/mock_env.py is.
        def __init__(self, lengths):
            self.subs = [_ClassicCounter(n) for n in lengths]
            super().__init__(observation_space=self.subs[0].observation_space,
                             action_space=self.subs[0].action_space, num_envs=len(lengths))
            self.resets_at = []

        def vector_reset(self):
            return [env.reset() for env in self.subs]

        def reset_at(self, index=None):
            self.resets_at.append(index)
            return self.subs[index].reset()

        def vector_step(self, actions):
            results = [env.step(a) for env, a in zip(self.subs, actions)]
            return tuple(list(column) for column in zip(*results))

        def get_sub_environments(self):
            return self.subs

    return ClassicVector


def test_vector_env_written_to_the_1_13_api_is_stepped_through_its_own_methods():
    venv = _classic_vector_env_class()([2, 3])
    assert [float(o[0]) for o in venv.reset()] == [0.0, 0.0]
    obs, rewards, terminateds, truncateds, final_obs, _ = venv.step([0, 1])
    assert not terminateds.any() and final_obs == {}
    obs, rewards, terminateds, truncateds, final_obs, _ = venv.step([0, 1])
    # Sub-env 0 ended: its final observation is kept and it was reset with reset_at.
    assert terminateds.tolist() == [True, False] and not truncateds.any()
    assert float(final_obs[0][0]) == 2.0 and float(obs[0][0]) == 0.0 and float(obs[1][0]) == 2.0
    assert venv.resets_at == [0] and rewards.tolist() == [1.0, 1.0]


def test_vector_env_positional_1_13_constructor_and_vectorize_gym_envs():
    from rlstack.env.vector_env import VectorEnv

    space = gym.spaces.Discrete(3)
    classic = VectorEnv(space, gym.spaces.Discrete(2), 4)
    assert classic.observation_space is space and classic.num_envs == 4
    with pytest.raises(NotImplementedError, match="vector_step"):
        classic.vector_step([0] * 4)
    venv = VectorEnv.vectorize_gym_envs(make_env=lambda i: gym.make("CartPole-v1"),
                                        existing_envs=[gym.make("CartPole-v1")], num_envs=2)
    assert len(venv.get_sub_environments()) == 2 and len(venv.vector_reset()) == 2


def test_trainer_runs_a_custom_1_13_vector_env_from_the_creator():
    from rlstack.trainers.pg import PGTrainer

    vector_class = _classic_vector_env_class()
    trainer = PGTrainer({"num_workers": 0, "train_batch_size": 60, "rollout_fragment_length": 30,
                         "num_envs_per_worker": 5, "model": {"fcnet_hiddens": [8]}},
                        env=lambda config: vector_class([3, 5]))
    try:
        result = trainer.train()
        # The creator's vector counts (2 sub-envs), not num_envs_per_worker.
        assert trainer.workers.local_worker().async_env.num_envs == 2
        assert result["episodes_this_iter"] > 0 and 3.0 <= result["episode_reward_mean"] <= 5.0
    finally:
        trainer.stop()


def test_convert_to_base_env_vectorizes_and_keeps_a_base_env():
    from rlstack.env.base_env import BaseEnv, convert_to_base_env

    base = convert_to_base_env(gym.make("CartPole-v1"), make_env=lambda i: gym.make("CartPole-v1"), num_envs=3)
    assert isinstance(base, BaseEnv) and len(base.get_sub_environments()) == 3
    assert convert_to_base_env(base) is base
    with pytest.raises(NotImplementedError, match="remote_worker_envs=True"):
        convert_to_base_env(gym.make("CartPole-v1"), remote_envs=True)


def test_summarize_episodes_and_collect_metrics_give_1_13_keys():
    from rlstack.evaluation.metrics import EpisodeStats, collect_episodes, collect_metrics, summarize_episodes

    episodes = [EpisodeStats(10.0, 10, {"x": 1.0}), EpisodeStats(20.0, 20, {"x": 3.0})]
    metrics = summarize_episodes(episodes, new_episodes=episodes[1:])
    assert metrics["episode_reward_mean"] == 15.0 and metrics["episodes_this_iter"] == 1
    assert metrics["custom_metrics"]["x_mean"] == 2.0 and metrics["hist_stats"]["episode_lengths"] == [10, 20]
    assert summarize_episodes(episodes, keep_custom_metrics=True)["custom_metrics"] == {"x": [1.0, 3.0]}

    class Worker:
        def get_metrics(self):
            return list(episodes)

    found, pending = collect_episodes(Worker())
    assert found == episodes and pending == []
    assert collect_metrics(local_worker=Worker())["episode_reward_max"] == 20.0


def test_algorithm_packages_export_their_policy_classes_without_importing_tf():
    import subprocess
    import sys

    code = ("import sys, rlstack.trainers.ppo as ppo, rlstack.trainers.dqn as dqn;"
            "assert ppo.PPOTorchPolicy.__name__ == 'PPOTorchPolicy' and 'PPOTFPolicy' in dir(ppo);"
            "assert dqn.DQNTorchPolicy.framework == 'torch';"
            "assert 'tensorflow' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_save_to_object_round_trip_and_get_global_worker():
    from rlstack.evaluation.rollout_worker import get_global_worker
    from rlstack.trainers.pg import PGTrainer

    config = {"num_workers": 0, "train_batch_size": 40, "rollout_fragment_length": 40, "seed": 1,
              "model": {"fcnet_hiddens": [8]}}
    trainer = PGTrainer(config, env="CartPole-v1")
    other = PGTrainer(config, env="CartPole-v1")
    try:
        assert get_global_worker() is other.workers.local_worker()
        trainer.train()
        blob = trainer.save_to_object()
        assert isinstance(blob, bytes)
        other.restore_from_object(blob)
        obs = np.zeros(4, np.float32)
        assert other.compute_single_action(obs, explore=False) == trainer.compute_single_action(obs, explore=False)
        assert other.iteration == trainer.iteration == 1
        from rlstack.errors import CheckpointError

        with pytest.raises(CheckpointError, match="save_to_object"):
            other.restore_from_object(b"not an archive")
    finally:
        trainer.stop()
        other.stop()


def test_env_task_fn_sets_each_task_settable_sub_env_after_an_iteration():
    from rlstack.env.apis.task_settable_env import TaskSettableEnv
    from rlstack.trainers.pg import PGTrainer

    class Levels(TaskSettableEnv):
        observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
        action_space = gym.spaces.Discrete(2)

        def __init__(self, config):
            self.level = 0

        def reset(self, *, seed=None, options=None):
            return np.zeros(1, np.float32), {}

        def step(self, action):
            return np.zeros(1, np.float32), 1.0, True, False, {}

        def get_task(self):
            return self.level

        def set_task(self, task):
            self.level = task

    seen = []

    def next_level(result, env, context):
        seen.append((result["training_iteration"] if "training_iteration" in result else None,
                     context.vector_index))
        return env.get_task() + 1

    trainer = PGTrainer({"num_workers": 0, "num_envs_per_worker": 2, "train_batch_size": 10,
                         "rollout_fragment_length": 5, "env_task_fn": next_level,
                         "model": {"fcnet_hiddens": [4]}}, env=Levels)
    try:
        trainer.train()
        trainer.train()
        levels = trainer.workers.local_worker().foreach_env(lambda env: env.get_task())
        assert levels == [2, 2] and sorted(index for _, index in seen) == [0, 0, 1, 1]
    finally:
        trainer.stop()


def test_soft_horizon_ends_the_record_but_not_the_env_episode():
    from rlstack.env.vector_env import VectorEnv

    hard = VectorEnv(lambda i: _LegacyCounterEnv(100), 1, horizon=2)
    soft = VectorEnv(lambda i: _LegacyCounterEnv(100), 1, horizon=2, soft_horizon=True)
    for venv in (hard, soft):
        venv.reset()
        venv.step([0])
    _, _, terminated, truncated, final_obs, _ = hard.step([0])
    assert truncated.tolist() == [True] and not terminated.any() and float(final_obs[0][0]) == 2.0
    obs, _, terminated, truncated, final_obs, _ = soft.step([0])
    # The record is cut as a truncation, and the env goes on from where it was.
    assert truncated.tolist() == [True] and float(final_obs[0][0]) == 2.0 and float(obs[0][0]) == 2.0
    obs, _, _, truncated, _, _ = soft.step([0])
    assert float(obs[0][0]) == 3.0 and not truncated.any()


class _LegacyCounterEnv(gym.Env):
    observation_space = gym.spaces.Box(-1.0, 1000.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, length):
        self.length, self.t = length, 0

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.array([self.t], np.float32), 1.0, self.t >= self.length, False, {}


def test_create_env_on_driver_gives_the_local_worker_envs(ray_local):
    from rlstack.trainers.pg import PGTrainer

    config = {"num_workers": 1, "train_batch_size": 50, "rollout_fragment_length": 50,
              "model": {"fcnet_hiddens": [4]}}
    plain = PGTrainer(config, env="CartPole-v1")
    try:
        assert plain.workers.local_worker().foreach_env(lambda env: 1) == []
    finally:
        plain.stop()
    trainer = PGTrainer({**config, "create_env_on_driver": True}, env="CartPole-v1")
    try:
        assert trainer.workers.local_worker().foreach_env(lambda env: 1) == [1]
    finally:
        trainer.stop()


class _PaintedCorridor(gym.Env):
    """1.x API, rendering with 1.x's render(mode=...)."""

    observation_space = gym.spaces.Box(0.0, 10.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)
    metadata = {"render.modes": ["rgb_array"]}

    def __init__(self, config=None):
        self.t = 0
        self.renders = 0

    def reset(self):
        self.t = 0
        return np.zeros(1, np.float32)

    def step(self, action):
        self.t += 1
        return np.array([self.t], np.float32), 1.0, self.t >= 3, {}

    def render(self, mode="human"):
        self.renders += 1
        return np.full((16, 16, 3), 40 * self.t, np.uint8)


def test_record_env_writes_each_episode_under_the_logdir_and_render_env_renders(tmp_path):
    pytest.importorskip("moviepy")
    from rlstack.trainers.pg import PGTrainer

    trainer = PGTrainer({"num_workers": 0, "train_batch_size": 9, "rollout_fragment_length": 9,
                         "record_env": "clips", "model": {"fcnet_hiddens": [4]}}, env=_PaintedCorridor)
    try:
        trainer.train()
        videos = sorted(p.name for p in (Path(trainer.logdir) / "clips").iterdir())
        assert videos[:3] == ["worker-0-env-0-episode-0.mp4", "worker-0-env-0-episode-1.mp4",
                              "worker-0-env-0-episode-2.mp4"]
    finally:
        trainer.stop()
    trainer = PGTrainer({"num_workers": 0, "train_batch_size": 9, "rollout_fragment_length": 9,
                         "render_env": True, "model": {"fcnet_hiddens": [4]}}, env=_PaintedCorridor)
    try:
        trainer.train()
        # After each reset and each step of the sampled episodes.
        assert trainer.workers.local_worker().foreach_env(lambda env: env.renders)[0] >= 9
    finally:
        trainer.stop()


def test_1_x_multi_agent_env_without_seed_in_reset_and_with_four_dicts_from_step():
    from rlstack.env.multi_agent_env import MultiAgentEnv
    from rlstack.env.multi_agent_vector_env import MultiAgentVectorEnv

    class OldGame(MultiAgentEnv):
        observation_space = gym.spaces.Discrete(3)
        action_space = gym.spaces.Discrete(2)

        def __init__(self):
            super().__init__()
            self.t, self.seeded = 0, None

        def seed(self, seed=None):
            self.seeded = seed

        def reset(self):
            self.t = 0
            return {"a": 0, "b": 0}

        def step(self, action_dict):
            self.t += 1
            done = self.t >= 2
            return {"a": self.t, "b": self.t}, {"a": 1.0, "b": 2.0}, {"__all__": done}, {}

    venv = MultiAgentVectorEnv(lambda i: OldGame(), 1, seeds=[7])
    assert venv.reset() == [{"a": 0, "b": 0}] and venv.envs[0].seeded == 7
    venv.step([{"a": 0, "b": 1}])
    obs, rewards, terminateds, truncateds, final_obs, _ = venv.step([{"a": 0, "b": 1}])
    assert terminateds[0]["__all__"] and final_obs[0] == {"a": 2, "b": 2} and obs[0] == {"a": 0, "b": 0}


class _CountingFilter:
    """A classic custom filter: subtracts the mean of everything the copies saw."""

    def __init__(self, shape, total=0.0, count=0, buffer=(0.0, 0)):
        self.shape, self.total, self.count, self.buffer = shape, total, count, buffer

    def __call__(self, x, update=True):
        x = np.asarray(x)
        if update:
            self.buffer = (self.buffer[0] + float(x.sum()), self.buffer[1] + x.size)
        return x - (self.total / self.count if self.count else 0.0)

    def copy(self):
        return _CountingFilter(self.shape, self.total, self.count, self.buffer)

    def reset_buffer(self):
        self.buffer = (0.0, 0)

    def apply_changes(self, other, with_buffer=False):
        self.total, self.count = self.total + other.buffer[0], self.count + other.buffer[1]

    def as_serializable(self):
        return self.copy()

    def sync(self, other):
        self.total, self.count = other.total, other.count


def test_classic_custom_observation_filter_is_synced_from_the_workers(ray_local, tmp_path):
    from rlstack.trainers.pg import PGTrainer
    from rlstack.utils.filter import Filter  # 1.13's base class path

    assert callable(Filter.clear_buffer)
    trainer = PGTrainer({"num_workers": 1, "train_batch_size": 40, "rollout_fragment_length": 40,
                         "observation_filter": lambda shape: _CountingFilter(shape),
                         "model": {"fcnet_hiddens": [4]}}, env="CartPole-v1")
    try:
        trainer.train()
        local = trainer.workers.local_worker().filter.inner
        # The remote worker's 40 steps (4 numbers each, and the observation after the
        # last) reached the driver's copy; the driver's own copy saw nothing.
        assert local.count == 41 * 4
        trainer.save(str(tmp_path / "checkpoint"))  # the filter object is not written into it
    finally:
        trainer.stop()


def test_custom_eval_function_replaces_the_built_in_evaluation():
    from rlstack.evaluation.metrics import collect_episodes, summarize_episodes
    from rlstack.trainers.pg import PGTrainer

    calls = []

    def my_eval(trainer, eval_workers):
        calls.append(eval_workers)
        eval_workers.local_worker().sample()
        episodes, _ = collect_episodes(eval_workers.local_worker())
        return {**summarize_episodes(episodes), "foo": 1}

    trainer = PGTrainer({"num_workers": 0, "train_batch_size": 50, "rollout_fragment_length": 50,
                         "evaluation_interval": 1, "custom_eval_function": my_eval,
                         "evaluation_config": {"batch_mode": "complete_episodes"},
                         "model": {"fcnet_hiddens": [4]}}, env="CartPole-v1")
    try:
        result = trainer.train()
        assert result["evaluation"]["foo"] == 1 and result["evaluation"]["episodes_this_iter"] >= 1
        assert calls == [trainer.evaluation_workers]
        assert trainer.workers.local_worker().policy_config is trainer.workers.local_worker().config
    finally:
        trainer.stop()


def test_default_resource_request_ignores_a_function_trainables_own_keys():
    from rlstack.trainers.ppo import PPOTrainer

    request = PPOTrainer.default_resource_request({"train-iterations": 3, "num_workers": 1})
    assert request.required_resources["CPU"] == 2


def _q_model_class(framework):
    """A 1.13-style custom Q-model: an embedding in forward(), the Q-head from the base."""
    if framework == "torch":
        from rlstack.models.torch.fcnet import FullyConnectedNetwork as FC
        from rlstack.trainers.dqn.dqn_torch_model import DQNTorchModel as Base
    else:
        from rlstack.models.tf.fcnet import FullyConnectedNetwork as FC
        from rlstack.trainers.dqn.distributional_q_tf_model import DistributionalQTFModel as Base

    class EmbeddingQModel(Base):
        def __init__(self, obs_space, action_space, num_outputs, model_config, name, **kw):
            super().__init__(obs_space, action_space, num_outputs, model_config, name, **kw)
            self.embed = FC(obs_space, action_space, num_outputs, model_config, name + "_embed")
            self.head_keys = kw

        def forward(self, input_dict, state, seq_lens):
            return self.embed(input_dict)[0], state

    return EmbeddingQModel


def test_dqn_q_model_bases_take_the_dqn_head_keys_and_learn(framework):
    from rlstack.trainers.dqn import DQNTrainer

    trainer = DQNTrainer({"framework": framework, "num_workers": 0, "hiddens": [16], "dueling": True,
                          "model": {"custom_model": _q_model_class(framework), "fcnet_hiddens": [32]},
                          "learning_starts": 100, "train_batch_size": 32, "rollout_fragment_length": 4,
                          "min_sample_timesteps_per_reporting": 200}, env="CartPole-v1")
    try:
        model = trainer.get_policy().model
        assert model.head_keys["q_hiddens"] == (16,) and model.head_keys["dueling"] is True
        assert model.num_outputs == 32  # the embedding: the last of fcnet_hiddens, as in 1.13
        before = {k: np.copy(v) for k, v in trainer.get_policy().get_weights().items()}
        trainer.train()
        after = trainer.get_policy().get_weights()
        changed = [k for k in before if not np.allclose(before[k], after[k])]
        assert any("advantage" in k for k in changed) and any("value_module" in k or "value" in k for k in changed)
    finally:
        trainer.stop()
    from rlstack.errors import ConfigError

    with pytest.raises(ConfigError, match="num_atoms=51"):
        DQNTrainer({"framework": framework, "num_workers": 0, "num_atoms": 51,
                    "model": {"custom_model": _q_model_class(framework)}}, env="CartPole-v1")


def test_a_1_13_custom_trainer_with_its_own_defaults_and_training_iteration():
    from rlstack.execution.rollout_ops import synchronous_parallel_sample
    from rlstack.policies.policy import Policy
    from rlstack.trainers.trainer import Trainer, with_common_config

    class RandomPolicy(Policy):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.exploration = self._create_exploration()

        def compute_actions(self, obs_batch, state_batches=None, **kwargs):
            return [self.action_space.sample() for _ in obs_batch], [], {}

    defaults = with_common_config({"_disable_execution_plan_api": True, "my_rounds": 2})

    class RandomTrainer(Trainer):
        @classmethod
        def get_default_config(cls):
            return defaults

        def get_default_policy_class(self, config):
            return RandomPolicy

        def training_iteration(self):
            for _ in range(self.config["my_rounds"]):
                for batch in synchronous_parallel_sample(worker_set=self.workers, concat=False):
                    self.count_sampled(batch)
            return {}

    trainer = RandomTrainer({"rollout_fragment_length": 100}, env="CartPole-v1")
    try:
        result = trainer.train()
        # 2 rounds of one 100-step fragment from each of the 2 default workers; a random
        # CartPole episode is ~22 steps, so 200 steps on a worker end one all but surely
        # (40 steps left every episode open now and then).
        assert result["timesteps_total"] == 400 and result["episodes_this_iter"] >= 1
        assert trainer.get_policy().exploration.config == trainer.config["exploration_config"]
    finally:
        trainer.stop()


def test_ray_tune_is_an_attribute_of_ray_once_rlstack_is_imported():
    import subprocess
    import sys

    code = ("import sys, rlstack.trainers.ppo as ppo, ray; assert 'ray.tune' not in sys.modules;"
            "assert callable(ray.tune.run) and 'ray.tune' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_model_catalog_preprocessor_for_a_space_encodes_as_policies_do():
    from rlstack.models import ModelCatalog

    space = gym.spaces.Dict({"a": gym.spaces.Discrete(3), "b": gym.spaces.Box(0.0, 1.0, (2,))})
    preprocessor = ModelCatalog.get_preprocessor_for_space(space)
    assert preprocessor.size == 5 and preprocessor.shape == (5,)
    assert preprocessor.transform({"a": 1, "b": [0.5, 0.25]}).tolist() == [0.0, 1.0, 0.0, 0.5, 0.25]


def test_evaluation_parallel_to_training_evaluates_beside_the_training_step(ray_local):
    from rlstack.errors import ConfigError
    from rlstack.trainers.pg import PGTrainer

    base = {"num_workers": 0, "train_batch_size": 200, "rollout_fragment_length": 200, "evaluation_interval": 1,
            "evaluation_num_workers": 1, "evaluation_parallel_to_training": True,
            "model": {"fcnet_hiddens": [4]}}
    trainer = PGTrainer({**base, "evaluation_duration": "auto"}, env="CartPole-v1")
    try:
        for _ in range(2):
            evaluation = trainer.train()["evaluation"]
            # "auto": rounds of one episode per evaluation worker while the step trained.
            assert evaluation["episodes_this_iter"] >= 1 and evaluation["episode_reward_mean"] > 0
    finally:
        trainer.stop()
    trainer = PGTrainer({**base, "evaluation_duration": 3}, env="CartPole-v1")
    try:
        assert trainer.train()["evaluation"]["episodes_this_iter"] == 3
    finally:
        trainer.stop()
    with pytest.raises(ConfigError, match="evaluation_num_workers >= 1"):
        PGTrainer.merge_and_validate({**base, "evaluation_num_workers": 0})
    with pytest.raises(ConfigError, match="'auto' with evaluation_parallel_to_training=True"):
        PGTrainer.merge_and_validate({**base, "evaluation_parallel_to_training": False, "evaluation_duration": "auto"})


def test_an_input_registered_with_tune_by_name_is_read(tmp_path):
    from ray.tune.registry import register_input

    from rlstack.offline.input_reader import InputReader
    from rlstack.trainers.marwil import BCTrainer

    class OneBatch(InputReader):
        def __init__(self, ioctx):
            self.ioctx = ioctx

        def next(self):
            n = 20
            return SampleBatch({"obs": np.zeros((n, 4), np.float32), "actions": np.zeros(n, np.int64),
                                "rewards": np.ones(n, np.float32), "terminateds": np.arange(n) % 10 == 9,
                                "truncateds": np.zeros(n, bool), "eps_id": np.arange(n) // 10,
                                "new_obs": np.zeros((n, 4), np.float32)})

    register_input("my_reader", lambda ioctx: OneBatch(ioctx))
    trainer = BCTrainer({"input": "my_reader", "num_workers": 0, "train_batch_size": 20,
                         "model": {"fcnet_hiddens": [4]}}, env="CartPole-v1")
    try:
        assert isinstance(trainer.workers.local_worker().input_reader, OneBatch)
        assert trainer.train()["info"]["num_env_steps_trained"] >= 20
    finally:
        trainer.stop()


def test_a_1_13_trainable_rlstack_lacks_is_named_by_tune_lookup():
    import rlstack  # noqa: F401 - installs rlstack's names in Tune's lookup
    from ray.tune.registry import get_trainable_cls

    from rlstack.errors import ConfigError

    with pytest.raises(ConfigError, match="'RNNSAC': RNNSAC .recurrent SAC. is RLlib 1.13's and not in rlstack; "
                                          "rlstack has .*PPO"):
        get_trainable_cls("RNNSAC")
    assert get_trainable_cls("PPO").__name__ == "PPOTrainer"


def test_a_hand_written_policy_has_1_13s_view_requirements_record():
    from rlstack.policies.policy import Policy
    from rlstack.policies.view_requirement import ViewRequirement

    class Heuristic(Policy):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.view_requirements.update({"state_in_0": ViewRequirement("state_out_0", shift=-1)})

        def compute_actions(self, obs_batch, state_batches=None, **kwargs):
            return [0 for _ in obs_batch], [], {}

    policy = Heuristic(gym.spaces.Discrete(3), gym.spaces.Discrete(3), {})
    assert policy.view_requirements["state_in_0"].data_col == "state_out_0"


def test_get_model_v2_with_a_model_interface_wraps_the_default_model_as_1_13_did():
    # 1.13's custom_model_api: an interface class adds a dueling Q-head over the default
    # network built without its output layer (num_outputs=None).
    import torch
    from torch import nn

    from rlstack.models.catalog import MODEL_DEFAULTS, ModelCatalog
    from rlstack.models.torch.misc import SlimFC
    from rlstack.models.torch.torch_modelv2 import TorchModelV2

    class DuelingHead(TorchModelV2):
        def __init__(self, obs_space, action_space, num_outputs, model_config, name):
            nn.Module.__init__(self)
            super().__init__(obs_space, action_space, None, model_config, name)
            self.A = SlimFC(in_size=self.num_outputs, out_size=num_outputs)
            self.V = SlimFC(in_size=self.num_outputs, out_size=1)

        def get_q_values(self, features):
            a = self.A(features)
            return self.V(features) + a - a.mean(1, keepdim=True)

    model = ModelCatalog.get_model_v2(gym.spaces.Box(-1.0, 1.0, (3,)), gym.spaces.Discrete(3), 3, MODEL_DEFAULTS,
                                      framework="torch", model_interface=DuelingHead, name="dueling")
    assert isinstance(model, DuelingHead)
    features, _ = model(input_dict=SampleBatch(obs=torch.zeros(10, 3)))
    assert tuple(features.shape) == (10, MODEL_DEFAULTS["fcnet_hiddens"][-1])
    assert tuple(model.get_q_values(features).shape) == (10, 3)
    assert {name.split(".")[0] for name, _ in model.named_parameters()} >= {"A", "V"}


def test_a_model_that_reads_a_window_of_past_observations_fails_when_built():
    from rlstack.errors import ConfigError
    from rlstack.models.torch.torch_modelv2 import TorchModelV2
    from rlstack.policies.view_requirement import ViewRequirement
    from rlstack.trainers.pg import PGTrainer
    from torch import nn

    class FrameWindow(TorchModelV2, nn.Module):
        def __init__(self, obs_space, action_space, num_outputs, model_config, name):
            TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name)
            nn.Module.__init__(self)
            self.view_requirements["prev_n_obs"] = ViewRequirement(data_col="obs", shift="-3:0", space=obs_space)
            self.view_requirements["state_in_0"] = ViewRequirement("state_out_0", shift=-1)  # built: fine
            self.head = nn.Linear(4, num_outputs)

    with pytest.raises(ConfigError, match=r"FrameWindow declares the view 'prev_n_obs' = 'obs' at shift '-3:0'"):
        PGTrainer(config={"framework": "torch", "num_workers": 0, "model": {"custom_model": FrameWindow}},
                  env="CartPole-v1")


def test_rollout_worker_built_with_1_13_keywords_for_a_custom_workflow():
    from rlstack.evaluation.rollout_worker import RolloutWorker
    from rlstack.policies.policy import Policy

    class Constant(Policy):
        def __init__(self, observation_space, action_space, config):
            super().__init__(observation_space, action_space, config)
            self.w = 1.0

        def compute_actions(self, obs_batch, state_batches=None, prev_action_batch=None, prev_reward_batch=None,
                            info_batch=None, episodes=None, **kwargs):
            return np.zeros(len(obs_batch), dtype=np.int64), [], {}

        def learn_on_batch(self, samples):
            return {}

        def get_weights(self):
            return {"w": self.w}

        def set_weights(self, weights):
            self.w = weights["w"]

    worker = RolloutWorker(env_creator=lambda ctx: gym.make("CartPole-v1"), policy=Constant,
                           rollout_fragment_length=30, num_envs=2)
    batch = worker.sample()
    assert batch.count == 60 and set(batch["actions"].tolist()) == {0}
    worker.set_weights({"default_policy": {"w": 3.0}})  # 1.13 keyed one policy's weights too
    assert worker.for_policy(lambda p, scale: p.w * scale, scale=2) == 6.0
    with pytest.raises(TypeError, match=r"unexpected keyword arguments \['sample_async'\]"):
        RolloutWorker(env_creator=lambda ctx: gym.make("CartPole-v1"), policy_spec=Constant, sample_async=True)
    assert RolloutWorker.as_remote(num_cpus=1).remote.__name__ == RolloutWorker.as_remote().remote.__name__ == "remote"


def test_use_lstm_wraps_a_custom_model_as_1_13_did():
    # 1.13's lstm_auto_wrapping: the custom model (here without parameters, and not an
    # nn.Module) feeds an LSTM that the action and value heads read.
    import torch

    from rlstack.models.catalog import ModelCatalog
    from rlstack.models.torch.recurrent_net import LSTMAroundModel
    from rlstack.models.torch.torch_modelv2 import TorchModelV2
    from rlstack.trainers.ppo import PPOTrainer

    class Doubling(TorchModelV2):
        def __init__(self, obs_space, action_space, num_outputs, model_config, name):
            super().__init__(obs_space, action_space, num_outputs, model_config, name)
            assert num_outputs is None  # 1.13 built the wrapped model without its head
            self.num_outputs = int(np.prod(self.obs_space.shape))

        def forward(self, input_dict, state, seq_lens):
            return input_dict["obs_flat"] * 2.0, []

        def value_function(self):
            raise AssertionError("the wrapper's value head is used")

    ModelCatalog.register_custom_model("doubling_for_lstm", Doubling)
    trainer = PPOTrainer(env="CartPole-v1", config={
        "framework": "torch", "num_workers": 0, "train_batch_size": 200, "sgd_minibatch_size": 100,
        "num_sgd_iter": 1, "model": {"custom_model": "doubling_for_lstm", "use_lstm": True, "lstm_cell_size": 8,
                                     "lstm_use_prev_action": True}})
    model = trainer.get_policy().model
    assert isinstance(model, LSTMAroundModel) and model.lstm.input_size == 4 + 2
    before = model.lstm.weight_ih_l0.detach().clone()
    trainer.train()
    assert not torch.equal(before, model.lstm.weight_ih_l0.detach())
    state = trainer.get_policy().get_initial_state()
    assert [tuple(np.shape(s)) for s in state] == [(8,), (8,)]
    action, state_out, _ = trainer.compute_single_action(np.zeros(4, np.float32), state=state)
    assert action in (0, 1) and len(state_out) == 2
    trainer.stop()


def test_pg_trains_an_lstm():
    from rlstack.trainers.pg import PGTrainer

    trainer = PGTrainer(config={"framework": "torch", "num_workers": 0, "train_batch_size": 200,
                                "model": {"use_lstm": True, "lstm_cell_size": 8, "max_seq_len": 20}},
                        env="CartPole-v1")
    policy = trainer.get_policy()
    before = {k: np.copy(v) for k, v in policy.get_weights().items()}
    result = trainer.train()
    assert policy.is_recurrent and np.isfinite(result["info"]["learner"]["default_policy"]["learner_stats"]["policy_loss"])
    assert any(not np.allclose(v, before[k]) for k, v in policy.get_weights().items() if "lstm" in k)
    trainer.stop()


def test_a_hand_written_policy_sees_the_space_its_observations_arrive_in():
    # 1.13 built a heuristic policy with the preprocessed space (one-hot for Discrete),
    # .original_space the env's, and a state of plain Python numbers worked.
    from rlstack.evaluation.worker_policies import construct_classic_policy
    from rlstack.policies.policy import Policy

    class Heuristic(Policy):
        def get_initial_state(self):
            return [2]

        def compute_actions(self, obs_batch, state_batches=None, **kwargs):
            return state_batches[0], state_batches, {}

    policy = construct_classic_policy(Heuristic, gym.spaces.Discrete(3), gym.spaces.Discrete(3), {})
    assert policy.observation_space.shape == (3,) and policy.observation_space.original_space == gym.spaces.Discrete(3)
    assert policy.preprocessor.transform(1).tolist() == [0.0, 1.0, 0.0]
    assert [s.tolist() for s in policy.initial_state_batch(2)] == [[2, 2]]
    boxed = construct_classic_policy(Heuristic, gym.spaces.Box(-1.0, 1.0, (2,)), gym.spaces.Discrete(3), {})
    assert boxed.observation_space == gym.spaces.Box(-1.0, 1.0, (2,))


def test_a_custom_action_distribution_over_a_tuple_action_space_acts_with_flat_actions():
    from rlstack.models.catalog import action_dist_spec

    class Autoregressive:
        @staticmethod
        def required_model_output_shape(action_space, model_config):
            return 16

    spec = action_dist_spec(gym.spaces.Tuple([gym.spaces.Discrete(2)] * 2), {"custom_action_dist": Autoregressive})
    assert spec.kind == "custom" and spec.num_outputs == 16 and spec.custom_class is Autoregressive
    # Its samples (a1, a2) are kept as one [B, 2] integer vector, as 1.13's logp(actions[:, i]) reads them.
    assert spec.layout.widths == (1, 1) and spec.layout.discrete and spec.action_shape == (2,)


def test_a_tf_model_on_tf1_graph_layers_fails_with_what_to_write_instead():
    pytest.importorskip("tensorflow")
    from rlstack.errors import ConfigError
    from rlstack.models.tf.tf_modelv2 import TFModelV2
    from rlstack.utils.framework import try_import_tf

    tf1, tf, _ = try_import_tf()

    class GraphLayers(TFModelV2):
        def forward(self, input_dict, state, seq_lens):
            return tf1.layers.dense(input_dict["obs"], self.num_outputs), state

    model = GraphLayers(gym.spaces.Box(-1.0, 1.0, (4,)), gym.spaces.Discrete(2), 2, {}, "graph")
    with pytest.raises(ConfigError, match=r"GraphLayers.forward calls TF 1's graph-mode layer API.*tf.keras.layers"):
        model({"obs": np.zeros((3, 4), np.float32)})


def test_episode_batch_builder_outside_sampling_says_where_the_rows_are():
    from rlstack.errors import MissingFeatureError
    from rlstack.evaluation.episode import Episode

    episode = Episode(0, 0)
    with pytest.raises(MissingFeatureError, match="on_postprocess_trajectory"):
        episode.batch_builder
    assert not hasattr(episode, "batch_builder")  # still an AttributeError to hasattr


def test_episode_batch_builder_holds_the_episodes_rows_while_sampling():
    from rlstack.evaluation.callbacks import DefaultCallbacks
    from rlstack.trainers.pg import PGTrainer

    seen = []

    class ReadsRows(DefaultCallbacks):
        def on_episode_end(self, *, episode, **kwargs):
            rows = episode.batch_builder.policy_collectors["default_policy"].batches[-1]
            seen.append((bool(rows["dones"][-1]), rows.count, episode.length, set(rows["eps_id"].tolist()),
                         episode.episode_id))

    trainer = PGTrainer({"num_workers": 0, "train_batch_size": 200, "rollout_fragment_length": 100,
                         "num_envs_per_worker": 2, "callbacks": ReadsRows, "model": {"fcnet_hiddens": [8]}},
                        "CartPole-v1")
    trainer.train()
    trainer.stop()
    assert seen and all(done for done, *_ in seen)
    # The rows are the episode's own, at most its length (fewer when it began in an earlier fragment).
    assert all(ids == {episode_id} and 1 <= count <= length for _, count, length, ids, episode_id in seen)
    assert any(count == length for _, count, length, _, _ in seen)


def test_a_keras_2_functional_model_with_tf_ops_fails_with_what_to_write_instead():
    pytest.importorskip("tensorflow")
    from rlstack.errors import ConfigError
    from rlstack.models.tf.tf_modelv2 import TFModelV2
    from rlstack.trainers.pg import PGTrainer
    from rlstack.utils.framework import try_import_tf

    _, tf, _ = try_import_tf()

    class Keras2Functional(TFModelV2):
        def __init__(self, obs_space, action_space, num_outputs, model_config, name):
            super().__init__(obs_space, action_space, num_outputs, model_config, name)
            inputs = tf.keras.layers.Input(shape=(None, 4))
            lengths = tf.keras.layers.Input(shape=(), dtype=tf.int32)
            mask = tf.sequence_mask(lengths)  # a TF op on a Keras input: Keras 2 only
            self.base_model = tf.keras.Model([inputs, lengths], [mask])

    with pytest.raises(ConfigError, match=r"Keras2Functional calls TensorFlow ops on Keras inputs"):
        PGTrainer(config={"framework": "tf", "num_workers": 0, "model": {"custom_model": Keras2Functional}},
                  env="CartPole-v1")

    class NumberShape(TFModelV2):
        def __init__(self, obs_space, action_space, num_outputs, model_config, name):
            super().__init__(obs_space, action_space, num_outputs, model_config, name)
            self.mask = tf.keras.layers.Input(shape=(num_outputs))  # Keras 2 took a number

    with pytest.raises(ConfigError, match=r"NumberShape gives Keras a shape as a number.*shape=\(n,\)"):
        PGTrainer(config={"framework": "tf", "num_workers": 0, "model": {"custom_model": NumberShape}},
                  env="CartPole-v1")


def test_tf_fully_connected_network_base_model_is_a_keras_model_of_the_network():
    tf = pytest.importorskip("tensorflow")
    from rlstack.models.tf.fcnet import FullyConnectedNetwork

    net = FullyConnectedNetwork(gym.spaces.Box(-1.0, 1.0, (4,)), gym.spaces.Discrete(2), 2, {}, "fc")
    # 1.13's call on a Keras input, inside another functional model (the eager_execution example).
    inputs = tf.keras.Input(shape=(4,))
    logits, values = net.base_model(inputs)
    wrapper = tf.keras.Model(inputs, [logits, values])
    obs = np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32)
    expected_logits, expected_values = net.policy_and_value(tf.constant(obs))
    got_logits, got_values = wrapper(obs)
    np.testing.assert_allclose(got_logits.numpy(), expected_logits.numpy(), rtol=1e-5)
    # 1.13's value_out is [B, 1]; value_function() reshapes it.
    np.testing.assert_allclose(got_values.numpy()[:, 0], expected_values.numpy(), rtol=1e-5)
    net.base_model = "a subclass's own Keras model"
    assert net.base_model == "a subclass's own Keras model"


def test_a_keras_model_called_with_state_and_seq_lens_fails_with_what_to_write_instead():
    tf = pytest.importorskip("tensorflow")
    from rlstack.errors import ConfigError
    from rlstack.models.tf.tf_modelv2 import TFModelV2

    class CallsWithState(TFModelV2):
        def __init__(self, obs_space, action_space, num_outputs, model_config, name):
            super().__init__(obs_space, action_space, num_outputs, model_config, name)
            inputs = tf.keras.Input(shape=obs_space.shape)
            self.base_model = tf.keras.Model(inputs, tf.keras.layers.Dense(num_outputs)(inputs))

        def forward(self, input_dict, state, seq_lens):
            return self.base_model(input_dict["obs"], state, seq_lens), state

    model = CallsWithState(gym.spaces.Box(-1.0, 1.0, (4,)), gym.spaces.Discrete(2), 2, {}, "keras2_call")
    with pytest.raises(ConfigError, match=r"self.base_model\(input_dict\['obs'\]\)`, and return `state`"):
        model({"obs": np.zeros((3, 4), np.float32)}, [], None)
