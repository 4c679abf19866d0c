"""RLlib 1.x's execution plans on rlstack: a build_trainer() class and a Trainer subclass
that train by pulling their execution_plan (rlstack/execution's operators on
rlstack's workers, counters and result dict), the 1.13 module paths of the operators, and
their argument errors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from rlstack.execution.concurrency_ops import Concurrently
from rlstack.execution.local_iterator import NOT_READY, LocalIterator, MetricsContext, activate
from rlstack.execution.metric_ops import StandardMetricsReporting
from rlstack.execution.replay_ops import Replay, StoreToReplayBuffer
from rlstack.execution.rollout_ops import ConcatBatches, ParallelRollouts, SelectExperiences, StandardizeFields
from rlstack.execution.train_ops import TrainOneStep, UpdateTargetNetwork
from rlstack.sample_batch import MultiAgentBatch, SampleBatch
from rlstack.trainers.trainer import Trainer, with_common_config

pytest.importorskip("torch")

# Keys every result of a training_step carries; a plan's results must carry them too.
RESULT_KEYS = {"episode_reward_mean", "episode_reward_min", "episode_reward_max", "episode_len_mean",
               "episodes_this_iter", "episodes_total", "timesteps_total", "timesteps_this_iter",
               "num_env_steps_sampled", "num_env_steps_trained", "num_agent_steps_sampled", "num_healthy_workers",
               "info", "timers", "sampler_perf", "perf", "custom_metrics", "hist_stats", "config"}


def _weights(trainer):
    return {k: np.copy(v) for k, v in trainer.get_policy().get_weights().items()}


def _changed(before, after):
    return any(not np.array_equal(before[k], after[k]) for k in before)


def _pg_plan(workers, config, **kwargs):
    # 1.x's PG plan, written by hand: bulk-sync rollouts, concatenated, one step each.
    rollouts = ParallelRollouts(workers, mode="bulk_sync")
    train_op = rollouts.combine(ConcatBatches(min_batch_size=config["train_batch_size"])).for_each(
        TrainOneStep(workers))
    return StandardMetricsReporting(train_op, workers, config)


def test_a_build_trainer_class_trains_with_its_execution_plan():
    from rlstack.trainers.pg.pg import DEFAULT_CONFIG as PG_CONFIG
    from rlstack.trainers.pg.pg_torch_policy import PGTorchPolicy
    from rlstack.trainers.trainer_template import build_trainer

    seen = []
    with pytest.warns(DeprecationWarning, match="build_trainer"):
        MyPG = build_trainer(name="MyPG", default_config=PG_CONFIG, default_policy=PGTorchPolicy,
                             execution_plan=_pg_plan, before_init=lambda t: seen.append("before"),
                             after_init=lambda t: seen.append(("after", t.workers is not None)),
                             validate_config=lambda c: seen.append(("validate", c["train_batch_size"])))
    assert MyPG.__name__ == "MyPG"
    trainer = MyPG({"framework": "torch", "num_workers": 0, "train_batch_size": 200, "rollout_fragment_length": 50,
                    "model": {"fcnet_hiddens": [16]}, "seed": 0}, env="CartPole-v1")
    try:
        assert seen[-1] == ("after", True) and "before" in seen and ("validate", 200) in seen
        before = _weights(trainer)
        first = trainer.train()
        second = trainer.train()
        assert RESULT_KEYS <= set(first) and RESULT_KEYS <= set(second)
        # ConcatBatches(200) of 50-step fragments: exactly 200 steps an iteration.
        assert (first["timesteps_total"], second["timesteps_total"]) == (200, 400)
        assert second["timesteps_this_iter"] == 200 and second["num_env_steps_trained"] == 400
        assert second["info"]["num_env_steps_sampled"] == 400
        stats = second["info"]["learner"]["default_policy"]["learner_stats"]
        assert np.isfinite(stats["policy_loss"])
        assert second["episodes_total"] >= 1 and np.isfinite(second["episode_reward_mean"])
        assert second["timers"]["learn_time_ms"] > 0 and second["timers"]["sample_time_ms"] > 0
        assert _changed(before, _weights(trainer))
    finally:
        trainer.stop()


def test_async_rollouts_from_a_remote_worker_train(ray_local):
    from rlstack.trainers.pg.pg_torch_policy import PGTorchPolicy
    from rlstack.trainers.trainer_template import build_trainer

    sources = []

    def async_plan(workers, config):  # 1.x before 1.12: no **kwargs
        rollouts = ParallelRollouts(workers, mode="async").zip_with_source_actor()
        train_op = (rollouts.for_each(lambda pair: sources.append(pair[0]) or pair[1])
                    .combine(ConcatBatches(min_batch_size=config["train_batch_size"]))
                    .for_each(TrainOneStep(workers)))
        return StandardMetricsReporting(train_op, workers, config)

    with pytest.warns(DeprecationWarning):
        AsyncPG = build_trainer(name="AsyncPG", default_policy=PGTorchPolicy, execution_plan=async_plan)
    trainer = AsyncPG({"framework": "torch", "num_workers": 1, "train_batch_size": 100, "rollout_fragment_length": 50,
                       "model": {"fcnet_hiddens": [8]}}, env="CartPole-v1")
    try:
        result = trainer.train()
        assert result["timesteps_total"] == 100 and result["num_healthy_workers"] == 1
        assert sources and all(source == trainer.workers.remote_workers()[0] for source in sources)
        # The raw ParallelIterator, gathered by hand: one fragment per worker per round.
        raw = ParallelRollouts(trainer.workers, mode="raw")
        assert raw.num_shards() == 1
        assert [batch.count for batch in raw.for_each(lambda b: b.copy()).gather_sync().take(2)] == [50, 50]
    finally:
        trainer.stop()


def test_build_trainer_hooks_and_config_switches():
    from rlstack.errors import ConfigError
    from rlstack.trainers.pg.pg_torch_policy import PGTorchPolicy
    from rlstack.trainers.trainer_template import build_trainer

    envs, calls = [], []
    defaults = with_common_config({"my_section": {"a": 1, "b": 2}})
    with pytest.warns(DeprecationWarning):
        Custom = build_trainer("Custom", default_config=defaults, default_policy=PGTorchPolicy,
                               allow_unknown_configs=True, allow_unknown_subkeys=["my_section"],
                               validate_env=lambda env, context: envs.append(context.worker_index),
                               before_evaluate_fn=lambda trainer: calls.append("evaluate"))
        Strict = Custom.with_updates(name="Strict", allow_unknown_configs=False)
    merged = Custom.merge_and_validate({"my_key": 3, "my_section": {"b": 5, "c": 6}})
    assert merged["my_key"] == 3 and merged["my_section"] == {"a": 1, "b": 5, "c": 6}
    assert Strict.__name__ == "Strict"
    with pytest.raises(ConfigError, match="my_key"):
        Strict.merge_and_validate({"my_key": 3})
    # Without an execution plan the class trains with the synchronous training_step.
    trainer = Custom({"framework": "torch", "num_workers": 0, "evaluation_duration": 1,
                      "model": {"fcnet_hiddens": [8]}}, env="CartPole-v1")
    try:
        from rlstack.trainers.common.trainer import runs_execution_plan

        assert envs == [0] and not runs_execution_plan(Custom, None)
        trainer.evaluate()
        assert calls == ["evaluate"]
    finally:
        trainer.stop()


class ReplayTrainer(Trainer):
    """A 1.x-style DQN: a Trainer subclass whose only algorithm is its execution_plan."""

    @classmethod
    def get_default_config(cls):
        from rlstack.trainers.dqn.dqn import DEFAULT_CONFIG

        return DEFAULT_CONFIG

    def get_default_policy_class(self, config):
        from rlstack.trainers.dqn.dqn_torch_policy import DQNTorchPolicy

        return DQNTorchPolicy

    @staticmethod
    def execution_plan(workers, config, **kwargs):
        replay_buffer = kwargs["local_replay_buffer"]  # 1.13's keyword, built from the replay keys
        store_op = ParallelRollouts(workers, mode="bulk_sync").for_each(StoreToReplayBuffer(local_buffer=replay_buffer))
        replay_op = (Replay(local_buffer=replay_buffer)
                     .for_each(TrainOneStep(workers))
                     .for_each(UpdateTargetNetwork(workers, config["target_network_update_freq"])))
        train_op = Concurrently([store_op, replay_op], mode="round_robin", output_indexes=[1],
                                round_robin_weights=[1, 2])
        return StandardMetricsReporting(train_op, workers, config)


def test_b_a_trainer_subclass_with_a_replay_execution_plan_trains():
    trainer = ReplayTrainer({"framework": "torch", "num_workers": 0, "learning_starts": 64, "train_batch_size": 32,
                             "rollout_fragment_length": 16, "target_network_update_freq": 64, "buffer_size": 1000,
                             "min_sample_timesteps_per_reporting": 96, "model": {"fcnet_hiddens": [16]},
                             "seed": 0}, env="CartPole-v1")
    try:
        before = _weights(trainer)
        first = trainer.train()
        second = trainer.train()
        assert RESULT_KEYS <= set(second)
        # Nothing is learned before learning_starts: the store branch runs alone until then.
        assert 96 <= first["timesteps_total"] < second["timesteps_total"]
        assert second["num_env_steps_trained"] > first["num_env_steps_trained"] > 0
        assert second["num_env_steps_trained"] % 32 == 0  # whole replayed batches
        # The plan's own counters show in info, as in 1.x; the td errors stay out of the stats.
        assert second["info"]["num_target_updates"] >= 1
        stats = second["info"]["learner"]["default_policy"]["learner_stats"]
        assert "td_error" not in stats and np.isfinite(stats["mean_td_error"])
        assert _changed(before, _weights(trainer))
    finally:
        trainer.stop()


def test_disable_execution_plan_api_true_runs_the_training_step_instead():
    class PlanlessPG(Trainer):
        def get_default_policy_class(self, config):
            from rlstack.trainers.pg.pg_torch_policy import PGTorchPolicy

            return PGTorchPolicy

        @staticmethod
        def execution_plan(workers, config, **kwargs):
            raise AssertionError("the plan must not be built")

    trainer = PlanlessPG({"framework": "torch", "num_workers": 0, "train_batch_size": 50,
                          "rollout_fragment_length": 50, "model": {"fcnet_hiddens": [8]},
                          "_disable_execution_plan_api": True}, env="CartPole-v1")
    try:
        result = trainer.train()  # Trainer's synchronous training_step: train_batch_size env steps
        assert result["timesteps_total"] == 50 and result["num_env_steps_trained"] == 50
    finally:
        trainer.stop()


def test_which_classes_run_their_plan():
    from rlstack.trainers.common.trainer import runs_execution_plan
    from rlstack.trainers.dqn import DQNTrainer
    from rlstack.trainers.ppo import PPOTrainer

    class DQNWithPlan(DQNTrainer):
        execution_plan = staticmethod(_pg_plan)

    class Both(Trainer):
        execution_plan = staticmethod(_pg_plan)

        def training_step(self):
            return {}

    # The built-in trainers have no plan, whatever the key says.
    assert not runs_execution_plan(PPOTrainer, None) and not runs_execution_plan(PPOTrainer, False)
    # A plan below DQN's training_step wins; the key decides where it is given.
    assert runs_execution_plan(DQNWithPlan, None) and not runs_execution_plan(DQNWithPlan, True)
    assert not runs_execution_plan(Both, None) and runs_execution_plan(Both, False)


@pytest.mark.parametrize(("module", "names"), [
    ("rlstack.execution.rollout_ops", ["ParallelRollouts", "ConcatBatches", "SelectExperiences", "StandardizeFields",
                                       "standardize_fields", "synchronous_parallel_sample"]),
    ("rlstack.execution.train_ops", ["TrainOneStep", "MultiGPUTrainOneStep", "UpdateTargetNetwork", "train_one_step"]),
    ("rlstack.execution.metric_ops", ["StandardMetricsReporting", "CollectMetrics", "OncePerTimeInterval",
                                      "OncePerTimestepsElapsed"]),
    ("rlstack.execution.replay_ops", ["StoreToReplayBuffer", "Replay"]),
    ("rlstack.execution.concurrency_ops", ["Concurrently"]),
    ("rlstack.execution.common", ["STEPS_SAMPLED_COUNTER", "STEPS_TRAINED_COUNTER", "AGENT_STEPS_SAMPLED_COUNTER",
                                  "LAST_TARGET_UPDATE_TS", "NUM_TARGET_UPDATES", "_get_shared_metrics"]),
    ("rlstack.execution", ["ParallelRollouts", "TrainOneStep", "Concurrently", "StandardMetricsReporting",
                           "MultiAgentReplayBuffer", "Replay"]),
    ("rlstack.trainers.trainer_template", ["build_trainer"]),
])
def test_c_the_1_13_names_import_from_their_module_paths(module, names):
    import importlib

    imported = importlib.import_module(module)
    assert all(callable(getattr(imported, name)) or isinstance(getattr(imported, name), str) for name in names)
    if hasattr(imported, "__all__"):
        assert imported.__all__ == sorted(imported.__all__)


def test_c_migrated_1_x_imports_resolve():
    # What `rlstack migrate` makes of a 1.x plan's imports.
    namespace: dict = {}
    exec("from rlstack.trainers.trainer_template import build_trainer\n"
         "from rlstack.execution.rollout_ops import ParallelRollouts, ConcatBatches\n"
         "from rlstack.execution.train_ops import TrainOneStep\n"
         "from rlstack.execution.metric_ops import StandardMetricsReporting\n"
         "from rlstack import BaseEnv, ExternalEnv, MultiAgentEnv, VectorEnv, RolloutWorker, TorchPolicy\n",
         namespace)
    assert namespace["ParallelRollouts"] is ParallelRollouts and namespace["TrainOneStep"] is TrainOneStep


def test_d_bad_arguments_say_what_is_allowed():
    with pytest.raises(ValueError, match=r"mode='bogus'.*'bulk_sync', 'async', 'raw'"):
        ParallelRollouts(object(), mode="bogus")
    with pytest.raises(ValueError, match="'env_steps' or 'agent_steps'"):
        ConcatBatches(100, count_steps_by="rows")
    with pytest.raises(ValueError, match="'round_robin' or 'async'"):
        Concurrently([LocalIterator([1]), LocalIterator([2])], mode="fastest")
    with pytest.raises(ValueError, match="at least 2 ops"):
        Concurrently([LocalIterator([1])])
    with pytest.raises(ValueError, match="exactly one of local_buffer"):
        StoreToReplayBuffer()
    with pytest.raises(ValueError, match="policy_ids"):
        SelectExperiences()


def test_the_iterator_operators_compose_like_1_x():
    assert LocalIterator(range(10)).for_each(lambda x: x * 2).filter(lambda x: x % 4 == 0).take(3) == [0, 4, 8]
    assert LocalIterator(range(5)).combine(lambda x: [x] * (x % 2)).take(2) == [1, 3]
    assert LocalIterator(range(5)).batch(2).take(3) == [[0, 1], [2, 3], [4]]
    # A source with nothing ready gives its turn away; weights pull several items a round.
    waiting = LocalIterator([NOT_READY, "r1", NOT_READY, "r2"])
    union = LocalIterator(iter(range(100))).union(waiting, round_robin_weights=[2, 1])
    assert union.take(6) == [0, 1, 2, 3, "r1", 4]
    tagged = Concurrently([LocalIterator(iter(range(100))), LocalIterator(["a", "b"])], output_indexes=[1])
    assert tagged.take(2) == ["a", "b"]
    first, second = LocalIterator(range(3)).duplicate(2)
    assert (next(first), next(second), next(second), next(first)) == (0, 0, 1, 1)


def test_operators_share_the_active_metrics_context():
    metrics = MetricsContext()
    batch = SampleBatch({"obs": np.zeros(4), "advantages": np.arange(4.0)})
    with activate(metrics):
        assert LocalIterator.get_metrics() is metrics
        concat = ConcatBatches(min_batch_size=6)
        assert concat(batch) == [] and concat(batch)[0].count == 8
        standardized = StandardizeFields(["advantages"])(batch)
        assert abs(standardized["advantages"].mean()) < 1e-9
        ma = MultiAgentBatch({"a": batch, "b": batch}, 4)
        assert set(SelectExperiences(["b"])(ma).policy_batches) == {"b"}
    with pytest.raises(ValueError, match="No execution plan is running"):
        LocalIterator.get_metrics()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(RuntimeError, match="inside a trainer's execution plan"), activate(MetricsContext()):
            TrainOneStep(None)(batch)


def test_train_one_step_runs_its_own_plan_as_1x_did_whatever_the_policys_config_says():
    # 1.x: TrainOneStep(workers, num_sgd_iter=3) took 3 gradient steps on the whole batch,
    # and TrainOneStep(workers) one, though PPO's config asks for 30 epochs of minibatches.
    from rlstack.trainers.ppo import PPOTrainer

    class PlannedPPO(PPOTrainer):
        @staticmethod
        def execution_plan(workers, config, **kwargs):
            rollouts = ParallelRollouts(workers, mode="bulk_sync")
            train_op = rollouts.combine(ConcatBatches(min_batch_size=config["train_batch_size"])).for_each(
                TrainOneStep(workers, num_sgd_iter=3))
            return StandardMetricsReporting(train_op, workers, config)

    trainer = PlannedPPO({"framework": "torch", "num_workers": 0, "train_batch_size": 200,
                          "rollout_fragment_length": 200, "sgd_minibatch_size": 50, "num_sgd_iter": 30,
                          "model": {"fcnet_hiddens": [8]}, "seed": 0}, env="CartPole-v1")
    try:
        policy = trainer.get_policy()
        plans = []
        original = policy.minibatch_plan
        policy.minibatch_plan = lambda n: plans.append(original(n)) or plans[-1]
        trainer.train()
        assert plans and set(plans) == {(200, 3)}  # whole batch, 3 epochs: 3 steps
        assert original(200) == (50, 30)  # outside the operator, the config's plan again
    finally:
        trainer.stop()
