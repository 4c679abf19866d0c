"""Unit tests for rlstack/evaluation/rollout_worker.py: RolloutWorker built in-process.

The policy is a numpy-only test double with a known value function, so every
``bootstrap_value`` can be checked exactly; the envs are deterministic counters whose
observation is the step count since reset.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlstack.evaluation.metrics import EpisodeStats
from rlstack.evaluation.rollout_worker import RolloutWorker
from rlstack.policies.policy import Policy
from rlstack.sample_batch import SampleBatch
from rlstack.trainers.common.config import merge_config
from rlstack.trainers.ppo import DEFAULT_CONFIG

B = SampleBatch


def V(obs0):
    """The test policy's value function of the (first) observation entry."""
    return 10.0 * np.asarray(obs0, dtype=np.float64) + 1.0


class ScriptedPolicy(Policy):
    """Always action 0; vf_preds and compute_values are V(obs) = 10 * obs[:, 0] + 1.

    Records every trajectory piece given to postprocess_trajectory and every batch of
    observations given to compute_values.
    """

    def __init__(self, observation_space, action_space, config, num_gpus=0, **kwargs):
        super().__init__(observation_space, action_space, config, num_gpus, **kwargs)
        self.pieces = []
        self.value_calls = []

    def compute_actions(self, obs_batch, explore=None):
        obs_batch = np.asarray(obs_batch, dtype=np.float32)
        n = len(obs_batch)
        return np.zeros(n, dtype=np.int64), {
            B.VF_PREDS: V(obs_batch[:, 0]).astype(np.float32),
            B.ACTION_LOGP: np.zeros(n, dtype=np.float32),
            B.ACTION_DIST_INPUTS: np.zeros((n, 2), dtype=np.float32),
        }

    def compute_values(self, obs_batch):
        obs_batch = np.asarray(obs_batch, dtype=np.float32)
        self.value_calls.append(obs_batch.copy())
        return V(obs_batch[:, 0]).astype(np.float32)

    def postprocess_trajectory(self, batch):
        self.pieces.append(batch.copy())
        return batch

    def learn_on_batch(self, batch):
        return {}

    def get_weights(self):
        return {}

    def set_weights(self, weights):
        pass


def _per_env(value, context):
    return value[context.vector_index] if isinstance(value, (list, tuple)) else value


class CounterEnv(gym.Env):
    """obs = [t] (steps since reset). The episode ends after ``length`` steps, as a
    termination, or as a truncation (own time limit) when ``truncate`` is set.

    ``length`` and ``truncate`` may be lists indexed by the sub-env's vector_index.
    Reward of step t (1-based) is ``rewards[(t - 1) % len(rewards)]``.
    """

    def __init__(self, config):
        self.length = int(_per_env(config.get("length", 3), config))
        self.truncate = bool(_per_env(config.get("truncate", False), config))
        self.rewards = list(config.get("rewards", [1.0]))
        self.context = config
        self.observation_space = gym.spaces.Box(-1e6, 1e6, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], np.float32), {}

    def step(self, action):
        assert action == 0
        self.t += 1
        reward = self.rewards[(self.t - 1) % len(self.rewards)]
        end = self.t >= self.length
        return (np.array([float(self.t)], np.float32), reward,
                end and not self.truncate, end and self.truncate, {})


def make_worker(env_config=None, worker_index=0, num_workers=0, **overrides):
    config = merge_config(
        DEFAULT_CONFIG,
        {"num_workers": num_workers, "rollout_fragment_length": 7, "env_config": env_config or {}, **overrides},
        "PPO",
    )
    return RolloutWorker(CounterEnv, ScriptedPolicy, config, worker_index=worker_index, num_workers=num_workers)


def obs0(batch):
    return batch[B.OBS][:, 0].tolist()


