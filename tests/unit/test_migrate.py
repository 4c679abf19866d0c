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


def test_gymnasium_reset_and_step_are_rewritten_where_the_env_comes_from_gym():
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
    assert result.findings == []
    assert result.after.splitlines()[2:7] == [
        "obs, _ = env.reset()", "done = False", "while not done:",
        "    obs, reward, terminated_, truncated_, info = env.step(env.action_space.sample())",
        "    done = terminated_ or truncated_"]  # the file has its own `terminated`: fresh names
    assert result.after.splitlines()[7:] == ["obs, info = env.reset(seed=0)",
                                             "obs, reward, terminated, truncated, info = env.step(0)"]


def test_an_env_class_that_wraps_gym_make_is_rewritten_inside_and_keeps_its_own_1x_api():
    # As 1.13's ParametricActionsCartPole: the wrapped env is gymnasium's, the class is the
    # user's 1.x env (rlstack adapts its reset/step), and the loop over it stays as it is.
    result = _migrated("""\
        import gym


        class Wrapped(gym.Env):
            def __init__(self, config):
                self.wrapped = gym.make("CartPole-v0")

            def reset(self):
                return self.wrapped.reset()

            def step(self, action):
                obs, rew, done, info = self.wrapped.step(action)
                return obs, rew, done, info


        env = Wrapped({})
        obs = env.reset()
        obs, rew, done, info = env.step(0)
        """)
    after = result.after.splitlines()
    assert after[8] == "        return self.wrapped.reset()[0]"
    assert after[11:13] == ["        obs, rew, terminated, truncated, info = self.wrapped.step(action)",
                            "        done = terminated or truncated"]
    assert after[13] == "        return obs, rew, done, info"
    assert after[-2:] == ["obs = env.reset()", "obs, rew, done, info = env.step(0)"]
    assert result.findings == []


def test_an_env_of_unknown_origin_is_listed_saying_which_case_applies_when():
    result = _migrated("""\
        def rollout(env):
            obs = env.reset()
            obs, reward, done, info = env.step(0)
            return env.reset()
        """)
    assert [(f.line, f.message.split(":")[0]) for f in result.findings] == [
        (2, "`obs = ....reset()`"), (3, "`.step()` unpacked into 4 values"), (4, "`....reset()`")]
    assert all("gym.make" in f.message and "your own 1.x env class" in f.message for f in result.findings)
    assert not result.changed


def test_a_subclass_of_one_of_gyms_envs_reads_its_parents_gymnasium_api():
    result = _migrated("""\
        from gym.envs.classic_control import CartPoleEnv


        class Stateless(CartPoleEnv):
            def reset(self):
                init_obs = super().reset()
                return init_obs[:2]

            def step(self, action):
                next_obs, reward, done, info = super().step(action)
                return next_obs[:2], reward, done, info
        """)
    assert "init_obs, _ = super().reset()" in result.after
    assert "next_obs, reward, terminated, truncated, info = super().step(action)" in result.after
    assert result.findings == []


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
    assert "changed 0 of 1 file\n" in capsys.readouterr().err


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


def test_ray_2_tune_changes_are_rewritten_and_what_needs_a_choice_is_listed():
    result = _migrated("""\
        import ray
        from ray import tune
        from ray.tune.logger import Logger, LegacyLoggerCallback
        ray.init(local_mode=True)
        ray.init(num_cpus=2, local_mode=args.debug, _redis_max_memory=10**8, webui_host="127.0.0.1")


        def train_fn(config, reporter):
            reporter(score=1, **extra)
            tune.report(**{"score": 1})
            print(tune.get_trial_dir())


        tune.run(train_fn, local_dir="~/results", queue_trials=True)
        tune.run(train_fn, local_dir="results", loggers=[Logger])
        tune.run(train_fn, storage_path="/tmp/results")
        """)
    after = result.after.splitlines()
    assert after[0:3] == ["import ray", "import os", "from ray import tune"]
    assert after[4:6] == ["ray.init()", 'ray.init(num_cpus=2, dashboard_host="127.0.0.1")']
    assert after[8:12] == ["def train_fn(config):", '    tune.report({"score": 1, **extra})',
                           '    tune.report({"score": 1})', "    print(tune.get_context().get_trial_dir())"]
    assert after[14:] == ['tune.run(train_fn, storage_path=os.path.expanduser("~/results"))',
                          'tune.run(train_fn, storage_path=os.path.abspath("results"), loggers=[Logger])',
                          'tune.run(train_fn, storage_path="/tmp/results")']
    assert [(f.line, f.message.split(":")[0]) for f in result.findings] == [
        (3, "Ray 2.x's Tune has no Logger, LegacyLoggerCallback"), (15, "Ray 2.x's tune.run has no loggers=")]


