"""Env faults and bad numbers.

- A sub-env whose ``step`` or ``reset`` raises stops training with an error naming it, or,
  with ``restart_failed_sub_environments``, is rebuilt while training goes on; the broken
  episode never reaches the learner or the episode metrics.
- NaN/inf in an env's observations or rewards stop training with an error naming the
  sub-env, the worker and the step.
- A non-finite loss or gradient raises before the update, so the weights stay clean.

``MarkedEnv`` marks every observation of its doomed episode with ``obs[0] = 999``, so a
test can tell whether any row of that episode got into a train batch.
"""

from __future__ import annotations

import uuid

import gymnasium as gym
import numpy as np
import pytest
import ray

from rlstack.errors import EnvFailureError, NonFiniteError, RLStackError
from rlstack.evaluation.rollout_worker import RolloutWorker
from rlstack.sample_batch import SampleBatch
from rlstack.trainers.common.config import merge_config

B = SampleBatch
MARK = 999.0
LENGTH = 10  # steps per episode

# (token, worker_index, vector_index) of the doomed envs that have failed already: a
# rebuilt env must not fail again. Per process, so a remote worker keeps its own.
_FIRED: set[tuple[str, int, int]] = set()


class MarkedEnv(gym.Env):
    """Episodes of ``LENGTH`` steps, reward 1 per step, obs ``[mark, t / 10]``.

    ``env_config``: ``token`` (a test's own key), ``bad_worker`` / ``bad_vector`` (the
    sub-env with the doomed episode), ``doomed_episode`` (its index, counted per env
    instance), ``fault``: ``"step"`` (raise in its step ``fail_step``), ``"reset"``
    (raise when it would start), ``"nan_obs"``, ``"nan_reward"``, ``"inf_reward"`` (a bad
    number at its step ``fail_step``), or None.
    """

    observation_space = gym.spaces.Box(-1e4, 1e4, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config):
        self.cfg = dict(config)
        self.where = (self.cfg.get("token", ""), getattr(config, "worker_index", 0), getattr(config, "vector_index", 0))
        self.episode = -1
        self.t = 0
        self.doomed = False

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.episode += 1
        self.t = 0
        cfg = self.cfg
        self.doomed = (self.where[1:] == (cfg.get("bad_worker", 0), cfg.get("bad_vector", 0))
                       and self.episode == cfg.get("doomed_episode", 1) and self.where not in _FIRED)
        if self.doomed and cfg.get("fault") == "reset":
            _FIRED.add(self.where)
            raise RuntimeError(f"injected reset failure of episode {self.episode}")
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        fault = self.cfg.get("fault") if self.doomed and self.t == self.cfg.get("fail_step", 3) else None
        if fault == "step":
            _FIRED.add(self.where)
            raise RuntimeError(f"injected step failure at step {self.t}")
        obs, reward = self._obs(), 1.0
        if fault == "nan_obs":
            obs[1] = np.nan
        elif fault == "nan_reward":
            reward = float("nan")
        elif fault == "inf_reward":
            reward = float("inf")
        return obs, reward, self.t >= LENGTH, False, {}

    def _obs(self):
        return np.array([MARK if self.doomed else 0.0, self.t / 10.0], np.float32)


def env_config(**kwargs):
    return {"token": uuid.uuid4().hex, "bad_worker": 0, "bad_vector": 1, "doomed_episode": 1, "fail_step": 5,
            "fault": "step", **kwargs}


PPO_SMALL = {"num_workers": 0, "num_envs_per_worker": 2, "rollout_fragment_length": 40, "train_batch_size": 80,
             "sgd_minibatch_size": 40, "num_sgd_iter": 1, "seed": 3, "model": {"fcnet_hiddens": [8]},
             "framework": "torch"}


def _record_learned_batches(trainer):
    """Makes the learner's policy remember every batch it learns on."""
    policy = trainer.learner_policy
    learn = policy.learn_on_batch
    batches = []

    def recording_learn_on_batch(batch):
        batches.append(batch.copy())
        return learn(batch)

    policy.learn_on_batch = recording_learn_on_batch
    return batches