def test_envs_get_their_context_and_policy_its_sampling_seed():
    worker = make_worker({"length": 3}, num_envs_per_worker=2, seed=7)
    contexts = [env.context for env in worker.async_env.envs]
    assert [(c.worker_index, c.vector_index, c.num_workers) for c in contexts] == [(0, 0, 0), (0, 1, 0)]
    assert all(c["length"] == 3 for c in contexts)
    assert worker.policy.sampling_seed == 7
    assert make_worker({"length": 3}).policy.sampling_seed is None


def test_worker_env_is_the_user_env_and_async_env_the_vector_env():
    # 1.13's `worker.env` is one env to reset and step by hand (custom_experiment does).
    worker = make_worker({"length": 3}, num_envs_per_worker=2)
    assert isinstance(worker.env, CounterEnv) and worker.env is worker.async_env.get_sub_environments()[0]
    obs, _ = worker.env.reset()
    assert worker.env.step(0)[0].shape == obs.shape


def test_remote_worker_index_offsets_eps_ids():
    worker = make_worker({"length": 2}, worker_index=2, num_workers=3, rollout_fragment_length=3)
    assert [(e.context.worker_index, e.context.num_workers) for e in worker.async_env.envs] == [(2, 3)]
    assert worker.sample()[B.EPS_ID].tolist() == [2 * 10**9] * 2 + [2 * 10**9 + 1]


# ----- truncate_episodes -------------------------------------------------------------


def test_truncate_mode_returns_fragment_and_bootstraps_time_limit_from_final_obs():
    worker = make_worker({"length": 3, "truncate": True}, rollout_fragment_length=7)
    batch = worker.sample()
    assert batch.count == 7
    assert obs0(batch) == [0, 1, 2, 0, 1, 2, 0]
    assert batch[B.TRUNCATEDS].tolist() == [False, False, True, False, False, True, False]
    assert not batch[B.TERMINATEDS].any()
    # Truncated rows bootstrap from V(final obs [3]) = 31, not V(reset obs [0]) = 1; the
    # cut at the fragment end bootstraps from V(next obs [1]) = 11.
    np.testing.assert_array_equal(batch[B.BOOTSTRAP_VALUE], [0, 0, 31, 0, 0, 31, 11])
    assert batch[B.EPS_ID].tolist() == [0, 0, 0, 1, 1, 1, 2]
    np.testing.assert_array_equal(batch[B.VF_PREDS], V(batch[B.OBS][:, 0]))
    # One postprocess_trajectory call per piece, each piece one episode.
    assert [p.count for p in worker.policy.pieces] == [3, 3, 1]
    assert all(len(set(p[B.EPS_ID].tolist())) == 1 for p in worker.policy.pieces)


def test_truncate_mode_terminated_rows_bootstrap_zero():
    worker = make_worker({"length": 3}, rollout_fragment_length=7)
    batch = worker.sample()
    assert batch[B.TERMINATEDS].tolist() == [False, False, True, False, False, True, False]
    assert not batch[B.TRUNCATEDS].any()
    np.testing.assert_array_equal(batch[B.BOOTSTRAP_VALUE], [0, 0, 0, 0, 0, 0, 11])


def test_truncate_mode_episode_end_on_last_row_of_fragment():
    # The fragment ends exactly at an episode end: a truncation bootstraps from the
    # final obs (V([3]) = 31) and a termination from nothing; never from the reset obs.
    worker = make_worker({"length": 3, "truncate": True}, rollout_fragment_length=3)
    batch = worker.sample()
    np.testing.assert_array_equal(batch[B.BOOTSTRAP_VALUE], [0, 0, 31])
    worker = make_worker({"length": 3}, rollout_fragment_length=3)
    batch = worker.sample()
    np.testing.assert_array_equal(batch[B.BOOTSTRAP_VALUE], [0, 0, 0])


