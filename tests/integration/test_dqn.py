"""DQN and ApeX end to end: what a user relies on after a few hundred env steps.

* DQNTrainer in the driver (``num_workers=0``) and with remote rollout workers: the
  classic result keys, the replay buffer's size, epsilon annealing, target-network
  updates and ``training_intensity``'s replay ratio, in torch and TF;
* checkpoints: the same greedy actions, the full policy state (target network and Adam
  slots included), the counters and, with ``store_buffer_in_checkpoints``, the replay
  rows come back; a DQN checkpoint is refused by PPO;
* image and Dict observations, the config errors a user meets first;
* ApeXTrainer on a 2-CPU local Ray (fractional worker CPUs, two replay shards): its
  result keys, per-worker epsilons, checkpoint restore and shutdown;
* ``tune.Tuner("DQN")``.

Every training here is tiny (hundreds of env steps, 16-unit layers).
"""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
import ray
from ray import tune

from rlstack.errors import CheckpointError, ConfigError
from rlstack.trainers.common.checkpoint_files import read_checkpoint
from rlstack.trainers.dqn import ApeXTrainer, DQNTrainer
from rlstack.trainers.ppo import PPOTrainer
from tests.helpers.actors import still_alive_after
from tests.helpers.distributed_replay_configs import DISTRIBUTED_REPLAY_TINY
from tests.helpers.envs import ContinuousEnv, DictObsEnv, ImageEnv

# 4 steps per sampling round, learning from 100 sampled steps on, one train batch of 16
# rows per round (training_intensity None), a target update every 40 sampled steps.
TINY = {
    "num_workers": 0,
    "seed": 0,
    "rollout_fragment_length": 4,
    "min_sample_timesteps_per_reporting": 200,
    "learning_starts": 100,
    "buffer_size": 1000,
    "train_batch_size": 16,
    "target_network_update_freq": 40,
    "hiddens": [16],
    "model": {"fcnet_hiddens": [16]},
    "exploration_config": {"epsilon_timesteps": 1000},
}

APEX_TINY = {
    **DISTRIBUTED_REPLAY_TINY,
    "max_weight_sync_delay": 40,
    "target_network_update_freq": 200,
    "hiddens": [16],
    "model": {"fcnet_hiddens": [16]},
}


def _cartpole_observations(n: int = 100, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-0.5, 0.5, (n, 4)).astype(np.float32)


def _greedy(trainer, observations) -> list[int]:
    return [int(trainer.compute_single_action(obs, explore=False)) for obs in observations]


def _learner_stats(result: dict) -> dict:
    return result["info"]["learner"]["default_policy"]["learner_stats"]


def _assert_arrays_equal(actual: dict, expected: dict) -> None:
    assert sorted(actual) == sorted(expected)
    for key in expected:
        np.testing.assert_array_equal(actual[key], expected[key], err_msg=key)


def _wait_until_learner_idle(learner, timeout_s: float = 60.0) -> None:
    """Waits until ApeX's learner thread has learned on every batch queued so far, so the
    weights stay put until the next train() (the thread keeps learning after train()
    returns). ``queue.Queue.unfinished_tasks`` counts every put: the thread never calls
    ``task_done``."""
    deadline = time.monotonic() + timeout_s
    while learner.num_steps < learner.inqueue.unfinished_tasks:
        learner.check()
        assert time.monotonic() < deadline, "the learner thread did not drain its queue"
        time.sleep(0.01)


