"""`rlstack migrate`: the rewriting rule on imports, aliases and dotted names; what it leaves
alone (strings, comments, relative imports); what it reports; the command itself."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("libcst")

from rlstack.cli import main  # noqa: E402
from rlstack.migrate import migrate_paths, migrate_source, renamed_module  # noqa: E402


def _migrated(source: str, check_names: bool = False):
    return migrate_source(textwrap.dedent(source), "script.py", check_names)


@pytest.mark.parametrize(("old", "new"), [
    ("ray.rllib.agents.ppo", "rlstack.trainers.ppo"),
    ("ray.rllib.agents", "rlstack.trainers"),
    ("ray.rllib.policy.sample_batch", "rlstack.policies.sample_batch"),
    ("ray.rllib.models.torch.torch_modelv2", "rlstack.models.torch.torch_modelv2"),
    ("ray.rllib", "rlstack"),
    ("ray.rllibx", "ray.rllibx"),
    ("ray.tune", "ray.tune"),
    ("gym.spaces", "gymnasium.spaces"),
    ("gymnasium", "gymnasium"),
    ("gym_minigrid", "gym_minigrid"),
])
def test_module_names_follow_the_three_renames_in_order(old, new):
    assert renamed_module(old) == new


def test_imports_aliases_and_parenthesized_names_are_rewritten():
    result = _migrated("""\
        import gym
        import ray
        import ray.rllib.agents.ppo as ppo
        from ray.rllib.agents.dqn import (
            DQNTrainer,  # the trainer
            DEFAULT_CONFIG as DQN_CONFIG,
        )
        from ray.rllib.policy.sample_batch import SampleBatch
        from ray.rllib import agents
        from ray.rllib.models import ModelCatalog
        from gym.spaces import Box, Discrete
        """)
    assert result.after == textwrap.dedent("""\
        import gymnasium as gym
        import ray
        import rlstack.trainers.ppo as ppo
        from rlstack.trainers.dqn import (
            DQNTrainer,  # the trainer
            DEFAULT_CONFIG as DQN_CONFIG,
        )
        from rlstack.policies.sample_batch import SampleBatch
        from rlstack import trainers as agents
        from rlstack.models import ModelCatalog
        from gymnasium.spaces import Box, Discrete
        """)


def test_dotted_names_in_code_follow_a_plain_import():
    result = _migrated("""\
        import ray.rllib.agents.ppo
        trainer = ray.rllib.agents.ppo.PPOTrainer(config={"num_workers": 0}, env="CartPole-v1")
        ray.init()
        """)
    assert result.after.splitlines() == [
        "import rlstack.trainers.ppo",
        'trainer = rlstack.trainers.ppo.PPOTrainer(config={"num_workers": 0}, env="CartPole-v1")',
        "ray.init()",
    ]


def test_strings_comments_and_relative_imports_stay_as_they_were():
    source = """\
        # Trains with ray.rllib.agents.ppo, see "ray.rllib" docs.
        from . import models
        from .envs import ray_rllib_env
        NAME = "ray.rllib.agents.ppo"
        HELP = f"uses {NAME} from ray.rllib"
        """
    result = _migrated(source)
    assert result.after == textwrap.dedent(source)
    assert not result.changed and result.diff() == ""


def test_a_script_that_names_an_algorithm_to_tune_by_string_gets_import_rlstack():
    # 1.13's Tune found RLlib's algorithms by itself; rlstack registers them when imported.
    result = _migrated("""\
        import argparse

        import ray
        from ray import tune

        ray.init()
        tune.run("PPO", config={"env": "CartPole-v1"})
        """)
    assert result.after.splitlines()[2:5] == [
        "import ray", "import rlstack  # noqa: F401 - registers rlstack's algorithms with Tune by name",
        "from ray import tune"]
    experiments = _migrated("""\
        \"\"\"Runs an experiment.\"\"\"
        tune.run_experiments({"cartpole": {"run": "DQN", "env": "CartPole-v1"}})
        """)
    assert experiments.after.splitlines()[1].startswith("import rlstack")
    from_option = _migrated("""\
        import argparse
        from ray import tune
        parser = argparse.ArgumentParser()
        parser.add_argument("--run", default="PPO")
        tune.run(parser.parse_args().run)
        """)
    assert from_option.after.splitlines()[2].startswith("import rlstack")
    # Not where the script already imports RLlib, nor for a name that is not an algorithm.
    for source in ("""\
            import ray.rllib.agents.ppo as ppo
            from ray import tune
            tune.run("PPO")
            """, """\
            from ray import tune
            tune.run("my_trainable")
            """, """\
            import argparse
            ALGORITHM = "PPO"  # named, but Tune is never called
            """):
        assert "registers rlstack's algorithms" not in _migrated(source).after


def test_gym_api_patterns_that_need_a_person_are_reported_with_their_lines():
    result = _migrated("""\
        import gym
        env = gym.make("CartPole-v1")
        obs = env.reset()
        done = False
        while not done:
            obs, reward, done, info = env.step(env.action_space.sample())
        obs, info = env.reset(seed=0)
        obs, reward, terminated, truncated, info = env.step(0)
        """)
    assert [(f.line, f.message.split(":")[0]) for f in result.findings] == [
        (3, "`obs = ....reset()`"),
        (6, "`.step()` unpacked into 4 values"),
    ]
    assert "gymnasium's step returns 5" in result.findings[1].message


def test_a_name_rlstack_lacks_is_reported_with_what_to_use_instead():
    result = _migrated("""\
        from ray.rllib.agents.ppo import PPOTrainer, NotAThingTrainer
        from ray.rllib.agents.crr import CRRTrainer
        """, check_names=True)
    messages = {f.line: f.message for f in result.findings}
    assert "rlstack.trainers.ppo has no NotAThingTrainer" in messages[1]
    assert "PPOTrainer" not in messages[1]
    assert "CRR" in messages[2] and "not in rlstack" in messages[2]


def test_the_command_rewrites_files_in_place_or_prints_a_diff(tmp_path, capsys):
    script = tmp_path / "pkg" / "train.py"
    script.parent.mkdir()
    script.write_text("import gym\nfrom ray.rllib.agents.ppo import PPOTrainer\n")
    untouched = tmp_path / "pkg" / "notes.py"
    untouched.write_text("x = 1\n")

    assert main(["migrate", "--diff", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert "+from rlstack.trainers.ppo import PPOTrainer" in out and "-import gym" in out
    assert "would change 1 of 2 files" in err
    assert script.read_text().startswith("import gym\n")  # --diff writes nothing

    assert main(["migrate", str(script)]) == 0
    assert script.read_text() == "import gymnasium as gym\nfrom rlstack.trainers.ppo import PPOTrainer\n"
    assert main(["migrate", str(script)]) == 0  # a second run finds nothing left to do
    assert "changed 0 of 1 files" in capsys.readouterr().err


def test_a_missing_path_or_a_file_that_does_not_parse_is_named(tmp_path, capsys):
    assert main(["migrate", str(tmp_path / "nope.py")]) == 2
    assert "nope.py does not exist" in capsys.readouterr().err
    broken = tmp_path / "broken.py"
    broken.write_text("def f(:\n")
    results = migrate_paths([str(broken)])
    assert not results[0].changed and "not valid Python" in results[0].findings[0].message
    assert broken.read_text() == "def f(:\n"


def test_a_migrated_1_13_script_with_an_old_api_env_callbacks_and_a_custom_model_trains():
    source = textwrap.dedent("""\
        import gym
        import numpy as np
        from ray.rllib.agents.callbacks import DefaultCallbacks
        from ray.rllib.agents.ppo import DEFAULT_CONFIG, PPOTrainer
        from ray.rllib.models import ModelCatalog
        from ray.rllib.models.torch.fcnet import FullyConnectedNetwork
        from ray.rllib.models.torch.torch_modelv2 import TorchModelV2
        from ray.rllib.utils.framework import try_import_torch

        torch, nn = try_import_torch()


        class Corridor(gym.Env):
            # gym 0.21's API: reset() returns the observation, step() four values.
            def __init__(self, config):
                self.end = config["corridor_length"]
                self.action_space = gym.spaces.Discrete(2)
                self.observation_space = gym.spaces.Box(0.0, 99.0, (1,), np.float32)

            def reset(self):
                self.pos = 0
                return np.array([self.pos], np.float32)

            def step(self, action):
                self.pos = max(0, self.pos + (1 if action == 1 else -1))
                done = self.pos >= self.end
                return np.array([self.pos], np.float32), 1.0 if done else -0.1, done, {}


        class Model(TorchModelV2, nn.Module):
            def __init__(self, obs_space, action_space, num_outputs, model_config, name):
                TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name)
                nn.Module.__init__(self)
                self.fc = FullyConnectedNetwork(obs_space, action_space, num_outputs, model_config, name)

            def forward(self, input_dict, state, seq_lens):
                return self.fc(input_dict, state, seq_lens)[0], []

            def value_function(self):
                return self.fc.value_function()


        class Steps(DefaultCallbacks):
            def on_episode_end(self, *, worker, base_env, policies, episode, env_index, **kwargs):
                episode.custom_metrics["steps"] = episode.length


        ModelCatalog.register_custom_model("corridor_model", Model)
        config = DEFAULT_CONFIG.copy()
        config.update({"env": Corridor, "env_config": {"corridor_length": 3}, "num_workers": 0,
                       "framework": "torch", "callbacks": Steps, "train_batch_size": 200,
                       "sgd_minibatch_size": 50, "num_sgd_iter": 2,
                       "model": {"custom_model": "corridor_model", "fcnet_hiddens": [16]}})
        trainer = PPOTrainer(config=config)
        result = trainer.train()
        print(result["episodes_this_iter"] > 0, result["custom_metrics"]["steps_mean"] >= 3,
              trainer.compute_single_action(np.array([1.0], np.float32)) in (0, 1))
        trainer.stop()
        """)
    result = migrate_source(source, "script.py")
    assert result.findings == []
    assert "import gymnasium as gym" in result.after and "ray.rllib" not in result.after
    done = subprocess.run([sys.executable, "-c", result.after], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-3:] == ["True", "True", "True"]


def test_ray_2_tune_changes_no_rename_fixes_are_reported_with_their_lines():
    result = _migrated("""\
        import ray
        from ray import tune
        from ray.tune.logger import Logger, LegacyLoggerCallback
        ray.init(local_mode=True)


        def train_fn(config, reporter):
            tune.report(**{"score": 1})


        tune.run(train_fn, local_dir="~/results")
        tune.run(train_fn, storage_path="/tmp/results")
        """)
    assert [(f.line, f.message.split(":")[0]) for f in result.findings] == [
        (3, "Ray 2.x's Tune has no Logger or LegacyLoggerCallback"),
        (4, "Ray 2.x has no local mode"),
        (7, "`train_fn(config, reporter)`"),
        (8, "Ray 2.x's tune.report takes one dict"),
        (11, "Ray 2.x's Tune has no local_dir"),
    ]
    # Reported, not rewritten: each takes a person's choice (where results go, how to log).
    assert not result.changed