def _assert_no_marked_rows(batches):
    assert batches, "the learner got no batch"
    for batch in batches:
        assert not (batch[B.OBS][:, 0] == MARK).any(), "a row of the broken episode reached the learner"
        if B.NEXT_OBS in batch:
            assert not (batch[B.NEXT_OBS][:, 0] == MARK).any()


def _worker(env_cfg, **overrides):
    """A RolloutWorker in this process with PPO's torch policy."""
    from rlstack.trainers.ppo import DEFAULT_CONFIG
    from rlstack.trainers.ppo.ppo_torch_policy import PPOTorchPolicy

    config = merge_config(DEFAULT_CONFIG, {**PPO_SMALL, "env_config": env_cfg, "rollout_inference": "framework",
                                           **overrides}, "PPO")
    return RolloutWorker(MarkedEnv, PPOTorchPolicy, config)


def _episode_lengths(batch):
    _, counts = np.unique(batch[B.EPS_ID], return_counts=True)
    return counts.tolist()


# --- sub-env failures ------------------------------------------------------------------


def test_step_failure_without_restart_names_the_sub_env():
    from rlstack.trainers.ppo import PPOTrainer

    trainer = PPOTrainer({**PPO_SMALL, "env_config": env_config()}, MarkedEnv)
    with pytest.raises(EnvFailureError) as info:
        trainer.train()
    message = str(info.value)
    # Episode 1 of sub-env 1 starts at the sub-env's step 11 and fails at its step 5.
    assert "Sub-env 1 (vector index) of rollout worker 0 (MarkedEnv) raised RuntimeError in step() at step 5" in message
    assert "restart_failed_sub_environments=True" in message
    assert isinstance(info.value.__cause__, RuntimeError)
    assert "injected step failure" in str(info.value.__cause__)
    trainer.stop()


def test_reset_failure_without_restart_names_the_sub_env():
    worker = _worker(env_config(fault="reset"))
    with pytest.raises(EnvFailureError, match=r"Sub-env 1 \(vector index\) of rollout worker 0 \(MarkedEnv\) "
                                              r"raised RuntimeError in reset\(\)"):
        worker.sample()


def test_step_failure_on_remote_worker_without_restart_names_it(ray_local):
    from rlstack.trainers.ppo import PPOTrainer

    trainer = PPOTrainer({**PPO_SMALL, "num_workers": 1, "env_config": env_config(bad_worker=1)}, MarkedEnv)
    # The worker set reports the worker's failure; the env's error is in its message.
    with pytest.raises(RLStackError, match=r"Sub-env 1 \(vector index\) of rollout worker 1 \(MarkedEnv\) raised "
                                           r"RuntimeError in step\(\) at step 5"):
        trainer.train()
    trainer.stop()


def test_restart_drops_the_broken_episode_ppo_local():
    from rlstack.trainers.ppo import PPOTrainer

    trainer = PPOTrainer({**PPO_SMALL, "restart_failed_sub_environments": True, "env_config": env_config()},
                         MarkedEnv)
    batches = _record_learned_batches(trainer)
    result = trainer.train()
    worker = trainer.workers.local_worker()
    assert worker.num_env_restarts == 1
    assert result["num_env_restarts"] == 1
    _assert_no_marked_rows(batches)
    # Sub-env 1 failed in the first fragment, which it gives up whole (40 of its rows); a
    # second round makes up train_batch_size.
    assert batches[0].count == 40 + 80
    # Sub-env 0 finished 8 episodes, sub-env 1 seven: the broken one is not reported.
    assert result["episodes_this_iter"] == 15
    assert result["episode_len_mean"] == LENGTH and result["episode_reward_min"] == LENGTH
    result = trainer.train()
    assert worker.num_env_restarts == 1
    assert result["num_env_restarts"] == 1  # cumulative, like episodes_total
    assert result["episode_len_mean"] == LENGTH
    _assert_no_marked_rows(batches)
    trainer.stop()