def test_names_imported_by_themselves_are_rewritten_as_dotted_ones_are():
    result = _migrated("""\
        from ray import init
        from ray.tune import run, report
        init(local_mode=True)


        def trainable(config):
            report(**{"score": 1})


        run("PPO", local_dir="/abs/results")
        """)
    after = result.after.splitlines()
    assert after[0:3] == ["from ray import init", "import rlstack  # noqa: F401 - registers rlstack's algorithms "
                          "with Tune by name", "from ray.tune import run, report"]
    assert after[3] == "init()" and '    report({"score": 1})' in after
    assert after[-1] == 'run("PPO", storage_path="/abs/results")'


def test_a_function_whose_reporter_is_handed_on_is_listed_not_half_rewritten():
    source = """\
        from ray import tune


        def train_fn(config, reporter):
            loop(config, reporter)


        tune.run(train_fn)
        """
    result = _migrated(source)
    assert result.after == textwrap.dedent(source)
    assert "hands reporter on" in result.findings[0].message


def test_todays_python_stack_numpy_collections_gym_ids_and_np_random():
    result = _migrated("""\
        import collections
        from collections import deque, Mapping
        from collections import Sequence
        import gym
        import numpy as np
        x = np.float(1) + np.int(2) + np.product([1, 2]) + (np.NaN or 0)
        ok = isinstance(x, collections.Iterable)
        env = gym.make("Pendulum-v0")
        NOTE = "np.float and Pendulum-v0 stay in a string"  # np.float in a comment too


        class Env(gym.Env):
            def reset(self):
                return self.np_random.randint(0, 3)
        """)
    after = result.after.splitlines()
    assert after[0:4] == ["import collections", "from collections import deque", "from collections.abc import Mapping",
                          "from collections.abc import Sequence"]
    assert "x = float(1) + int(2) + np.prod([1, 2]) + (np.nan or 0)" in after
    assert "ok = isinstance(x, collections.abc.Iterable)" in after and "import collections.abc" in after
    assert 'env = gym.make("Pendulum-v1")' in after
    assert 'NOTE = "np.float and Pendulum-v0 stay in a string"  # np.float in a comment too' in after
    assert "        return self.np_random.integers(0, 3)" in after


def test_an_np_random_the_env_makes_as_a_random_state_keeps_randint():
    source = """\
        import numpy as np


        class Env:
            def __init__(self):
                self.np_random = np.random.RandomState(0)

            def reset(self):
                return self.np_random.randint(0, 3)
        """
    assert _migrated(source).after == textwrap.dedent(source)


def test_a_tensorflow_file_that_never_sets_framework_gets_tf_as_1x_ran_it():
    keras = _migrated("""\
        from ray.rllib.agents import ppo
        from ray.rllib.models.tf.tf_modelv2 import TFModelV2
        config = ppo.DEFAULT_CONFIG.copy()
        config["num_workers"] = 0
        """)
    assert keras.after.splitlines()[2:5] == ["config = ppo.DEFAULT_CONFIG.copy()", 'config["framework"] = "tf"',
                                             'config["num_workers"] = 0']
    literal = _migrated("""\
        import tensorflow as tf
        from ray import tune
        tune.run("PPO", config={"env": "CartPole-v1", "model": {"custom_model": "keras"}})
        """)
    assert '"model": {"custom_model": "keras"}, "framework": "tf"}' in literal.after
    # Left alone: a torch file, and a TF file whose config names its framework.
    for source in ("""\
            import torch
            config = {"env": "CartPole-v1", "num_workers": 0}
            """, """\
            import tensorflow as tf
            config = {"env": "CartPole-v1", "num_workers": 0, "framework": args.framework}
            """):
        assert _migrated(source).after == textwrap.dedent(source)
    unfound = _migrated("""\
        from ray.rllib.models.tf.tf_modelv2 import TFModelV2
        from ray.rllib.agents.ppo import PPOTrainer
        trainer = PPOTrainer(config=make_config())
        """)
    assert "never sets framework" in unfound.findings[0].message


