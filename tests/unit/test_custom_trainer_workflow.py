"""A user's own Trainer with 1.13's training_iteration building blocks: two algorithms'
policies side by side (1.13's two-trainer workflow), a MultiAgentReplayBuffer,
train_one_step and standardized."""

from __future__ import annotations

import numpy as np
import pytest

from rlstack.evaluation.postprocessing import Postprocessing
from rlstack.execution.buffers.multi_agent_replay_buffer import MultiAgentReplayBuffer
from rlstack.execution.rollout_ops import synchronous_parallel_sample
from rlstack.execution.train_ops import train_one_step
from rlstack.examples.env.multi_agent import MultiAgentCartPole
from rlstack.policies.sample_batch import MultiAgentBatch, SampleBatch
from rlstack.trainers import with_common_config
from rlstack.trainers.dqn.dqn import DEFAULT_CONFIG as DQN_CONFIG
from rlstack.trainers.dqn.dqn_torch_policy import DQNTorchPolicy
from rlstack.trainers.ppo.ppo import DEFAULT_CONFIG as PPO_CONFIG
from rlstack.trainers.ppo.ppo_torch_policy import PPOTorchPolicy
from rlstack.trainers.trainer import Trainer
from rlstack.utils.metrics import LAST_TARGET_UPDATE_TS, NUM_ENV_STEPS_SAMPLED, NUM_TARGET_UPDATES
from rlstack.utils.sgd import standardized


class TwoPolicyTrainer(Trainer):
    @classmethod
    def get_default_config(cls):
        return with_common_config({"num_sgd_iter": 2})

    def setup(self, config):
        super().setup(config)
        self.replay = MultiAgentReplayBuffer(learning_starts=100, capacity=1000, replay_batch_size=32,
                                             prioritized_replay_alpha=0.0, seed=0)

    def training_iteration(self):
        ppo_batches = []
        for ma_batch in synchronous_parallel_sample(worker_set=self.workers, concat=False):
            self._counters[NUM_ENV_STEPS_SAMPLED] += ma_batch.count
            ppo_batches.append(ma_batch.policy_batches.pop("ppo_policy"))
            self.replay.add_batch(ma_batch)
        results = {}
        dqn_batch = self.replay.replay()
        if dqn_batch is not None:
            results.update(train_one_step(self, dqn_batch, ["dqn_policy"]))
            self._counters["agent_steps_trained_DQN"] += dqn_batch.agent_steps()  # a counter of its own
            if self._counters["agent_steps_trained_DQN"] - self._counters[LAST_TARGET_UPDATE_TS] >= 32:
                self.workers.local_worker().get_policy("dqn_policy").update_target()
                self._counters[NUM_TARGET_UPDATES] += 1
                self._counters[LAST_TARGET_UPDATE_TS] = self._counters["agent_steps_trained_DQN"]
        ppo_batch = SampleBatch.concat_samples(ppo_batches)
        ppo_batch[Postprocessing.ADVANTAGES] = standardized(ppo_batch[Postprocessing.ADVANTAGES])
        results.update(train_one_step(self, MultiAgentBatch({"ppo_policy": ppo_batch}, ppo_batch.count),
                                      ["ppo_policy"]))
        return results


def test_two_algorithms_policies_learn_in_a_custom_training_iteration():
    config = {
        "env": MultiAgentCartPole, "env_config": {"num_agents": 2}, "num_workers": 0, "framework": "torch",
        "rollout_fragment_length": 100, "seed": 0,
        "multiagent": {
            # Each policy's config is its algorithm's: keys the base Trainer lacks are accepted
            # there (use_critic, dueling), and the policy gets that algorithm's defaults.
            "policies": {"ppo_policy": (PPOTorchPolicy, None, None, {**PPO_CONFIG, "sgd_minibatch_size": 64}),
                         "dqn_policy": (DQNTorchPolicy, None, None, DQN_CONFIG)},
            "policy_mapping_fn": lambda agent_id, *args, **kwargs: "ppo_policy" if agent_id == 0 else "dqn_policy",
        },
    }
    trainer = TwoPolicyTrainer(config)
    try:
        ppo = trainer.get_policy("ppo_policy")
        assert ppo.config["clip_param"] == PPO_CONFIG["clip_param"]
        first = {pid: {k: v.copy() for k, v in trainer.get_policy(pid).get_weights().items()}
                 for pid in ("ppo_policy", "dqn_policy")}
        trainer.train()
        result = trainer.train()
        learner = result["info"]["learner"]
        assert set(learner) == {"ppo_policy", "dqn_policy"}
        assert trainer._counters[NUM_TARGET_UPDATES] >= 1 and trainer._counters["agent_steps_trained_DQN"] >= 32
        for pid, weights in first.items():
            after = trainer.get_policy(pid).get_weights()
            assert any(not np.array_equal(after[k], weights[k]) for k in weights), f"{pid} did not learn"
    finally:
        trainer.stop()


def test_multi_agent_replay_buffer_waits_for_learning_starts_and_replays_by_policy():
    buffer = MultiAgentReplayBuffer(learning_starts=10, capacity=100, replay_batch_size=4, seed=1)
    rows = SampleBatch({"obs": np.arange(6, dtype=np.float32), "rewards": np.ones(6, dtype=np.float32)})
    buffer.add_batch(MultiAgentBatch({"a": rows, "b": rows}, 6))
    assert buffer.replay() is None  # 6 of 10 steps
    buffer.add_batch(MultiAgentBatch({"a": rows}, 6))
    replayed = buffer.replay()
    assert set(replayed.policy_batches) == {"a", "b"} and replayed.policy_batches["a"].count == 4
    assert set(replayed.policy_batches["a"]["obs"]) <= set(range(6))
    assert "weights" in replayed.policy_batches["b"]
    buffer.update_priorities({"a": (replayed.policy_batches["a"]["batch_indexes"], np.full(4, 2.0))})
    with pytest.raises(ValueError, match="replay_mode='lockstep'"):
        MultiAgentReplayBuffer(replay_mode="lockstep")


def test_standardized_gives_zero_mean_unit_std():
    values = standardized(np.array([1.0, 2.0, 3.0, 4.0]))
    assert abs(values.mean()) < 1e-9 and abs(values.std() - 1.0) < 1e-9
    assert np.all(np.isfinite(standardized(np.ones(3))))