def test_evaluation_sub_env_restarts_are_reported_and_their_episode_dropped():
    from rlstack.trainers.ppo import PPOTrainer

    # Only the evaluation env fails (sub-env 1's second episode, at its step 5).
    trainer = PPOTrainer({**PPO_SMALL, "restart_failed_sub_environments": True, "env_config": env_config(fault=None),
                          "evaluation_interval": 1, "evaluation_duration": 4,
                          "evaluation_config": {"env_config": env_config()}}, MarkedEnv)
    result = trainer.train()
    evaluation = result["evaluation"]
    assert evaluation["num_env_restarts"] == 1 and result["num_env_restarts"] == 0
    assert evaluation["episodes_this_iter"] == 4
    assert evaluation["episode_len_mean"] == LENGTH  # the broken episode is not among them
    assert trainer.evaluate()["evaluation"]["num_env_restarts"] == 0  # per evaluation, not cumulative
    trainer.stop()


def test_restart_on_remote_worker_ppo(ray_local):
    from rlstack.trainers.ppo import PPOTrainer

    trainer = PPOTrainer({**PPO_SMALL, "num_workers": 1, "restart_failed_sub_environments": True,
                          "env_config": env_config(bad_worker=1)}, MarkedEnv)
    batches = _record_learned_batches(trainer)
    for _ in range(2):
        result = trainer.train()
    assert result["episode_len_mean"] == LENGTH and result["episode_reward_min"] == LENGTH
    _assert_no_marked_rows(batches)
    remote = trainer.workers.remote_workers()[0]
    assert ray.get(remote.apply.remote(lambda w: w.num_env_restarts)) == 1
    assert result["num_env_restarts"] == 1
    # A sample straight from the worker: both sub-envs whole again, no marked row.
    batch = ray.get(remote.sample.remote())
    assert batch.count == 80 and not (batch[B.OBS][:, 0] == MARK).any()
    trainer.stop()


@pytest.mark.parametrize("num_workers", [0, 1])
def test_restart_keeps_impala_fragments_whole(num_workers, request):
    from rlstack.trainers.impala import IMPALATrainer

    if num_workers:
        request.getfixturevalue("ray_local")
    config = {"num_workers": num_workers, "num_envs_per_worker": 2, "rollout_fragment_length": 20,
              "train_batch_size": 40, "min_time_s_per_reporting": None, "min_sample_timesteps_per_reporting": 200,
              "seed": 3, "model": {"fcnet_hiddens": [8]}, "framework": "torch",
              "restart_failed_sub_environments": True, "env_config": env_config(bad_worker=num_workers)}
    trainer = IMPALATrainer(config, MarkedEnv)
    batches = _record_learned_batches(trainer)
    for _ in range(10):
        result = trainer.train()
        if len(batches) >= 3 and result["num_env_steps_trained"] > 0:
            break
    if num_workers:
        restarts = ray.get(trainer.workers.remote_workers()[0].apply.remote(lambda w: w.num_env_restarts))
    else:
        restarts = trainer.workers.local_worker().num_env_restarts
    assert restarts == 1
    _assert_no_marked_rows(batches)
    for batch in batches:
        # V-trace's time-major reshape: whole fragments of one sub-env each.
        assert batch.count % 20 == 0
        eps = batch[B.EPS_ID].reshape(-1, 20)
        assert (np.diff(eps, axis=1) >= 0).all()
    assert result["num_env_steps_trained"] > 0 and result["episode_len_mean"] == LENGTH
    trainer.stop()


def test_restart_in_complete_episodes_mode_drops_only_the_broken_episode():
    # Fragments of 8 steps: episode 1 of sub-env 1 (steps 11-20) has steps 11-16 pending
    # from the second fragment when it fails at its step 8 (sub-env step 18), in the third.
    worker = _worker(env_config(fail_step=8), batch_mode="complete_episodes", rollout_fragment_length=8,
                     restart_failed_sub_environments=True)
    batches = [worker.sample() for _ in range(5)]
    assert worker.num_env_restarts == 1
    for batch in batches:
        assert not (batch[B.OBS][:, 0] == MARK).any()
        assert all(length == LENGTH for length in _episode_lengths(batch))
    # Only the broken episode went: sub-env 1's first one (id 1), which ended just before
    # it, is there whole.
    ids = np.concatenate([b[B.EPS_ID] for b in batches])
    assert (ids == 1).sum() == LENGTH
    # Every finished episode is in a batch and in the metrics; the broken one in neither.
    metrics = worker.get_metrics()
    assert len(metrics) == len(np.unique(ids)) >= 8
    assert all(e.length == LENGTH and e.episode_return == LENGTH for e in metrics)


