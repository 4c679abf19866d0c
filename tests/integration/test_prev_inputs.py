"""PPO with use_lstm reading the previous action and reward, in trainers: a remote worker
(numpy) and an evaluation worker carry them, 1.13's "policy inference after training with
LSTM" loop feeds each action and reward back, a checkpoint restores the same actions for
the same (obs, state, prev_action, prev_reward), `rlstack rollout` carries them through
its episodes, and a bad prev_action is an error that names the problem; in torch and TF."""

from __future__ import annotations

import numpy as np
import pytest

from rlstack.examples.env.stateless_cartpole import StatelessCartPole
from tests.integration.test_lstm import _config as lstm_config
from tests.integration.test_lstm import assert_restored_acts_the_same, rollout_cli_calls, trained_fixture

PREV = {"lstm_use_prev_action": True, "lstm_use_prev_reward": True}


def _config(framework, **overrides):
    config = lstm_config(framework, **overrides)
    return {**config, "model": {**config["model"], **PREV}}


def inference_loop(trainer, seed, steps=50):
    """RLlib 1.13's docs loop with ``lstm_use_prev_action`` / ``_reward``, after the
    renames: ``a, state_out, _ = trainer.compute_single_action(obs, state, prev_action=a,
    prev_reward=r)``; the state and the previous ones start at zeros."""
    env = StatelessCartPole()
    obs, _ = env.reset(seed=seed)
    state = trainer.get_policy().get_initial_state()
    a, r, actions, done = 0, 0.0, [], False
    while not done and len(actions) < steps:
        a, state, _ = trainer.compute_single_action(obs, state, prev_action=a, prev_reward=r, explore=False)
        obs, r, terminated, truncated, _ = env.step(a)
        actions.append(int(a))
        done = terminated or truncated
    return actions


trained = trained_fixture(_config, "StatelessCartPole")


def test_trains_with_a_remote_worker_and_evaluates_with_prev_inputs(trained):
    _, trainer, result, _ = trained
    assert result["timesteps_total"] >= 400 and result["evaluation"]["episodes_this_iter"] >= 2
    assert np.isfinite(result["info"]["learner"]["default_policy"]["learner_stats"]["total_loss"])
    # The remote worker acts in numpy and records the columns the learner trained on.
    batch = trainer.workers.foreach_worker(lambda w: w.sample() if w.worker_index else None)[-1]
    assert batch["prev_actions"].shape == (batch.count,) and batch["prev_rewards"].dtype == np.float32
    assert trainer.get_policy().get_weights()["lstm/kernel"].shape[0] == 16 + 2 + 1  # features, one-hot action, reward


def test_the_113_inference_loop_feeds_action_and_reward_back(trained):
    _, trainer, _, _ = trained
    actions = inference_loop(trainer, seed=3)
    assert len(actions) >= 1 and inference_loop(trainer, seed=3) == actions
    # The previous action is read: the same observation and state, another prev_action, other outputs.
    obs, state = np.zeros(2, np.float32), trainer.get_policy().get_initial_state()
    outs = [trainer.compute_single_action(obs, state, prev_action=a, prev_reward=1.0, explore=False)[2]
            for a in (0, 1)]
    assert not np.allclose(outs[0]["action_dist_inputs"], outs[1]["action_dist_inputs"])


def test_checkpoint_restores_the_same_actions_for_the_same_inputs(trained):
    rng = np.random.default_rng(0)
    observations = rng.uniform(-0.2, 0.2, (20, 2)).astype(np.float32)
    states = [rng.normal(0, 1, (20, 16)).astype(np.float32) for _ in range(2)]
    prev_actions, prev_rewards = rng.integers(0, 2, 20), rng.normal(0, 1, 20)

    def act(t):
        _, state_out, extras = t.compute_actions(list(observations), state=states, prev_action=prev_actions,
                                                 prev_reward=prev_rewards, explore=False)
        return {**extras, "state_out_0": state_out[0], "state_out_1": state_out[1]}

    assert_restored_acts_the_same(trained, _config, "StatelessCartPole", act,
                                  lambda t: inference_loop(t, seed=5, steps=30))


def test_bad_prev_action_is_an_error_that_names_the_problem(trained):
    _, trainer, _, _ = trained
    state = trainer.get_policy().get_initial_state()
    with pytest.raises(ValueError, match=r"prev_action has shape \(2,\); the model reads the previous action"):
        trainer.compute_single_action(np.zeros(2, np.float32), state, prev_action=[0, 1])
    with pytest.raises(ValueError, match=r"prev_action 2 is not in the action space; the model reads the previous "
                                         r"action, a category index in \[0, 2\)"):
        trainer.compute_single_action(np.zeros(2, np.float32), state, prev_action=2)


def test_rollout_cli_carries_prev_action_and_reward(trained, tmp_path, monkeypatch):
    framework, _, _, checkpoint = trained
    if framework != "torch":
        pytest.skip("one framework is enough for the CLI")
    calls, saved = rollout_cli_calls(checkpoint, tmp_path, monkeypatch)
    eps_id, actions, rewards = saved["eps_id"], saved["actions"], saved["rewards"]
    for i, (_, kwargs, _) in enumerate(calls):
        given = np.reshape(kwargs["prev_action"], -1).tolist(), np.reshape(kwargs["prev_reward"], -1).tolist()
        if i == 0 or eps_id[i] != eps_id[i - 1]:
            assert given == ([0], [0.0])  # each episode starts from zeros
        else:
            assert given == ([actions[i - 1]], [rewards[i - 1]])  # then the step before