def test_a_folder_with_dead_code_a_syntax_error_and_a_1x_script_is_migrated_to_the_end(tmp_path, capsys):
    (tmp_path / "a_dead_code.py").write_text(
        "if False:\n    from ray.rllib.execution.rollout_ops import NoSuchOperator\n")
    (tmp_path / "b_broken.py").write_text("def f(:\n")
    (tmp_path / "c_latin1.py").write_bytes(b"# caf\xe9\nx = 1\n")
    script = tmp_path / "d_train.py"
    script.write_text("import gym\nfrom ray.rllib.agents.ppo import PPOTrainer\n"
                      "trainer = PPOTrainer(config={'num_workers': 0}, env='CartPole-v0')\n")
    assert main(["migrate", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "a_dead_code.py:2: not in rlstack" in err and "NoSuchOperator" in err
    assert "b_broken.py:1: not valid Python, left as it is" in err
    assert "c_latin1.py:1: not UTF-8, left as it is" in err
    assert "changed 2 of 4 files; 3 places need a person" in err
    assert (tmp_path / "b_broken.py").read_text() == "def f(:\n"
    assert script.read_text().startswith("import gymnasium as gym\nfrom rlstack.trainers.ppo import PPOTrainer\n")
    one = tmp_path / "one"
    one.mkdir()
    (one / "x.py").write_text("def f(:\n")
    assert main(["migrate", str(one)]) == 1
    assert "1 place needs a person" in capsys.readouterr().err


def test_check_json_and_out_modes(tmp_path, capsys):
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text("import gym\n")
    (project / "data.csv").write_text("a,b\n")
    assert main(["migrate", "--check", str(project)]) == 1
    assert (project / "train.py").read_text() == "import gym\n"
    capsys.readouterr()
    assert main(["migrate", "--format", "json", "--diff", str(project)]) == 0
    import json

    report = json.loads(capsys.readouterr().out)
    assert report["files_changed"] == 1 and report["places_need_a_person"] == 0
    assert report["files"][0]["changes"][0]["line"] == 1
    out = tmp_path / "migrated"
    assert main(["migrate", "--out", str(out), "--report", str(tmp_path / "report.txt"), str(project)]) == 0
    assert (out / "train.py").read_text() == "import gymnasium as gym\n"
    assert (out / "data.csv").read_text() == "a,b\n"  # the other files are copied beside it
    assert (project / "train.py").read_text() == "import gym\n"
    assert "train.py:1: changed:" in (tmp_path / "report.txt").read_text()
    assert main(["migrate", "--check", str(out)]) == 0


def test_yaml_experiments_get_rlstacks_example_envs_and_gymnasium_ids(tmp_path, capsys):
    path = tmp_path / "pendulum.yaml"
    path.write_text("""\
# A 1.x tuned example.
pendulum-ppo:
    env: Pendulum-v0   # the id gym 0.21 had
    run: PPO
    config:
        eager: false
random-env:
    env: ray.rllib.examples.env.random_env.NoSuchEnv
    run: MAML
""")
    assert main(["migrate", str(path)]) == 1
    text = path.read_text()
    assert "    env: Pendulum-v1   # the id gym 0.21 had\n" in text and text.startswith("# A 1.x tuned example.")
    assert "        framework: tf\n" in text and "eager" not in text
    err = capsys.readouterr().err
    assert "pendulum.yaml:8: env: ray.rllib.examples.env.random_env.NoSuchEnv" in err
    assert "pendulum.yaml:9: run: MAML: rlstack has no MAML" in err


def test_a_script_whose_keras_model_lives_in_another_module_of_the_project_gets_tf(tmp_path):
    # 1.x ran TF by default: the script registers a Keras model from its own package.
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "__init__.py").write_text("")
    (tmp_path / "models" / "keras_model.py").write_text(
        "from ray.rllib.models.tf.tf_modelv2 import TFModelV2\n\n\nclass KerasQModel(TFModelV2):\n    pass\n")
    script = tmp_path / "train.py"
    script.write_text("from ray.rllib.agents import dqn\nfrom models.keras_model import KerasQModel\n"
                      "config = dqn.DEFAULT_CONFIG.copy()\n")
    migrate_paths([str(tmp_path)], check_names=False)
    assert 'config["framework"] = "tf"' in script.read_text()


def test_a_module_name_handed_to_import_module_follows_the_rule():
    result = _migrated("""\
        import importlib
        module = importlib.import_module("ray.rllib.agents." + name.lower())
        ppo = importlib.import_module("ray.rllib.agents.ppo")
        other = importlib.import_module("json")
        path = "ray.rllib.agents." + name
        trainers = importlib.import_module(path)
        TEXT = "ray.rllib.agents.ppo"  # a string nobody imports stays
        """)
    assert result.after.splitlines()[1:] == [
        'module = importlib.import_module("rlstack.trainers." + name.lower())',
        'ppo = importlib.import_module("rlstack.trainers.ppo")', 'other = importlib.import_module("json")',
        'path = "rlstack.trainers." + name', "trainers = importlib.import_module(path)",
        'TEXT = "ray.rllib.agents.ppo"  # a string nobody imports stays']


def test_checkpoint_dir_is_listed_only_for_a_function_handed_to_tune():
    result = _migrated("""\
        from ray import tune


        def train(config, checkpoint_dir=None):
            pass


        def trainable(config, checkpoint_dir=None):
            pass


        train({"lr": 0.1})
        tune.run(trainable)
        """)
    assert [(f.line, f.message.split(":")[0]) for f in result.findings] == [(8, "`trainable(config, checkpoint_dir)`")]


def test_the_keys_that_chose_the_framework_before_framework_did_become_it():
    result = _migrated("""\
        config = {"env": "CartPole-v1", "use_pytorch": True}
        other = {"eager": True, "framework": "tf"}
        """)
    assert result.after.splitlines() == ['config = {"env": "CartPole-v1", "framework": "torch"}',
                                         'other = {"eager": True, "framework": "tf"}']


def test_a_project_registering_its_1x_env_with_gym_gets_gymnasiums_api_from_gym_make(tmp_path):
    # 1.x: gym.make("corridor-v0") of the project's own old-API env, then a loop over it.
    (tmp_path / "corridor.py").write_text(textwrap.dedent("""\
        import gym
        import numpy as np


        class Corridor(gym.Env):
            def __init__(self, length=3):
                self.length = length
                self.action_space = gym.spaces.Discrete(2)
                self.observation_space = gym.spaces.Box(0.0, 9.0, (1,), np.float32)

            def reset(self):
                self.pos = 0
                return np.array([self.pos], np.float32)

            def step(self, action):
                self.pos += int(action)
                return np.array([self.pos], np.float32), 1.0, self.pos >= self.length, {}
        """))
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent("""\
        import gym
        from gym.envs.registration import register

        register(id="Corridor-v0", entry_point="corridor:Corridor", kwargs={"length": 2})
        register(id="MyCartPole-v0", entry_point="gym.envs.classic_control:CartPoleEnv")
        env = gym.make("Corridor-v0")
        obs = env.reset()
        done, steps = False, 0
        while not done:
            obs, reward, done, info = env.step(1)
            steps += 1
        print("steps", steps)
        """))
    results = migrate_paths([str(tmp_path)], check_names=False)
    after = script.read_text()
    assert 'entry_point=legacy_entry_point("corridor:Corridor")' in after
    assert 'entry_point="gym.envs.classic_control:CartPoleEnv"' in after  # gym's own: gymnasium's now
    assert "from rlstack.env.legacy import legacy_entry_point" in after
    assert sum(len(r.findings) for r in results) == 0
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["steps", "2"]