def test_restart_in_truncate_mode_drops_the_sub_envs_fragment_only():
    worker = _worker(env_config(), restart_failed_sub_environments=True)
    batch = worker.sample()
    assert worker.num_env_restarts == 1
    # Only sub-env 0's 40 steps (4 whole episodes); none of sub-env 1, whose first
    # episode has id 1.
    assert batch.count == 40
    assert not (batch[B.OBS][:, 0] == MARK).any()
    assert 1 not in batch[B.EPS_ID].tolist()
    assert batch[B.TERMINATEDS].sum() == 4 and _episode_lengths(batch) == [LENGTH] * 4
    batch = worker.sample()
    assert batch.count == 80 and not (batch[B.OBS][:, 0] == MARK).any()
    # Restarts since the last call, for the trainer's num_env_restarts; the total stays.
    assert worker.get_env_restarts() == 1 and worker.get_env_restarts() == 0
    assert worker.num_env_restarts == 1


def test_reset_failure_restarts_and_keeps_the_finished_episode():
    worker = _worker(env_config(fault="reset"), restart_failed_sub_environments=True)
    batch = worker.sample()
    # The episode before the failed reset ended well: nothing is dropped.
    assert worker.num_env_restarts == 1
    assert batch.count == 80
    assert [e.length for e in worker.get_metrics()] == [LENGTH] * 8


def test_reset_failure_of_the_first_reset_restarts():
    worker = _worker(env_config(fault="reset", doomed_episode=0), restart_failed_sub_environments=True)
    batch = worker.sample()
    assert worker.num_env_restarts == 1 and batch.count == 80


def test_env_failing_every_time_gives_up_after_restarts():
    class AlwaysFails(MarkedEnv):
        def step(self, action):
            raise RuntimeError("always")

    from rlstack.trainers.ppo import DEFAULT_CONFIG
    from rlstack.trainers.ppo.ppo_torch_policy import PPOTorchPolicy

    config = merge_config(DEFAULT_CONFIG, {**PPO_SMALL, "num_envs_per_worker": 1, "rollout_inference": "framework",
                                           "restart_failed_sub_environments": True}, "PPO")
    worker = RolloutWorker(AlwaysFails, PPOTorchPolicy, config)
    with pytest.raises(EnvFailureError, match="in a row"):
        worker.sample()


def test_single_sub_env_that_failed_gives_the_next_fragment_not_an_empty_batch():
    # DQN's replay and A3C's gradients need rows: a wholly dropped fragment is followed by another.
    worker = _worker(env_config(bad_vector=0), num_envs_per_worker=1, restart_failed_sub_environments=True)
    batch = worker.sample()
    assert worker.num_env_restarts == 1
    assert batch.count == 40 and not (batch[B.OBS][:, 0] == MARK).any()


class FailsEveryOtherEpisode(MarkedEnv):
    """Episodes of 3 steps; every second one raises at its step 2. Each finished episode
    shows the env can run, so only sample()'s own guard can stop it."""

    def step(self, action):
        self.t += 1
        if self.episode % 2 == 1 and self.t == 2:
            raise RuntimeError("odd episode")
        return self._obs(), 1.0, self.t >= 3, False, {}


def test_envs_failing_in_every_fragment_stop_sampling():
    from rlstack.trainers.ppo import DEFAULT_CONFIG
    from rlstack.trainers.ppo.ppo_torch_policy import PPOTorchPolicy

    config = merge_config(DEFAULT_CONFIG, {**PPO_SMALL, "num_envs_per_worker": 1, "rollout_inference": "framework",
                                           "restart_failed_sub_environments": True}, "PPO")
    worker = RolloutWorker(FailsEveryOtherEpisode, PPOTorchPolicy, config)
    with pytest.raises(EnvFailureError, match="failed in each of the last 10 fragments"):
        worker.sample()


