"""`framework: None`, 1.13's setting for policy classes of the user's own that import
neither torch nor TensorFlow: such policies train, anything that needs a framework is a
ConfigError naming the policy and the framework to set."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import numpy as np
import pytest

from rlstack.errors import ConfigError
from rlstack.policies.policy import Policy
from rlstack.trainers.common.trainer import Trainer
from rlstack.utils.framework import check_framework, check_framework_free_policies, check_installed


class CountingRandomPolicy(Policy):
    """Random actions; counts the batches it is given to learn on."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.learned_rows: list[int] = []

    def compute_actions(self, obs_batch: Any, state_batches: Any = None, prev_action_batch: Any = None,
                        prev_reward_batch: Any = None, **kwargs: Any) -> tuple[Any, list, dict]:
        return np.array([self.action_space.sample() for _ in obs_batch]), [], {}

    def learn_on_batch(self, samples: Any) -> dict:
        self.learned_rows.append(len(samples))
        return {}


def _own_policy_config(**extra: Any) -> dict[str, Any]:
    return {"framework": None, "num_workers": 0, "train_batch_size": 40, "rollout_fragment_length": 40,
            "multiagent": {"policies": {"mine": (CountingRandomPolicy, None, None, {})},
                           "policy_mapping_fn": lambda agent_id, *args, **kwargs: "mine"}, **extra}


def test_check_framework_keeps_none_and_needs_nothing_installed():
    assert check_framework(None) is None
    check_installed(None)  # no framework to look for


@pytest.mark.parametrize("algorithm", ["PG", "PPO"])
def test_a_framework_free_policy_trains_one_iteration(algorithm):
    from rlstack.trainers.common.registry import get_trainer_class

    extra = {"sgd_minibatch_size": 20, "num_sgd_iter": 1} if algorithm == "PPO" else {}
    trainer = get_trainer_class(algorithm)(_own_policy_config(**extra), "CartPole-v1")
    try:
        result = trainer.train()
        policy = trainer.get_policy("mine")
        assert isinstance(policy, CountingRandomPolicy)
        assert result["timesteps_total"] >= 40
        # PPO standardises advantages where a batch has them; this one has none.
        assert sum(policy.learned_rows) >= 40
        assert trainer.config["framework"] is None
    finally:
        trainer.stop()


def test_1_13s_bare_metal_trainer_subclass_trains_without_a_framework():
    # 1.13's bare_metal_policy_with_custom_view_reqs example: a Trainer subclass whose
    # default policy class is the user's own.
    class BareMetalPolicyTrainer(Trainer):
        def get_default_policy_class(self, config: dict[str, Any]) -> type[Policy]:
            return CountingRandomPolicy

    trainer = BareMetalPolicyTrainer({"framework": None, "num_workers": 0, "train_batch_size": 30,
                                      "rollout_fragment_length": 30, "model": {"max_seq_len": 1},
                                      "create_env_on_driver": True}, "CartPole-v1")
    try:
        assert trainer.train()["timesteps_total"] >= 30
        assert sum(trainer.get_policy().learned_rows) >= 30
    finally:
        trainer.stop()


def test_neither_framework_is_imported():
    script = textwrap.dedent(
        """
        import sys
        import numpy as np
        from rlstack.policies.policy import Policy
        from rlstack.trainers.pg import PGTrainer

        class Mine(Policy):
            def compute_actions(self, obs_batch, *args, **kwargs):
                return np.array([self.action_space.sample() for _ in obs_batch]), [], {}

            def learn_on_batch(self, samples):
                return {}

        trainer = PGTrainer({"framework": None, "num_workers": 0, "train_batch_size": 20,
                             "rollout_fragment_length": 20,
                             "multiagent": {"policies": {"mine": (Mine, None, None, {})},
                                            "policy_mapping_fn": lambda *args, **kwargs: "mine"}}, "CartPole-v1")
        trainer.train()
        trainer.stop()
        print(sorted(m for m in ("torch", "tensorflow") if m in sys.modules))
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stderr[-2000:]


def test_the_algorithms_own_policy_needs_a_framework():
    from rlstack.trainers.pg import PGTrainer

    with pytest.raises(ConfigError, match=r"framework=None, but policy 'default_policy' is PG's own policy.*"
                                          r"set config\['framework'\] to 'torch' or 'tf'"):
        PGTrainer({"framework": None, "num_workers": 0}, "CartPole-v1")
    # One policy of several without a class of its own is the algorithm's, and named.
    config = _own_policy_config()
    config["multiagent"]["policies"]["learner"] = (None, None, None, {})
    with pytest.raises(ConfigError, match="policy 'learner' is PG's own policy"):
        PGTrainer(config, "CartPole-v1")


def test_a_torch_policy_class_under_framework_none_names_torch():
    with pytest.raises(ConfigError, match=r"policy 'p' \(.*PPOTorchPolicy\) is a torch policy: set "
                                          r"config\['framework'\] to 'torch'"):
        check_framework_free_policies("PPO", {"p": "rlstack.trainers.ppo.ppo_torch_policy:PPOTorchPolicy"})
    check_framework_free_policies("PPO", {"p": CountingRandomPolicy})  # a class of one's own passes