def test_a_step_on_a_line_it_shares_is_listed_not_half_rewritten():
    source = """\
        import gym
        env = gym.make("CartPole-v1")
        done = False
        while not done: obs, reward, done, info = env.step(0)
        obs, reward, done, info = env.step(0); total = reward
        """
    result = _migrated(source)
    assert result.after == textwrap.dedent(source).replace("import gym", "import gymnasium as gym")
    assert [(f.line, f.message.split(":")[0]) for f in result.findings] == [
        (4, "`.step()` unpacked into 4 values on a line it shares"), (5, "`.step()` unpacked into 4 values on a line it shares")]


def test_resets_into_attributes_seeds_and_a_wrappers_passthrough_step_keep_their_meaning():
    result = _migrated("""\
        import gym


        class Wrapper(gym.Env):
            def __init__(self, config):
                self.env = gym.make("CartPole-v1")
                self.env.seed(0)

            def reset(self):
                self.state = self.env.reset()
                return self.state

            def step(self, action):
                return self.env.step(action)
        """)
    after = result.after
    assert "        self.env.reset(seed=0)" in after
    assert "        self.state, _ = self.env.reset()" in after
    assert "        return four_values(self.env.step(action))" in after
    assert "from rlstack.env.legacy import four_values" in after
    assert result.findings == []
    from rlstack.env.legacy import four_values

    assert four_values((1, 0.5, False, True, {})) == (1, 0.5, True, {"TimeLimit.truncated": True})