def test_restart_key_is_validated():
    from rlstack.errors import ConfigError
    from rlstack.trainers.ppo import PPOTrainer

    with pytest.raises(ConfigError, match="restart_failed_sub_environments must be True or False"):
        PPOTrainer({**PPO_SMALL, "restart_failed_sub_environments": "yes"}, MarkedEnv)


# --- NaN / inf from the env --------------------------------------------------------------


@pytest.mark.parametrize("fault, what", [("nan_obs", "observation"), ("nan_reward", "reward"),
                                         ("inf_reward", "reward")])
@pytest.mark.parametrize("restart", [False, True])
def test_non_finite_env_output_names_its_source(fault, what, restart):
    from rlstack.trainers.ppo import PPOTrainer

    # Restarts are for envs that raise; a NaN is a bug in the env and stops training.
    trainer = PPOTrainer({**PPO_SMALL, "restart_failed_sub_environments": restart,
                          "env_config": env_config(fault=fault, fail_step=3)}, MarkedEnv)
    with pytest.raises(NonFiniteError) as info:
        trainer.train()
    message = str(info.value)
    assert f"Non-finite {what}" in message
    assert "from sub-env 1 (vector index) of rollout worker 0 (MarkedEnv), at step 3 of its episode" in message
    # Sub-env 1's episode 1 started after 10 steps: its step 3 is the worker's 13th vector step.
    assert "after 26 env steps on this worker" in message
    assert trainer.workers.local_worker().num_env_restarts == 0
    trainer.stop()


def test_non_finite_obs_on_remote_worker_is_fatal(ray_local):
    from rlstack.trainers.ppo import PPOTrainer

    trainer = PPOTrainer({**PPO_SMALL, "num_workers": 1, "recreate_failed_workers": True,
                          "env_config": env_config(fault="nan_obs", bad_worker=1)}, MarkedEnv)
    with pytest.raises(NonFiniteError, match=r"sub-env 1 \(vector index\) of rollout worker 1 \(MarkedEnv\), "
                                             r"at step 5 of its episode"):
        trainer.train()
    trainer.stop()


def test_integer_observations_are_not_checked():
    from rlstack.evaluation.rollout_worker import _has_float_box

    assert not _has_float_box(gym.spaces.Box(0, 255, (4, 4), np.uint8))
    assert not _has_float_box(gym.spaces.Dict({"a": gym.spaces.Discrete(3)}))
    assert _has_float_box(gym.spaces.Tuple([gym.spaces.Discrete(3), gym.spaces.Box(0.0, 1.0, (2,))]))


# --- non-finite losses -------------------------------------------------------------------


def _ppo(framework, **overrides):
    from rlstack.trainers.ppo import PPOTrainer

    return PPOTrainer({**PPO_SMALL, "framework": framework, "env_config": env_config(fault=None), **overrides},
                      MarkedEnv)


def _assert_weights_equal(before, after):
    assert before.keys() == after.keys()
    for name in before:
        np.testing.assert_array_equal(before[name], after[name])


def test_non_finite_loss_raises_before_the_update(framework):
    trainer = _ppo(framework)
    policy = trainer.learner_policy
    batch = trainer.workers.local_worker().sample()
    batch[B.ADVANTAGES][:] = np.inf
    before = policy.get_weights()
    with pytest.raises(NonFiniteError) as info:
        policy.learn_on_batch(batch)
    message = str(info.value)
    assert f"PPO{'Torch' if framework == 'torch' else 'TF'}Policy.learn_on_batch (epoch 0, minibatch 0)" in message
    assert "policy_loss" in message and "total_loss" in message and "lr=" in message
    _assert_weights_equal(before, policy.get_weights())
    # The policy still learns on a good batch afterwards.
    batch = trainer.workers.local_worker().sample()
    policy.learn_on_batch(batch)
    assert any((policy.get_weights()[k] != before[k]).any() for k in before)
    trainer.stop()


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # huge (finite) loss statistics
def test_huge_learning_rate_stops_before_nan_reaches_the_weights(framework):
    # Adam moves each weight by about lr per step, whatever the gradient: with lr=1e36 the
    # weights reach ~1e37 within a few batches and the loss overflows.
    trainer = _ppo(framework, lr=1e36, num_sgd_iter=4)
    policy = trainer.learner_policy
    with pytest.raises(NonFiniteError, match=r"lr=1e\+36"):
        for _ in range(40):
            policy.learn_on_batch(trainer.workers.local_worker().sample())
    # The updates before were finite (and huge); the one that would have written NaN or
    # inf into the weights was not applied.
    assert all(np.isfinite(w).all() for w in policy.get_weights().values())
    trainer.stop()


