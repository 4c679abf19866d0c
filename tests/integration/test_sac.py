"""SACTrainer end to end: what a user relies on after a few hundred env steps.

* two iterations in the driver, torch and TF, Box actions (Pendulum) and Discrete actions
  (CartPole): the classic result keys, 1.13's learner stats, one gradient step of
  ``train_batch_size`` rows per sampling round once ``learning_starts`` steps were
  sampled, a target update after every round (``target_network_update_freq`` 0), actions
  within the bounds;
* checkpoints: every weight (actor, critics, target critics, log_alpha) and every
  optimizer's state come back exactly: the same greedy actions and the same statistics
  from the next ``learn_on_batch`` on one replayed batch;
* image and Dict observations, Box actions included (the action joins the CNN features);
* remote rollout workers acting in numpy.

Every training here is tiny (hundreds of env steps, 16-unit layers).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlstack.trainers.sac.sac import SACTrainer
from tests.helpers.envs import DictObsEnv, ImageEnv

TINY = {
    "num_workers": 0,
    "seed": 0,
    "min_sample_timesteps_per_reporting": 100,
    "min_time_s_per_reporting": 0,
    "learning_starts": 50,
    "buffer_size": 1000,
    "train_batch_size": 16,
    "Q_model": {"fcnet_hiddens": [16]},
    "policy_model": {"fcnet_hiddens": [16]},
}
STAT_KEYS = ("actor_loss", "critic_loss", "alpha_loss", "alpha_value", "log_alpha_value", "target_entropy",
             "mean_q", "max_q", "min_q", "policy_t", "entropy")


def _learner_stats(result: dict) -> dict:
    return result["info"]["learner"]["default_policy"]["learner_stats"]


def _observations(env_id: str, n: int = 30) -> list:
    env = gym.make(env_id)
    env.reset(seed=0)
    return [env.observation_space.sample() for _ in range(n)]


@pytest.mark.parametrize(("env_id", "entropy_target"), [("Pendulum-v1", -1.0), ("CartPole-v1", 0.98 * np.log(2))],
                         ids=["box", "discrete"])
def test_sac_two_iterations(framework, env_id, entropy_target):
    trainer = SACTrainer({**TINY, "framework": framework}, env_id)
    results = [trainer.train(), trainer.train()]
    for iteration, result in enumerate(results, start=1):
        sampled = 100 * iteration
        assert result["training_iteration"] == iteration
        assert result["timesteps_total"] == result["num_env_steps_sampled"] == sampled
        # One step per round (rollout_fragment_length 1): 16 trained rows per round from step 50 on.
        assert result["num_env_steps_trained"] == 16 * (sampled - 50 + 1)
        assert result["num_target_updates"] == sampled
        assert result["replay_buffer"]["num_entries"] == sampled
        stats = _learner_stats(result)
        for key in STAT_KEYS:
            assert np.isfinite(stats[key]), key
        assert "td_error" not in stats  # consumed as replay priorities
        assert stats["target_entropy"] == pytest.approx(entropy_target)
        assert stats["cur_lr"] == pytest.approx(3e-4)
    if env_id == "Pendulum-v1":
        assert results[0]["episodes_total"] == 0  # 200-step episodes
        actions = [trainer.compute_single_action(obs, explore=True) for obs in _observations(env_id)]
        assert all(action.shape == (1,) and -2.0 <= action[0] <= 2.0 for action in actions)
        assert np.ptp(actions) > 0.5  # mapped from [-1, 1] onto [-2, 2]
    else:
        assert results[1]["episodes_total"] > 0 and np.isfinite(results[1]["episode_reward_mean"])
        assert {int(trainer.compute_single_action(obs)) for obs in _observations(env_id)} <= {0, 1}
    trainer.stop()


@pytest.mark.parametrize("env_id", ["Pendulum-v1", "CartPole-v1"], ids=["box", "discrete"])
def test_sac_checkpoint_restores_every_weight_and_optimizer(framework, env_id, tmp_path):
    config = {**TINY, "framework": framework, "store_buffer_in_checkpoints": True}
    trainer = SACTrainer(config, env_id)
    trainer.train()
    path = trainer.save(str(tmp_path / "ckpt"))
    state = trainer.get_policy().get_state()
    for prefix in ("weights/actor/", "weights/q/", "weights/twin_q/", "target/q/", "target/twin_q/",
                   "optimizer/", "optimizer/1/", "optimizer/2/"):
        assert any(key.startswith(prefix) for key in state), prefix
    assert "weights/log_alpha" in state
    # The targets trail the critics (polyak averaging with tau 0.005).
    assert not np.array_equal(state["target/q/out/kernel"], state["weights/q/out/kernel"])

    restored = SACTrainer(config, env_id)
    restored.restore(path)
    restored_state = restored.get_policy().get_state()
    assert sorted(restored_state) == sorted(state)
    for key, value in state.items():
        np.testing.assert_array_equal(restored_state[key], value, err_msg=key)
    observations = _observations(env_id)
    for obs in observations:
        np.testing.assert_array_equal(restored.compute_single_action(obs, explore=False),
                                      trainer.compute_single_action(obs, explore=False))
    # The next gradient step is the same step: same weights, optimizer moments, loss noise.
    batch = trainer.replay_buffer.sample(16)
    expected, got = trainer.get_policy().learn_on_batch(batch), restored.get_policy().learn_on_batch(batch)
    assert sorted(got) == sorted(expected)
    for key in expected:
        np.testing.assert_array_equal(got[key], expected[key], err_msg=key)
    for t in (trainer, restored):
        t.stop()


class _BoxActionDictEnv(DictObsEnv):
    """DictObsEnv's image + vector + Discrete observations with Box actions."""

    action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)

    def step(self, action):
        self._t += 1
        return self._obs(), -float(np.square(action).sum()), self._t >= 15, False, {}