def test_truncate_mode_continues_across_sample_calls():
    worker = make_worker({"length": 4}, rollout_fragment_length=3)
    first, second = worker.sample(), worker.sample()
    assert obs0(first) == [0, 1, 2]
    assert obs0(second) == [3, 0, 1]
    assert first[B.EPS_ID].tolist() == [0, 0, 0]
    assert second[B.EPS_ID].tolist() == [0, 1, 1]
    np.testing.assert_array_equal(first[B.BOOTSTRAP_VALUE], [0, 0, V(3)])
    np.testing.assert_array_equal(second[B.BOOTSTRAP_VALUE], [0, 0, V(2)])
    assert second[B.TERMINATEDS].tolist() == [True, False, False]


def test_truncate_mode_two_sub_envs_contiguous_pieces():
    # Sub-env 0: episodes of 2 steps ending in truncation; sub-env 1: 3 steps, terminated.
    worker = make_worker({"length": [2, 3], "truncate": [True, False]},
                         rollout_fragment_length=5, num_envs_per_worker=2)
    batch = worker.sample()
    assert batch.count == 5 * 2
    env0, env1 = batch[:5], batch[5:]
    assert obs0(env0) == [0, 1, 0, 1, 0]
    assert obs0(env1) == [0, 1, 2, 0, 1]
    # eps ids: 0 and 1 to start, then 2, 3, 4 in the order the episodes ended.
    assert env0[B.EPS_ID].tolist() == [0, 0, 2, 2, 4]
    assert env1[B.EPS_ID].tolist() == [1, 1, 1, 3, 3]
    assert env0[B.TRUNCATEDS].tolist() == [False, True, False, True, False]
    assert not env0[B.TERMINATEDS].any()
    assert env1[B.TERMINATEDS].tolist() == [False, False, True, False, False]
    assert not env1[B.TRUNCATEDS].any()
    np.testing.assert_array_equal(env0[B.BOOTSTRAP_VALUE], [0, V(2), 0, V(2), V(1)])
    np.testing.assert_array_equal(env1[B.BOOTSTRAP_VALUE], [0, 0, 0, 0, V(2)])
    # Every eps_id occupies one contiguous block of rows.
    pieces = batch.split_by_episode()
    assert len(pieces) == len(set(batch[B.EPS_ID].tolist())) == 5


def test_bootstrap_value_feeds_gae_of_a_truncated_piece():
    from rlstack.policies.postprocessing import compute_advantages

    worker = make_worker({"length": 3, "truncate": True}, rollout_fragment_length=3, gamma=0.5)
    batch = compute_advantages(worker.sample(), gamma=0.5, lambda_=1.0)
    # Return of step t: sum of rewards to the end plus gamma^k * V(final obs [3]) = 31.
    expected = [1 + 0.5 + 0.25 + 0.125 * 31, 1 + 0.5 + 0.25 * 31, 1 + 0.5 * 31]
    np.testing.assert_allclose(batch[B.VALUE_TARGETS], expected, rtol=1e-6)


# ----- complete_episodes ---------------------------------------------------------------


def test_complete_mode_returns_long_episode_whole_and_once():
    worker = make_worker({"length": 5}, rollout_fragment_length=2, batch_mode="complete_episodes")
    seen_eps = []
    for _ in range(3):
        batch = worker.sample()
        assert batch.count >= 2
        episodes = batch.split_by_episode()
        for episode in episodes:
            assert obs0(episode) == [0, 1, 2, 3, 4]
            assert episode[B.TERMINATEDS].tolist() == [False] * 4 + [True]
            np.testing.assert_array_equal(episode[B.BOOTSTRAP_VALUE], 0)
            seen_eps.append(int(episode[B.EPS_ID][0]))
    assert seen_eps == sorted(set(seen_eps))
    assert seen_eps == [0, 1, 2]