def test_optimizer_rejects_non_finite_gradients(framework):
    # A3C applies gradients computed elsewhere; the optimizer itself refuses bad ones.
    from rlstack.trainers.a3c import A2CTrainer

    trainer = A2CTrainer({"num_workers": 0, "framework": framework, "rollout_fragment_length": 10,
                          "train_batch_size": 20, "model": {"fcnet_hiddens": [8]},
                          "env_config": env_config(fault=None)}, MarkedEnv)
    policy = trainer.learner_policy
    grads, _ = policy.compute_gradients(trainer.workers.local_worker().sample())
    grads[0] = np.full_like(grads[0], np.nan)
    before = policy.get_weights()
    # TF's in-graph assertion surfaces as the same error type as torch's.
    with pytest.raises(NonFiniteError, match=r"(?i)non-finite gradients.*lr="):
        policy.apply_gradients(grads)
    _assert_weights_equal(before, policy.get_weights())
    trainer.stop()


def test_give_up_limits_are_config_keys():
    from rlstack.errors import ConfigError
    from rlstack.trainers.ppo import DEFAULT_CONFIG, PPOTrainer
    from rlstack.trainers.ppo.ppo_torch_policy import PPOTorchPolicy

    class AlwaysFails(MarkedEnv):
        def step(self, action):
            raise RuntimeError("always")

    base = {**PPO_SMALL, "num_envs_per_worker": 1, "rollout_inference": "framework",
            "restart_failed_sub_environments": True}
    config = merge_config(DEFAULT_CONFIG, {**base, "num_consecutive_env_restarts_tolerance": 2}, "PPO")
    worker = RolloutWorker(AlwaysFails, PPOTorchPolicy, config)
    with pytest.raises(EnvFailureError, match="failed 3 times in a row.*num_consecutive_env_restarts_tolerance"):
        worker.sample()
    assert worker.num_env_restarts == 2
    config = merge_config(DEFAULT_CONFIG, {**base, "num_consecutive_failed_fragments_tolerance": 3}, "PPO")
    worker = RolloutWorker(FailsEveryOtherEpisode, PPOTorchPolicy, config)
    with pytest.raises(EnvFailureError, match="failed in each of the last 3 fragments"):
        worker.sample()
    for key in ("num_consecutive_env_restarts_tolerance", "num_consecutive_failed_fragments_tolerance"):
        with pytest.raises(ConfigError, match=f"{key} must be an integer >= 1"):
            PPOTrainer({**PPO_SMALL, key: 0}, MarkedEnv)


def test_nan_gradient_of_a_finite_loss_without_grad_clip_stops_before_the_update(framework):
    # A model whose outputs are finite but whose gradients are NaN (sqrt(x - x)): the loss
    # alone looks fine, so without grad_clip (no norm taken for clipping) the gradients'
    # own norm is what catches it.
    import tests.helpers.custom_models as models
    from rlstack.models import ModelCatalog

    name = f"nan_grad_{framework}"
    ModelCatalog.register_custom_model(name, models.NanGradTorchModel if framework == "torch"
                                       else models.NanGradTFModel)
    trainer = _ppo(framework, grad_clip=None, model={"custom_model": name})
    policy = trainer.learner_policy
    batch = trainer.workers.local_worker().sample()
    before = policy.get_weights()
    with pytest.raises(NonFiniteError, match=r"gradients \(the loss terms are finite\)"):
        policy.learn_on_batch(batch)
    _assert_weights_equal(before, policy.get_weights())
    trainer.stop()
