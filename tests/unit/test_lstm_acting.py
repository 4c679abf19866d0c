"""Acting with state on rollout workers and in evaluation episodes: each sub-env keeps
its own state, which starts at zeros with every episode and follows the policy's
state_out from step to step, across fragment boundaries too."""

from __future__ import annotations

import numpy as np
import pytest

from rlstack.evaluation.rollout_worker import RolloutWorker
from rlstack.examples.env.stateless_cartpole import StatelessCartPole
from rlstack.policies.postprocessing import postprocess_advantages
from rlstack.sample_batch import SampleBatch
from rlstack.trainers.common.config import merge_config
from rlstack.trainers.ppo import DEFAULT_CONFIG

B = SampleBatch
MODEL = {"use_lstm": True, "lstm_cell_size": 4, "max_seq_len": 5, "fcnet_hiddens": [8]}


def _worker(**overrides):
    config = merge_config(DEFAULT_CONFIG, {"num_workers": 0, "num_envs_per_worker": 3, "rollout_fragment_length": 30,
                                           "seed": 0, "model": MODEL, **overrides}, "PPO")
    # The driver's worker: a torch learner policy that acts through a numpy copy.
    return RolloutWorker("StatelessCartPole", "rlstack.trainers.ppo.ppo_torch_policy:PPOTorchPolicy", config,
                         postprocess_fn=postprocess_advantages)


def test_stateless_cartpole_hides_the_velocities():
    env = StatelessCartPole()
    obs, _ = env.reset(seed=0)
    assert env.observation_space.shape == (2,) and obs.shape == (2,)
    full = env.state  # CartPole's [x, x_dot, theta, theta_dot]
    np.testing.assert_allclose(obs, [full[0], full[2]], rtol=1e-6)


def test_each_sub_env_state_starts_at_zeros_and_follows_state_out():
    pytest.importorskip("torch")
    worker = _worker()
    assert worker.sampling_policy.framework == "numpy"
    batch = SampleBatch.concat_samples([worker.sample(), worker.sample()])
    by_episode: dict[int, list[int]] = {}
    for row, eps_id in enumerate(batch[B.EPS_ID].tolist()):
        by_episode.setdefault(eps_id, []).append(row)
    assert len(by_episode) > 3  # several episodes, several sub-envs, two fragments
    crossed = 0
    for rows in by_episode.values():
        state_in = np.stack([batch["state_in_0"][rows], batch["state_in_1"][rows]])
        state_out = np.stack([batch["state_out_0"][rows], batch["state_out_1"][rows]])
        # Each step acts from the state the previous one returned, also where a fragment
        # boundary splits the episode into non-adjacent rows.
        np.testing.assert_array_equal(state_in[:, 1:], state_out[:, :-1])
        crossed += int(np.any(np.diff(rows) > 1))
    assert crossed > 0
    starts = [rows[0] for rows in by_episode.values()]
    first_episodes = starts[:3]  # the first fragment's first row of each sub-env
    assert not batch["state_in_0"][first_episodes].any() and not batch["state_in_1"][first_episodes].any()
    # Episodes that started inside the batch (after another one ended on their sub-env) too.
    ended = batch[B.TERMINATEDS] | batch[B.TRUNCATEDS]
    after_end = [rows[0] for rows in by_episode.values() if rows[0] > 0 and any(ended[:rows[0]])]
    assert after_end and not batch["state_in_0"][after_end].any()