def test_complete_mode_every_piece_ends_in_terminated_or_truncated():
    worker = make_worker({"length": [4, 3], "truncate": [True, False]},
                         rollout_fragment_length=3, num_envs_per_worker=2, batch_mode="complete_episodes")
    seen_eps, lengths = [], set()
    for _ in range(4):
        batch = worker.sample()
        assert batch.count >= 3 * 2
        for episode in batch.split_by_episode():
            length = episode.count
            lengths.add(length)
            assert length in (3, 4)
            assert obs0(episode) == list(range(length))
            done = episode[B.TERMINATEDS] | episode[B.TRUNCATEDS]
            assert done.tolist() == [False] * (length - 1) + [True]
            if length == 4:  # sub-env 0: time limit, bootstraps from V([4])
                assert episode[B.TRUNCATEDS][-1] and not episode[B.TERMINATEDS][-1]
                np.testing.assert_array_equal(episode[B.BOOTSTRAP_VALUE], [0, 0, 0, V(4)])
            else:
                assert episode[B.TERMINATEDS][-1] and not episode[B.TRUNCATEDS][-1]
                np.testing.assert_array_equal(episode[B.BOOTSTRAP_VALUE], 0)
            seen_eps.append(int(episode[B.EPS_ID][0]))
    assert lengths == {3, 4}
    assert len(seen_eps) == len(set(seen_eps))


def test_complete_mode_pieces_given_to_postprocess_are_whole_episodes():
    worker = make_worker({"length": 5}, rollout_fragment_length=2, batch_mode="complete_episodes")
    worker.sample()
    assert [obs0(p) for p in worker.policy.pieces] == [[0, 1, 2, 3, 4]]


# ----- rewards, horizon, metrics -------------------------------------------------------


@pytest.mark.parametrize("clip, expected", [(True, [1, -1, 1, 0]), (0.5, [0.5, -0.5, 0.25, 0.0]),
                                            (None, [3.0, -2.0, 0.25, 0.0])])
def test_clip_rewards_in_batch_but_not_in_metrics(clip, expected):
    worker = make_worker({"length": 4, "rewards": [3.0, -2.0, 0.25, 0.0]},
                         rollout_fragment_length=4, clip_rewards=clip)
    batch = worker.sample()
    np.testing.assert_allclose(batch[B.REWARDS], expected)
    assert worker.get_metrics() == [EpisodeStats(1.25, 4)]


def test_horizon_truncates_and_bootstraps_from_final_obs():
    worker = make_worker({"length": 10}, rollout_fragment_length=7, horizon=3)
    batch = worker.sample()
    assert obs0(batch) == [0, 1, 2, 0, 1, 2, 0]
    assert batch[B.TRUNCATEDS].tolist() == [False, False, True, False, False, True, False]
    assert not batch[B.TERMINATEDS].any()
    np.testing.assert_array_equal(batch[B.BOOTSTRAP_VALUE], [0, 0, V(3), 0, 0, V(3), V(1)])
    assert worker.get_metrics() == [EpisodeStats(3.0, 3)] * 2


def test_horizon_equal_to_termination_step_is_a_termination():
    worker = make_worker({"length": 3}, rollout_fragment_length=3, horizon=3)
    batch = worker.sample()
    assert batch[B.TERMINATEDS].tolist() == [False, False, True]
    assert not batch[B.TRUNCATEDS].any()
    np.testing.assert_array_equal(batch[B.BOOTSTRAP_VALUE], 0)


def test_no_done_at_end_records_each_episode_end_as_a_truncation_that_bootstraps():
    # CounterEnv terminates after 3 steps; 1.x's no_done_at_end: the end is not terminal.
    worker = make_worker({"length": 3}, rollout_fragment_length=4, no_done_at_end=True)
    batch = worker.sample()
    assert not batch[B.TERMINATEDS].any()
    assert batch[B.TRUNCATEDS].tolist() == [False, False, True, False]
    np.testing.assert_array_equal(batch[B.BOOTSTRAP_VALUE], [0, 0, V(3), V(1)])
    assert worker.get_metrics() == [EpisodeStats(3.0, 3)]


