"""PPO with use_lstm in trainers: remote workers act in numpy with state, evaluation
workers carry it, 1.13's "policy inference after training with LSTM" loop runs, a
checkpoint restores the same actions for the same state, and `rlstack rollout` carries
the state through its episodes."""

from __future__ import annotations

import numpy as np
import pytest

from rlstack.cli import main
from rlstack.examples.env.stateless_cartpole import StatelessCartPole
from rlstack.trainers.ppo import PPOTrainer

FRAMEWORK_MODULES = {"torch": "torch", "tf": "tensorflow"}


def _config(framework, **overrides):
    return {"framework": framework, "num_workers": 1, "train_batch_size": 400, "sgd_minibatch_size": 100,
            "num_sgd_iter": 2, "rollout_fragment_length": 100, "seed": 1, "evaluation_interval": 1,
            "evaluation_duration": 2, "evaluation_num_workers": 1,
            "model": {"use_lstm": True, "lstm_cell_size": 16, "max_seq_len": 10, "fcnet_hiddens": [16]},
            **overrides}


def inference_loop(trainer, seed, explore=False, steps=None, carry=True, env=None):
    """RLlib 1.13's docs loop ("policy inference after training, with LSTM"), after the
    import renames: start from the policy's initial state, feed each state_out back
    (``carry=False``: start every step from the initial state, a policy without memory).
    Returns the actions and the last state (on StatelessCartPole unless ``env`` is given)."""
    env = env or StatelessCartPole()
    obs, _ = env.reset(seed=seed)
    initial = trainer.get_policy().get_initial_state()
    state = initial
    actions, done = [], False
    while not done and (steps is None or len(actions) < steps):
        action, state, _ = trainer.compute_single_action(obs, state if carry else initial, explore=explore)
        obs, _, terminated, truncated, _ = env.step(action)
        actions.append(int(action))
        done = terminated or truncated
    return actions, state


def trained_fixture(config, env):
    """A module fixture, once per framework: ``(framework, trainer, result, checkpoint)``
    of a PPO trainer built with ``config(framework)`` on ``env`` after one iteration.
    Shared by the recurrent trainer tests."""

    @pytest.fixture(scope="module", params=["torch", "tf"])
    def trained(request, ray_local, tmp_path_factory):
        pytest.importorskip(FRAMEWORK_MODULES[request.param])
        trainer = PPOTrainer(config(request.param), env)
        result = trainer.train()
        checkpoint = trainer.save(str(tmp_path_factory.mktemp("ckpt")))
        yield request.param, trainer, result, str(getattr(checkpoint, "path", checkpoint))
        trainer.stop()

    return trained


trained = trained_fixture(_config, "StatelessCartPole")


def test_trains_with_remote_workers_and_evaluates_with_state(trained):
    _, trainer, result, _ = trained
    assert result["timesteps_total"] >= 400
    assert np.isfinite(result["info"]["learner"]["default_policy"]["learner_stats"]["total_loss"])
    assert result["evaluation"]["episodes_this_iter"] >= 2
    # The remote worker acts in numpy with the learner's LSTM weights.
    weights = trainer.workers.foreach_worker(lambda w: (w.sampling_policy.framework, w.get_weights()))
    learner = trainer.get_policy().get_weights()
    for framework, worker_weights in weights:
        assert framework in ("numpy", trained[0])
        np.testing.assert_allclose(worker_weights["lstm/kernel"], learner["lstm/kernel"], rtol=1e-6)


def test_the_113_inference_loop_carries_the_state(trained):
    _, trainer, _, _ = trained
    actions, state = inference_loop(trainer, seed=3)
    assert len(actions) >= 1 and [value.shape for value in state] == [(16,), (16,)]
    # The same greedy loop twice: the same actions; a stateless call differs in form.
    assert inference_loop(trainer, seed=3)[0] == actions
    assert np.asarray(trainer.compute_single_action(np.zeros(2, np.float32), explore=False)).shape == ()


def test_the_113_docs_loop_with_zeros_prev_action_and_prev_reward_runs(trained):
    # 1.13's docs, after the renames (and gymnasium's reset/step): the state built from
    # the config's lstm_cell_size, prev_action / prev_reward passed along (accepted; the
    # built-in LSTM does not read them: lstm_use_prev_action is not supported yet).
    _, trainer, _, _ = trained
    env = StatelessCartPole()
    obs, _ = env.reset(seed=0)
    lstm_cell_size = trainer.config["model"]["lstm_cell_size"]
    init_state = state = [np.zeros([lstm_cell_size], np.float32) for _ in range(2)]
    prev_a, prev_r, episodes, steps = 0, 0.0, 0, 0
    while episodes < 2:
        a, state_out, _ = trainer.compute_single_action(obs, state, prev_action=prev_a, prev_reward=prev_r)
        obs, reward, terminated, truncated, _ = env.step(a)
        steps += 1
        if terminated or truncated:
            obs, _ = env.reset()
            state, prev_a, prev_r = init_state, 0, 0.0
            episodes += 1
        else:
            state, prev_a, prev_r = state_out, a, reward
    assert steps >= 2