@pytest.mark.parametrize("env", [ImageEnv, DictObsEnv, _BoxActionDictEnv], ids=["image", "dict", "dict-box"])
def test_sac_image_and_dict_observations(framework, env):
    trainer = SACTrainer({**TINY, "framework": framework, "learning_starts": 40,
                          "Q_model": {"fcnet_hiddens": [8], "conv_filters": [[4, [3, 3], 2], [8, [4, 4], 1]]},
                          "policy_model": {"fcnet_hiddens": [8], "conv_filters": [[4, [3, 3], 2], [8, [4, 4], 1]]}},
                         env)
    result = trainer.train()
    assert result["timesteps_total"] == 100 and result["num_env_steps_trained"] > 0
    assert np.isfinite(_learner_stats(result)["critic_loss"])
    obs, _ = env().reset(seed=1)
    action = trainer.compute_single_action(obs, explore=False)
    assert trainer.get_policy().action_space.contains(np.asarray(action, dtype=trainer.get_policy().action_space.dtype))
    trainer.stop()


def test_sac_remote_workers_act_in_numpy(ray_local):
    trainer = SACTrainer({**TINY, "num_workers": 2, "num_cpus_per_worker": 0.5, "rollout_fragment_length": 5},
                         "Pendulum-v1")
    result = trainer.train()
    assert result["timesteps_total"] == 100 and result["num_healthy_workers"] == 2
    # One gradient step per round of 2 x 5 sampled steps, from step 50 on.
    assert result["num_env_steps_trained"] == 16 * len(range(50, 101, 10))
    kinds = trainer.workers.foreach_worker(lambda worker: type(worker.policy).__name__, local=False)
    assert kinds == ["SACNumpyPolicy", "SACNumpyPolicy"]
    trainer.stop()


def test_sac_exports_the_actor(framework, tmp_path):
    from tests.integration.test_export import _load_without_rlstack

    trainer = SACTrainer({**TINY, "framework": framework}, "Pendulum-v1")
    trainer.train()
    obs = np.stack(_observations("Pendulum-v1", 50)).astype(np.float32)
    # The exported file serves the actor's outputs (means and log stds) for flat observations.
    _, extras = trainer.get_policy().compute_actions(obs, explore=False)
    path = trainer.export_policy_model(str(tmp_path / "native"))
    got = _load_without_rlstack("torchscript" if framework == "torch" else "savedmodel", path, obs, tmp_path)
    np.testing.assert_allclose(got, extras["action_dist_inputs"], atol=1e-5)
    trainer.stop()


@pytest.mark.parametrize("algorithm", ["SAC", "TD3"])
def test_the_drivers_numpy_actor_acts_with_the_learners_latest_weights(framework, algorithm):
    # torch on the CPU: the acting copy reads the parameters in place (no copy per sync);
    # TF: a copy at every sync. Either way the driver acts with the weights of the moment.
    from rlstack.trainers.common.registry import get_trainer_class

    tiny = TINY if algorithm == "SAC" else {k: v for k, v in TINY.items() if not k.endswith("_model")}
    trainer = get_trainer_class(algorithm)({**tiny, "framework": framework}, "Pendulum-v1")
    worker = trainer.workers.local_worker()
    assert worker.sampling_policy is not worker.policy  # acting in numpy
    assert worker._acting_shares_weights == (framework == "torch")
    obs = np.stack(_observations("Pendulum-v1"))

    def greedy(policy):
        return policy.compute_actions(obs, explore=False)[0]

    before = greedy(worker.sampling_policy)
    trainer.train()  # 50 gradient steps
    after = greedy(worker.sampling_policy)
    assert not np.allclose(before, after)
    np.testing.assert_allclose(after, greedy(worker.policy), rtol=1e-5, atol=1e-6)
    if framework == "torch":
        # In place: a gradient step shows in the actor's actions with no sync at all.
        for _ in range(2):  # TD3's actor steps every other gradient step
            worker.policy.learn_on_batch(trainer.replay_buffer.sample(16))
        stepped = greedy(worker.sampling_policy)
        assert not np.allclose(stepped, after)
        np.testing.assert_allclose(stepped, greedy(worker.policy), rtol=1e-5, atol=1e-6)
    # Weights loaded into the learner (a restore) reach the actor by the next sync.
    other = get_trainer_class(algorithm)({**tiny, "framework": framework, "seed": 7}, "Pendulum-v1")
    worker.policy.set_weights(other.get_policy().get_weights())
    trainer.workers.sync_weights()
    np.testing.assert_allclose(greedy(worker.sampling_policy), greedy(other.get_policy()), rtol=1e-5, atol=1e-6)
    trainer.stop()
    other.stop()