def test_state_in_rows_are_what_the_policy_acted_from():
    pytest.importorskip("torch")
    worker = _worker(num_envs_per_worker=1)
    batch = worker.sample()
    policy = worker.policy
    policy.set_weights(worker.sampling_policy.get_weights())
    _, extras = policy.compute_actions(batch[B.OBS], explore=False,
                                       state_batches=[batch["state_in_0"], batch["state_in_1"]])
    np.testing.assert_allclose(extras[B.VF_PREDS], batch[B.VF_PREDS], rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(extras["state_out_0"], batch["state_out_0"], rtol=1e-4, atol=1e-6)


def test_evaluation_episodes_carry_and_reset_the_state(monkeypatch):
    pytest.importorskip("torch")
    worker = _worker(num_envs_per_worker=2)
    policy = worker.sampling_policy
    seen: list[list[np.ndarray]] = []
    act = type(policy).compute_actions

    def spy(self, obs, explore=None, state_batches=None, **prev):
        seen.append([value.copy() for value in state_batches])
        return act(self, obs, explore, state_batches, **prev)

    monkeypatch.setattr(type(policy), "compute_actions", spy)
    episodes = worker.run_episodes(num_episodes=3)
    assert len(episodes) == 3
    assert not seen[0][0].any()  # the first step of both sub-envs: zeros
    assert any(state[0].any() for state in seen[1:])  # then the state moves
    # A sub-env whose episode ended starts the next one from zeros again.
    assert any(not state[0][i].any() for state in seen[1:] for i in range(2))


ATTENTION = {"use_attention": True, "max_seq_len": 5, "fcnet_hiddens": [8], "attention_dim": 8,
             "attention_head_dim": 4, "attention_memory_inference": 3, "attention_memory_training": 3,
             "attention_position_wise_mlp_dim": 8, "attention_use_n_prev_actions": 2,
             "attention_use_n_prev_rewards": 3}


@pytest.mark.parametrize("model", [{**MODEL, "lstm_use_prev_action": True, "lstm_use_prev_reward": True}, ATTENTION],
                         ids=["lstm", "attention"])
def test_prev_columns_are_the_previous_steps_and_zeros_at_each_episode_start(model):
    pytest.importorskip("torch")
    worker = _worker(model=model, rollout_fragment_length=20)
    # The LSTM acts in numpy, the GTrXL (no numpy twin) in torch.
    assert worker.sampling_policy.framework == ("numpy" if "use_lstm" in model else "torch")
    batch = SampleBatch.concat_samples([worker.sample(), worker.sample()])
    by_episode: dict[int, list[int]] = {}
    for row, eps_id in enumerate(batch[B.EPS_ID].tolist()):
        by_episode.setdefault(eps_id, []).append(row)
    n_actions, n_rewards = (1, 1) if "use_lstm" in model else (2, 3)
    crossed, restarted = 0, 0
    for eps_id, rows in by_episode.items():
        actions, rewards = batch[B.ACTIONS][rows], batch[B.REWARDS][rows]
        # Each step reads the steps before it in its episode (oldest first), zeros before its start.
        past_actions = np.concatenate([np.zeros(n_actions, actions.dtype), actions])
        past_rewards = np.concatenate([np.zeros(n_rewards, np.float32), rewards])
        expected_a = np.stack([past_actions[t : t + n_actions] for t in range(len(rows))])
        expected_r = np.stack([past_rewards[t : t + n_rewards] for t in range(len(rows))])
        got_a, got_r = batch[B.PREV_ACTIONS][rows], batch[B.PREV_REWARDS][rows]
        np.testing.assert_array_equal(got_a.reshape(expected_a.shape), expected_a, err_msg=f"episode {eps_id}")
        np.testing.assert_array_equal(got_r.reshape(expected_r.shape), expected_r, err_msg=f"episode {eps_id}")
        crossed += int(np.any(np.diff(rows) > 1))  # split by a fragment boundary
        restarted += int(rows[0] > 0 and bool(batch[B.TERMINATEDS][: rows[0]].any()))
    assert len(by_episode) > 3 and crossed > 0 and restarted > 0
    assert batch[B.PREV_ACTIONS].shape == (batch.count, *(() if n_actions == 1 else (n_actions,)))
    # The recorded inputs are what the policy acted with.
    policy = worker.sampling_policy
    states = [batch[f"state_in_{i}"] for i in range(policy.num_state_tensors())]
    _, extras = policy.compute_actions(batch[B.OBS], explore=False, state_batches=states,
                                       prev_action_batch=batch[B.PREV_ACTIONS],
                                       prev_reward_batch=batch[B.PREV_REWARDS])
    np.testing.assert_allclose(extras[B.VF_PREDS], batch[B.VF_PREDS], rtol=1e-4, atol=1e-6)