def test_compute_actions_takes_one_state_row_per_observation(trained):
    _, trainer, _, _ = trained
    observations = [np.zeros(2, np.float32), np.full(2, 0.1, np.float32)]
    rows = [np.repeat(value[None], 2, axis=0) for value in trainer.get_policy().get_initial_state()]
    actions, state_out, extras = trainer.compute_actions(observations, state=rows, explore=False)
    assert actions.shape == (2,) and [value.shape for value in state_out] == [(2, 16), (2, 16)]
    # Row by row, the same as compute_single_action from the same state.
    single = trainer.compute_single_action(observations[1], [value[1] for value in rows], explore=False)
    np.testing.assert_allclose(single[1][0], state_out[0][1], rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="one state row per observation"):
        trainer.compute_actions(observations, state=[value[:1] for value in rows])


def test_wrong_state_is_an_error_that_names_the_fix(trained):
    _, trainer, _, _ = trained
    with pytest.raises(ValueError, match="get_initial_state"):
        trainer.compute_single_action(np.zeros(2, np.float32), [np.zeros(3)], explore=False)


def assert_restored_acts_the_same(trained, config, env, act, loop, rtol=1e-6, atol=1e-7):
    """A trainer restored from the fixture's checkpoint (built with ``config(framework,
    ...)`` on ``env``, no workers) computes what the trained one does: each column of
    ``act(trainer)`` and the actions of ``loop(trainer)``."""
    framework, trainer, _, checkpoint = trained
    before = act(trainer)
    restored = PPOTrainer(config(framework, num_workers=0, evaluation_num_workers=0), env)
    restored.restore(checkpoint)
    try:
        after, loops = act(restored), (loop(trainer), loop(restored))
    finally:
        restored.stop()
    for key, value in before.items():
        np.testing.assert_allclose(after[key], value, rtol=rtol, atol=atol, err_msg=key)
    assert loops[0] == loops[1]


def rollout_cli_calls(checkpoint, tmp_path, monkeypatch):
    """Runs ``rlstack rollout`` for 2 episodes of the checkpoint; returns each call of
    ``Trainer.compute_single_action`` as ``(state, keyword arguments, output)`` and the
    transitions it saved."""
    calls = []
    act = PPOTrainer.compute_single_action

    def spy(self, observation=None, state=None, **kwargs):
        out = act(self, observation, state, **kwargs)
        given = {key: np.array(value) if isinstance(value, np.ndarray) else value for key, value in kwargs.items()}
        calls.append(([np.array(value) for value in state or []], given, out))
        return out

    monkeypatch.setattr(PPOTrainer, "compute_single_action", spy)
    out = tmp_path / "rollout.npz"
    assert main(["rollout", checkpoint, "--episodes", "2", "--out", str(out), "--seed", "7"]) == 0
    with np.load(out, allow_pickle=False) as data:
        saved = dict(data)
    assert len(calls) == len(saved["eps_id"]) and len(set(saved["eps_id"].tolist())) == 2
    return calls, saved


def test_checkpoint_restores_the_same_actions_for_the_same_state(trained):
    rng = np.random.default_rng(0)
    observations = rng.uniform(-0.2, 0.2, (20, 2)).astype(np.float32)
    states = [rng.normal(0, 1, (20, 16)).astype(np.float32) for _ in range(2)]

    def act(t):
        return t.get_policy().compute_actions(observations, explore=False, state_batches=states)[1]

    assert_restored_acts_the_same(trained, _config, "StatelessCartPole", act,
                                  lambda t: inference_loop(t, seed=5, steps=50)[0])


def test_rollout_cli_carries_the_state_through_episodes(trained, tmp_path, monkeypatch):
    framework, _, _, checkpoint = trained
    if framework != "torch":
        pytest.skip("one framework is enough for the CLI")
    calls, saved = rollout_cli_calls(checkpoint, tmp_path, monkeypatch)
    eps_id = saved["eps_id"]
    for i, (state, _, _) in enumerate(calls):
        assert [value.shape for value in state] == [(16,), (16,)]
        if i == 0 or eps_id[i] != eps_id[i - 1]:
            assert not any(value.any() for value in state)  # each episode starts from zeros
        else:
            previous_out = calls[i - 1][2][1]
            for given, returned in zip(state, previous_out):
                np.testing.assert_array_equal(given, returned)  # then follows state_out