def _trained_one_batch_per_round(sampled: int, learning_starts: int, round_size: int, batch: int) -> int:
    """DQN's trained steps without training_intensity: one ``batch`` per sampling round
    that ends with at least ``learning_starts`` steps sampled."""
    first = -(-learning_starts // round_size) * round_size  # the first such round's end
    return 0 if sampled < first else batch * ((sampled - first) // round_size + 1)


# ----- DQN in the driver ---------------------------------------------------------------------


def test_dqn_two_iterations(framework):
    trainer = DQNTrainer({**TINY, "framework": framework}, "CartPole-v1")
    results = [trainer.train(), trainer.train()]
    for iteration, result in enumerate(results, start=1):
        sampled = 200 * iteration
        assert result["training_iteration"] == iteration
        assert result["timesteps_total"] == result["num_env_steps_sampled"] == sampled
        assert result["timesteps_this_iter"] == 200
        assert result["info"]["num_env_steps_sampled"] == sampled
        trained = _trained_one_batch_per_round(sampled, 100, 4, 16)  # 416, then 1216
        assert result["num_env_steps_trained"] == result["info"]["num_env_steps_trained"] == trained > 0
        assert result["episodes_total"] > 0 and np.isfinite(result["episode_reward_mean"])
        stats = _learner_stats(result)
        for key in ("mean_q", "min_q", "max_q", "loss", "mean_td_error"):
            assert np.isfinite(stats[key]), key
        assert "td_error" not in stats  # consumed by the priority update, not reported
        assert stats["cur_lr"] == pytest.approx(5e-4)
        # The buffer (capacity 1000) holds every sampled step.
        buffer = result["replay_buffer"]
        assert buffer["num_entries"] == buffer["num_added"] == result["timesteps_total"]
        assert buffer["capacity"] == 1000
        assert buffer["num_sampled"] == trained
        # A target update every 40 sampled steps (10 rounds of 4).
        assert result["num_target_updates"] == sampled // 40
        # Epsilon falls linearly from 1.0 to 0.02 over 1000 steps.
        assert result["cur_epsilon"] == pytest.approx(1.0 - 0.98 * sampled / 1000)
    assert results[1]["cur_epsilon"] < results[0]["cur_epsilon"]
    trainer.stop()


def test_dqn_remote_workers_and_training_intensity(ray_local, framework):
    learning_starts, round_size, intensity = 96, 2 * 4, 4
    trainer = DQNTrainer({**TINY, "framework": framework, "num_workers": 2, "num_cpus_per_worker": 0.5,
                          "learning_starts": learning_starts, "training_intensity": intensity}, "CartPole-v1")
    for iteration in (1, 2):
        result = trainer.train()
        sampled = 200 * iteration
        assert result["num_healthy_workers"] == 2
        # Each round is one fragment of 4 steps from each of the 2 workers.
        assert result["timesteps_total"] == result["num_env_steps_sampled"] == sampled
        assert result["replay_buffer"]["num_entries"] == sampled
        # _num_train_steps: every round of 8 sampled steps earns 8 * 4 / 16 = 2 gradient
        # steps of 16 rows, from the round that reaches learning_starts (96, a whole
        # number of rounds) on: trained = intensity * (sampled - learning_starts + round).
        assert result["num_env_steps_trained"] == intensity * (sampled - learning_starts + round_size)
        assert result["episodes_total"] > 0
    # Every worker acts with the learner's latest weights.
    weights = trainer.get_weights()["default_policy"]
    for remote in ray.get([w.get_weights.remote() for w in trainer.workers.remote_workers()]):
        _assert_arrays_equal(remote, weights)
    trainer.stop()


# ----- checkpoints ----------------------------------------------------------------------------


def test_dqn_checkpoint_restores_policy_counters_and_replay_buffer(framework, tmp_path):
    # Target updates at 60, 120 and 180 sampled steps: after 200 the target lags the online net.
    config = {**TINY, "framework": framework, "target_network_update_freq": 60, "store_buffer_in_checkpoints": True}
    trainer = DQNTrainer(config, "CartPole-v1")
    result = trainer.train()
    assert result["num_target_updates"] == 3
    path = trainer.save(str(tmp_path / "ckpt"))
    assert sorted(os.listdir(path)) == ["filters.npz", "policy_state.npz", "replay_buffer.npz",
                                        "rlstack_checkpoint.json"]
    observations = _cartpole_observations()
    expected = _greedy(trainer, observations)
    saved_state = trainer.get_policy().get_state()
    saved_buffer = trainer.replay_buffer.get_state()
    assert any(key.startswith("optimizer/") for key in saved_state)
    target_keys = [key for key in saved_state if key.startswith("target/")]
    assert target_keys
    assert any(not np.array_equal(saved_state[key], saved_state["weights/" + key[len("target/"):]])
               for key in target_keys)  # the target network is state of its own

    restored = DQNTrainer(config, "CartPole-v1")
    restored.restore(path)
    assert _greedy(restored, observations) == expected
    _assert_arrays_equal(restored.get_policy().get_state(), saved_state)
    assert restored.replay_buffer.stats()["num_entries"] == 200
    _assert_arrays_equal(restored.replay_buffer.get_state(), saved_buffer)
    assert restored.iteration == 1
    # The counters carry on: sampled steps, and the target-update schedule (240, 300, 360).
    next_result = restored.train()
    assert next_result["training_iteration"] == 2
    assert next_result["timesteps_total"] == 400
    assert next_result["num_target_updates"] == 6
    assert next_result["num_env_steps_trained"] == _trained_one_batch_per_round(400, 100, 4, 16)
    assert next_result["replay_buffer"]["num_entries"] == 400

    from_ckpt = DQNTrainer.from_checkpoint(path)
    assert from_ckpt.config["framework"] == framework and from_ckpt.iteration == 1
    assert _greedy(from_ckpt, observations) == expected
    assert from_ckpt.replay_buffer.stats()["num_entries"] == 200

    ppo = PPOTrainer({"num_workers": 0, "framework": framework}, "CartPole-v1")
    with pytest.raises(CheckpointError, match="written by 'DQN'"):
        ppo.restore(path)
    with pytest.raises(CheckpointError, match="written by 'DQN'"):
        PPOTrainer.from_checkpoint(path)
    for t in (trainer, restored, from_ckpt, ppo):
        t.stop()


def test_dqn_checkpoint_without_replay_buffer(tmp_path):
    trainer = DQNTrainer(TINY, "CartPole-v1")  # store_buffer_in_checkpoints defaults to False
    trainer.train()
    path = trainer.save(str(tmp_path / "ckpt"))
    trainer.stop()
    assert sorted(os.listdir(path)) == ["filters.npz", "policy_state.npz", "rlstack_checkpoint.json"]
    metadata, arrays = read_checkpoint(path)
    assert sorted(arrays) == ["filters", "policy_state"]
    assert metadata["algorithm"] == "DQN"
    assert metadata["counters"]["num_env_steps_sampled"] == 200
    assert metadata["counters"]["num_target_updates"] == 5
    restored = DQNTrainer(TINY, "CartPole-v1")
    restored.restore(path)
    assert restored.replay_buffer.stats()["num_entries"] == 0
    # Learning resumes at once (learning_starts was passed) on the refilling buffer.
    result = restored.train()
    assert result["timesteps_total"] == 400 and result["replay_buffer"]["num_entries"] == 200
    assert result["num_env_steps_trained"] == _trained_one_batch_per_round(400, 100, 4, 16)
    restored.stop()


# ----- observation types --------------------------------------------------------------------


@pytest.mark.parametrize("env", [ImageEnv, DictObsEnv], ids=["image", "dict"])
def test_dqn_image_and_dict_observations(framework, env):
    trainer = DQNTrainer({**TINY, "framework": framework, "learning_starts": 40,
                          "min_sample_timesteps_per_reporting": 100}, env)
    result = trainer.train()
    assert result["timesteps_total"] == 100
    assert result["num_env_steps_trained"] > 0 and np.isfinite(_learner_stats(result)["loss"])
    assert result["episodes_total"] > 0 and np.isfinite(result["episode_reward_mean"])
    obs, _ = env().reset(seed=1)
    num_actions = trainer.get_policy().action_space.n
    assert trainer.compute_single_action(obs, explore=False) in range(num_actions)
    assert trainer.compute_single_action(obs, explore=True) in range(num_actions)
    action, _, extras = trainer.compute_single_action(obs, explore=False, full_fetch=True)
    assert extras["q_values"].shape == (num_actions,) and action == int(np.argmax(extras["q_values"]))
    trainer.stop()


# ----- config errors -------------------------------------------------------------------------


def test_dqn_needs_discrete_actions():
    with pytest.raises(ConfigError, match="Discrete"):
        DQNTrainer({"num_workers": 0}, ContinuousEnv)


def test_apex_needs_remote_workers():
    with pytest.raises(ConfigError, match="num_workers"):
        ApeXTrainer({"num_workers": 0}, "CartPole-v1")


def test_misspelled_key_suggests_the_right_one():
    with pytest.raises(ConfigError, match=r"'buffer_sise'.*did you mean 'buffer_size'"):
        DQNTrainer({"num_workers": 0, "buffer_sise": 1000}, "CartPole-v1")


# ----- ApeX ---------------------------------------------------------------------------------


def test_apex_trains_checkpoints_and_stops(ray_local, framework, tmp_path):
    config = {**APEX_TINY, "framework": framework, "store_buffer_in_checkpoints": True}
    trainer = ApeXTrainer(config, "CartPole-v1")
    results = [trainer.train() for _ in range(3)]
    # The learner thread runs asynchronously; give a slow first compile a few more rounds.
    while results[-1]["num_env_steps_trained"] == 0 and len(results) < 15:
        results.append(trainer.train())
    sampled = [r["num_env_steps_sampled"] for r in results]
    trained = [r["num_env_steps_trained"] for r in results]
    assert all(b - a >= 300 for a, b in zip(sampled, sampled[1:])) and sampled[0] >= 300
    assert trained == sorted(trained) and trained[-1] > 0
    result = results[-1]
    assert result["timesteps_total"] == result["num_env_steps_sampled"]
    assert result["num_healthy_workers"] == 3
    assert result["episodes_total"] > 0 and np.isfinite(result["episode_reward_mean"])
    shards = result["replay_shards"]
    assert len(shards) == 2 and all(s["capacity"] == 1000 for s in shards)
    assert 0 < sum(s["num_entries"] for s in shards) <= result["timesteps_total"]
    assert result["learner_queue"]["capacity"] == 16 and result["learner_queue"]["size_mean"] >= 0
    assert result["num_weight_syncs"] > 0
    assert result["sample_throughput"] > 0
    assert np.isfinite(_learner_stats(result)["mean_q"])
    n = 3
    epsilons = [0.4 ** (1 + 7 * i / (n - 1)) for i in range(n)]
    assert result["per_worker_epsilon"] == pytest.approx(epsilons)
    # ... and those are the epsilons the workers act with.
    acting = trainer.workers.foreach_worker(lambda w: w.sampling_policy.exploration.epsilon(0), local=False)
    assert acting == pytest.approx(epsilons)

    _wait_until_learner_idle(trainer.learner)
    path = trainer.save(str(tmp_path / "ckpt"))
    observations = _cartpole_observations()
    expected = _greedy(trainer, observations)
    shard_states = ray.get([shard.get_state.remote() for shard in trainer.replay_shards])
    assert sum(int(state["counters"][0]) for state in shard_states) > 0
    _, arrays = read_checkpoint(path)
    assert sorted(arrays) == ["filters", "policy_state", "replay_shard_0", "replay_shard_1"]

    workers = list(trainer.workers.remote_workers())
    trainer.stop()  # also frees the workers' CPUs for the restored trainer
    assert not trainer.learner.is_alive()
    # ray.kill is asynchronous: wait (bounded) until the shards and workers refuse calls.
    assert not still_alive_after(trainer.replay_shards, "stats")
    assert not still_alive_after(workers, "ping")

    restored = ApeXTrainer(config, "CartPole-v1")
    restored.restore(path)
    assert restored.iteration == len(results)
    assert _greedy(restored, observations) == expected
    for shard, state in zip(restored.replay_shards, shard_states):
        _assert_arrays_equal(ray.get(shard.get_state.remote()), state)
    next_result = restored.train()
    assert next_result["timesteps_total"] >= result["timesteps_total"] + 300
    restored.stop()
    assert not restored.learner.is_alive()


# ----- Tune ---------------------------------------------------------------------------------


def test_tuner_runs_dqn_by_name(ray_local, tmp_path):
    tuner = tune.Tuner(
        "DQN",
        param_space={**TINY, "env": "CartPole-v1", "framework": "torch"},
        run_config=tune.RunConfig(stop={"training_iteration": 1}, storage_path=str(tmp_path), name="dqn_by_name",
                                  verbose=0),
    )
    results = tuner.fit()
    assert not results.errors, results.errors
    metrics = results[0].metrics
    assert metrics["training_iteration"] == 1 and metrics["timesteps_total"] == 200
    assert np.isfinite(metrics["episode_reward_mean"])
    assert metrics["replay_buffer"]["num_entries"] == 200