def test_get_metrics_returns_finished_episodes_and_clears():
    worker = make_worker({"length": 3, "rewards": [1.0, 2.0, 4.0]}, rollout_fragment_length=7)
    assert worker.get_metrics() == []
    worker.sample()
    assert worker.get_metrics() == [EpisodeStats(7.0, 3), EpisodeStats(7.0, 3)]
    assert worker.get_metrics() == []


def test_metrics_of_episode_spanning_two_fragments():
    worker = make_worker({"length": 4}, rollout_fragment_length=3)
    worker.sample()
    assert worker.get_metrics() == []
    worker.sample()
    assert worker.get_metrics() == [EpisodeStats(4.0, 4)]


def test_run_episodes_returns_requested_number():
    worker = make_worker({"length": 3, "rewards": [0.5]}, num_envs_per_worker=2)
    episodes = worker.run_episodes(num_episodes=2)
    assert episodes == [EpisodeStats(1.5, 3)] * 2
    # Evaluation episodes are not training metrics.
    assert worker.get_metrics() == []


def test_run_episodes_by_steps_finishes_no_partial_episode():
    worker = make_worker({"length": 3})
    episodes = worker.run_episodes(num_steps=7)
    assert episodes == [EpisodeStats(3.0, 3)] * 2


# ----- observation filter --------------------------------------------------------------


def _expected_mean_std_normalised(raw):
    """Row k normalised with the statistics of raw[0..k] (the filter updates, then applies)."""
    out = []
    for k in range(len(raw)):
        seen = np.asarray(raw[: k + 1], dtype=np.float64)
        std = seen.std(ddof=1) if k >= 1 else 1.0
        out.append(np.clip((raw[k] - seen.mean()) / (std + 1e-8), -10, 10))
    return np.asarray(out)


def test_mean_std_filter_normalises_obs_and_counts_what_it_saw():
    worker = make_worker({"length": 4}, rollout_fragment_length=6, observation_filter="MeanStdFilter")
    batch = worker.sample()
    raw = [0, 1, 2, 3, 0, 1]
    np.testing.assert_allclose(batch[B.OBS][:, 0], _expected_mean_std_normalised(raw), rtol=1e-5, atol=1e-6)
    # The policy acted on the normalised obs.
    np.testing.assert_allclose(batch[B.VF_PREDS], V(batch[B.OBS][:, 0]), rtol=1e-6)
    # First flush: the reset obs plus one new obs per step.
    assert int(worker.flush_filter()["count"]) == 1 + 6
    assert int(worker.flush_filter()["count"]) == 0
    worker.sample()
    assert int(worker.flush_filter()["count"]) == 6


def test_mean_std_filter_two_sub_envs_count():
    worker = make_worker({"length": 4}, rollout_fragment_length=5, num_envs_per_worker=2,
                         observation_filter="MeanStdFilter")
    worker.sample()
    assert int(worker.flush_filter()["count"]) == 2 + 5 * 2


def test_run_episodes_does_not_update_filter():
    worker = make_worker({"length": 3}, observation_filter="MeanStdFilter")
    worker.run_episodes(num_episodes=2)
    assert int(worker.flush_filter()["count"]) == 0
    assert int(worker.get_filter_state()["count"]) == 0


def test_no_filter_passes_obs_through():
    worker = make_worker({"length": 4}, rollout_fragment_length=3)
    assert obs0(worker.sample()) == [0, 1, 2]
    assert worker.flush_filter() == {}


def test_sampler_perf_reports_and_clears():
    worker = make_worker({"length": 4}, rollout_fragment_length=3)
    worker.sample()
    perf = worker.get_sampler_perf()
    assert set(perf) == {"mean_env_wait_ms", "mean_inference_ms", "mean_action_processing_ms",
                         "mean_obs_processing_ms"}
    assert all(v >= 0 for v in perf.values())
    assert all(v == 0 for v in worker.get_sampler_perf().values())
