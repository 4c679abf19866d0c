"""RLlib 1.13's helper modules at their renamed paths behave as 1.13 scripts rely on:
annotations, try_import_*, metric keys, test_utils, sample_batch, ViewRequirement,
EnvContext, get_trainer_class(return_config=True)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from types import SimpleNamespace

import numpy as np
import pytest

from rlstack.utils.annotations import (
    DeveloperAPI,
    ExperimentalAPI,
    OverrideToImplementCustomLogic,
    PublicAPI,
    is_overridden,
    override,
)
from rlstack.utils.test_utils import check, check_learning_achieved


# ----- annotations -----------------------------------------------------------------------

class _Base:
    def forward(self):
        return "base"

    @OverrideToImplementCustomLogic
    def on_result(self):
        return None


def test_override_accepts_a_real_override_and_rejects_a_misspelled_one():
    class Good(_Base):
        @override(_Base)
        def forward(self):
            return "good"

    assert Good().forward() == "good"
    with pytest.raises(NameError, match=r"Bad.forwad does not override .*_Base has no attribute 'forwad'"):
        class Bad(_Base):  # noqa: F841
            @override(_Base)
            def forwad(self):
                return "typo"


def test_override_of_a_1_x_method_the_new_bases_dropped_warns_instead(caplog):
    import gymnasium as gym

    from rlstack.policies.policy import Policy

    with caplog.at_level("WARNING", logger="rlstack.utils.annotations"):
        class OldEnv(gym.Env):
            @override(gym.Env)
            def seed(self, seed=None):
                return [seed]

        class OldPolicy(Policy):
            @override(Policy)
            def _get_dummy_batch_from_view_requirements(self, batch_size=1):
                return {}

    assert OldEnv().seed(3) == [3]
    assert "seed(n) itself" in caplog.text and "never used" in caplog.text


def test_override_without_its_class_argument_is_an_error():
    with pytest.raises(TypeError, match=r"@override\(BaseClass\)"):
        @override
        def forward(self):
            return None


def test_stability_markers_mark_and_refuse_non_callables():
    @PublicAPI
    class Thing:
        @DeveloperAPI
        def method(self):
            return 1

    @ExperimentalAPI
    def function():
        return 2

    assert Thing.__rlstack_api__ == "PublicAPI" and Thing.method.__rlstack_api__ == "DeveloperAPI"
    assert function.__rlstack_api__ == "ExperimentalAPI" and function() == 2 and Thing().method() == 1
    with pytest.raises(TypeError, match="PublicAPI"):
        PublicAPI(3)


def test_is_overridden_sees_overrides_of_marked_methods():
    class Plain(_Base):
        pass

    class Custom(_Base):
        def on_result(self):
            return "mine"

    assert not is_overridden(Plain()) and is_overridden(Custom())


# ----- test_utils --------------------------------------------------------------------------

def test_check_compares_nested_structures_numerically():
    check({"a": [1.0, np.array([2.0, 3.0])], "b": (True, None, "x")},
          {"a": [1.000001, np.array([2.0, 3.0])], "b": (True, None, "x")})
    check(np.array([1.0, 2.0]), np.array([1.1, 2.0]), atol=0.2)
    check([1.0], [2.0], false=True)
    with pytest.raises(AssertionError, match="at key 'a'"):
        check({"a": 1.0}, {"a": 1.1})
    with pytest.raises(AssertionError, match="keys differ"):
        check({"a": 1}, {"b": 1})
    with pytest.raises(AssertionError):
        check(1.0, 1.0, false=True)
    with pytest.raises(AssertionError):
        check(np.array([1.0, 2.0]), np.array([1.0, 2.01]), decimals=3)


def test_check_reads_torch_tensors():
    torch = pytest.importorskip("torch")
    check(torch.tensor([1.0, 2.0]), np.array([1.0, 2.0]))
    with pytest.raises(AssertionError):
        check(torch.tensor([1.0]), [3.0])


def _analysis(*rewards, evaluation=False):
    # The shape of tune.run()'s ExperimentAnalysis: .trials with .last_result.
    def result(r):
        return {"evaluation": {"episode_reward_mean": r}} if evaluation else {"episode_reward_mean": r}

    return SimpleNamespace(trials=[SimpleNamespace(trainable_name="PPO", last_result=result(r)) for r in rewards])


def test_check_learning_achieved_takes_the_best_trial():
    check_learning_achieved(_analysis(10.0, 160.0), 150.0)
    check_learning_achieved(_analysis(200.0, evaluation=True), 150.0, evaluation=True)
    check_learning_achieved(_analysis(200.0), min_value=150.0)
    with pytest.raises(ValueError, match=r"`PPO` not learnt to return 150.0 .*reached 20.000"):
        check_learning_achieved(_analysis(10.0, 20.0), 150.0)
    with pytest.raises(ValueError, match="evaluation_interval"):
        check_learning_achieved(_analysis(200.0), 150.0, evaluation=True)
    with pytest.raises(TypeError, match="ExperimentAnalysis"):
        check_learning_achieved([1, 2], 150.0)


# ----- try_import_* ------------------------------------------------------------------------

def test_try_import_torch_returns_torch_and_nn():
    pytest.importorskip("torch")
    from rlstack.utils.framework import try_import_torch

    torch, nn = try_import_torch()
    assert nn is torch.nn and hasattr(nn, "Linear")


def _run(script: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True,
                          timeout=180)


def test_try_import_with_the_framework_missing():
    proc = _run(
        """
        import sys
        sys.modules["torch"] = None; sys.modules["tensorflow"] = None; sys.modules["jax"] = None
        from rlstack.utils.framework import try_import_jax, try_import_tf, try_import_tfp, try_import_torch
        assert try_import_torch() == (None, None)
        assert try_import_tf() == (None, None, None)
        assert try_import_tfp() is None and try_import_jax() == (None, None)
        for fn in (try_import_torch, try_import_tf):
            try:
                fn(error=True)
            except ImportError as exc:
                assert "pip install" in str(exc), exc
            else:
                raise AssertionError(f"{fn.__name__}(error=True) did not raise")
        print("OK")
        """
    )
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stderr[-3000:]


def test_try_import_tf_goes_through_rlstacks_tf_import():
    pytest.importorskip("tensorflow")
    proc = _run(
        """
        import sys
        import rlstack.utils.framework as fw
        assert "tensorflow" not in sys.modules, "importing the module imported TF"
        tf1, tf, tfv = fw.try_import_tf()
        from rlstack.models.tf.framework import tf as rlstack_tf
        assert tf is rlstack_tf and tf1 is tf.compat.v1 and tfv == 2
        assert not any(m == "keras" or m.startswith("keras.") for m in sys.modules), "Keras was imported"
        assert "torch" not in sys.modules
        print("OK")
        """
    )
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stderr[-3000:]


# ----- sample_batch, ViewRequirement, EnvContext, registry -------------------------------------

def test_sample_batch_module_offers_1x_names_including_the_multi_agent_batch():
    from rlstack.policies.sample_batch import DEFAULT_POLICY_ID, MultiAgentBatch, SampleBatch, concat_samples
    from rlstack.trainers.trainer import DEFAULT_POLICY_ID as TRAINER_POLICY_ID

    assert DEFAULT_POLICY_ID == TRAINER_POLICY_ID == "default_policy"
    batch = concat_samples([SampleBatch({SampleBatch.REWARDS: np.ones(2)}), SampleBatch({"rewards": np.zeros(3)})])
    assert len(batch) == 5
    assert MultiAgentBatch({"p": batch}, 5).agent_steps() == 5
    with pytest.raises(ImportError, match="policy_batches"):
        from rlstack.policies.sample_batch import convert_ma_batch_to_sample_batch  # noqa: F401


def test_view_requirement_keeps_1x_arguments():
    from rlstack.policies.view_requirement import ViewRequirement

    default = ViewRequirement()
    assert (default.data_col, default.shift, default.batch_repeat_value) == (None, 0, 1)
    assert default.used_for_compute_actions and default.used_for_training
    prev = ViewRequirement("actions", shift=-1, used_for_training=False)
    assert prev.data_col == "actions" and prev.shift == -1 and not prev.used_for_training


def test_env_context_has_1x_attributes_and_copy_with_overrides():
    from rlstack.env.env_context import EnvContext

    ctx = EnvContext({"size": 3}, worker_index=2, vector_index=1, num_workers=4)
    assert ctx["size"] == 3 and ctx.get("missing", 7) == 7 and ctx.remote is False
    other = ctx.copy_with_overrides(vector_index=5, remote=True)
    assert (other.worker_index, other.vector_index, other.num_workers, other.remote) == (2, 5, 4, True)
    assert dict(other) == {"size": 3} and ctx.vector_index == 1
    replaced = ctx.copy_with_overrides(env_config={"size": 9})
    assert dict(replaced) == {"size": 9} and dict(ctx) == {"size": 3} and replaced.worker_index == 2


def test_get_trainer_class_returns_a_private_default_config():
    from rlstack.trainers.ppo import DEFAULT_CONFIG, PPOTrainer
    from rlstack.trainers.registry import get_trainer_class

    cls, config = get_trainer_class("PPO", return_config=True)
    assert cls is PPOTrainer and config == dict(DEFAULT_CONFIG)
    config["model"]["fcnet_hiddens"] = [1]
    assert DEFAULT_CONFIG["model"]["fcnet_hiddens"] != [1]
    assert get_trainer_class("PPO") is PPOTrainer


# ----- metric keys on a real result --------------------------------------------------------

def test_metric_constants_read_a_real_result(ray_local):
    pytest.importorskip("torch")
    from rlstack.policies.sample_batch import DEFAULT_POLICY_ID
    from rlstack.trainers.ppo import PPOTrainer
    from rlstack.utils import metrics
    from rlstack.utils.metrics.learner_info import LEARNER_INFO, LEARNER_STATS_KEY

    trainer = PPOTrainer({"num_workers": 0, "train_batch_size": 200, "sgd_minibatch_size": 64, "num_sgd_iter": 2,
                          "model": {"fcnet_hiddens": [16]}, "framework": "torch"}, "CartPole-v1")
    try:
        result = trainer.train()
    finally:
        trainer.stop()
    assert result[metrics.NUM_ENV_STEPS_SAMPLED] == result["timesteps_total"] >= 200
    assert result[metrics.NUM_AGENT_STEPS_SAMPLED] == result[metrics.NUM_ENV_STEPS_SAMPLED]
    assert result[metrics.NUM_ENV_STEPS_TRAINED] >= 200 and metrics.NUM_AGENT_STEPS_TRAINED in result
    stats = result["info"][LEARNER_INFO][DEFAULT_POLICY_ID][LEARNER_STATS_KEY]
    assert np.isfinite(stats["total_loss"])
    for timer in (metrics.TRAINING_ITERATION_TIMER, metrics.SAMPLE_TIMER, metrics.LEARN_ON_BATCH_TIMER,
                  metrics.SYNCH_WORKER_WEIGHTS_TIMER):
        assert result["timers"][f"{timer}_time_ms"] >= 0


def test_1x_trainer_spellings_import_from_their_renamed_paths():
    from rlstack.trainers.dqn import ApexTrainer, ApeXTrainer
    from rlstack.trainers.dqn.apex import APEX_DEFAULT_CONFIG
    from rlstack.trainers.dqn.apex import ApexTrainer as ApexFromModule
    from rlstack.trainers.impala import ImpalaTrainer, IMPALATrainer
    from rlstack.trainers.impala.impala import ImpalaTrainer as ImpalaFromModule

    assert ApexTrainer is ApeXTrainer is ApexFromModule and APEX_DEFAULT_CONFIG["num_replay_buffer_shards"] == 4
    assert ImpalaTrainer is IMPALATrainer is ImpalaFromModule


@pytest.mark.parametrize("name", ["rlstack.utils.annotations", "rlstack.utils.metrics", "rlstack.utils.typing",
                                  "rlstack.utils.metrics.learner_info", "rlstack.utils.test_utils",
                                  "rlstack.policies.sample_batch", "rlstack.trainers.dqn", "rlstack.trainers.impala",
                                  "rlstack.utils"])
def test_public_names_are_sorted_and_defined(name):
    import importlib

    module = importlib.import_module(name)
    assert module.__all__ == sorted(module.__all__)
    assert all(hasattr(module, attr) for attr in module.__all__)


def test_framework_iterator_runs_each_installed_framework_once():
    from rlstack.utils.framework import _is_installed
    from rlstack.utils.test_utils import framework_iterator

    config = {"framework": "torch", "lr": 0.1}
    seen = [(fw, config["framework"]) for fw in framework_iterator(config)]
    expected = [fw for fw, package in (("tf", "tensorflow"), ("torch", "torch")) if _is_installed(package)]
    assert [fw for fw, _ in seen] == expected and all(fw == set_to for fw, set_to in seen)
    assert config["framework"] == "torch"
    assert list(framework_iterator(frameworks=("torch",))) == (["torch"] if _is_installed("torch") else [])
    with pytest.raises(ValueError, match="no TF1 sessions"):
        next(framework_iterator(session=True))
    with pytest.raises(ValueError, match="Unknown framework 'jax'"):
        next(framework_iterator(frameworks=("jax",)))