def test_a_parameter_or_loop_variable_named_like_a_gym_env_is_not_taken_for_it():
    result = _migrated("""\
        import gym
        env = gym.make("CartPole-v1")


        def rollout(env):
            obs = env.reset()
            return obs


        firsts = [env.reset() for env in envs]
        stats = timer.reset()
        """)
    assert "    obs = env.reset()" in result.after and "[env.reset() for env in envs]" in result.after
    assert [f.line for f in result.findings] == [6, 10]  # the timer's reset is not an env's


def test_framework_tf_goes_into_each_trainer_config_and_not_into_a_policys_overrides():
    result = _migrated("""\
        from ray.rllib.agents import dqn, ppo
        from ray.rllib.models.tf.tf_modelv2 import TFModelV2
        config = {"env": "CartPole-v1", "num_workers": 0,
                  "multiagent": {"policies": {"p0": (None, obs, act, {"model": {"custom_model": "m"}, "gamma": 0.9}),
                                              "p1": (None, obs, act, {"gamma": 0.99, "lr": 0.1})}}}
        dqn_config = dqn.DEFAULT_CONFIG.copy()
        dqn_config.update({"env": "CartPole-v1", "num_workers": 0})
        """)
    assert result.after.count('"framework": "tf"') == 1 and result.after.count('["framework"] = "tf"') == 1
    assert '"p1": (None, obs, act, {"gamma": 0.99, "lr": 0.1})}}, "framework": "tf"}' in result.after
    assert 'dqn_config["framework"] = "tf"' in result.after


def test_a_local_dir_from_an_option_may_be_none():
    after = _migrated("""\
        from ray import tune
        tune.run("PPO", local_dir=args.local_dir)
        tune.run("PPO", local_dir=None)
        """).after
    assert 'storage_path=os.path.abspath(os.path.expanduser(args.local_dir)) if args.local_dir else None' in after
    assert 'tune.run("PPO", storage_path=None)' in after


def test_a_gym_name_gymnasium_dropped_is_listed():
    result = _migrated("from gym.wrappers import Monitor, TimeLimit\n", check_names=True)
    assert "not in gymnasium: gymnasium.wrappers has no Monitor" in result.findings[0].message
    assert "RecordVideo" in result.findings[0].message


def test_virtualenvs_and_build_folders_are_not_the_project(tmp_path):
    (tmp_path / "train.py").write_text("import gym\n")
    venv = tmp_path / "env38" / "lib" / "site" / "gym"
    venv.mkdir(parents=True)
    (tmp_path / "env38" / "pyvenv.cfg").write_text("home = /usr\n")
    (venv / "core.py").write_text("import gym\n")
    (tmp_path / "build" / "lib").mkdir(parents=True)
    (tmp_path / "build" / "lib" / "x.py").write_text("import gym\n")
    from rlstack.migrate import project_files

    assert [path.name for path, _ in project_files([str(tmp_path)])] == ["train.py"]


def test_out_inside_the_project_is_refused_and_a_bom_and_crlf_survive(tmp_path, capsys):
    project = tmp_path / "p"
    project.mkdir()
    (project / "a.py").write_bytes(b"\xef\xbb\xbfimport gym\r\nx = 1\r\n")
    assert main(["migrate", "--out", str(project / "migrated"), str(project)]) == 2
    assert "inside" in capsys.readouterr().err
    assert main(["migrate", str(project)]) == 0
    assert (project / "a.py").read_bytes() == b"\xef\xbb\xbfimport gymnasium as gym\r\nx = 1\r\n"
