"""The rule for what rlstack lacks: importing a 1.13 module rlstack does not have
fails with an ImportError that says what rlstack offers instead; real modules, other
packages' errors and `import rlstack`'s weight are unchanged."""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys

import pytest

import rlstack  # noqa: F401  (installs the finder)
from rlstack._missing_modules import MISSING, MissingModuleError, algorithms_summary, describe
from rlstack.trainers.common.registry import declarations


# Entries naming a package rlstack has cover the modules that package lacks.
IMPORTED_FOR = {"rlstack.examples": "rlstack.examples.env.not_shipped", "rlstack.env.wrappers": "rlstack.env.wrappers.unity3d_env"}


@pytest.mark.parametrize("name", sorted(MISSING))
def test_each_listed_module_raises_with_guidance(name):
    if name in {declaration.package for declaration in declarations().values()}:
        # The algorithm's folder has landed since its entry was written: the folder wins.
        assert importlib.import_module(name).__name__ == name
        return
    target = IMPORTED_FOR.get(name, name)
    with pytest.raises(ModuleNotFoundError) as info:
        importlib.import_module(target)
    assert isinstance(info.value, ImportError) and info.value.name == target
    message = str(info.value)
    assert describe(MISSING[name]) in message and "Migrating from RLlib 1.x" in message


@pytest.mark.parametrize(("statement", "fragments"), [
    ("from rlstack.trainers.crr import CRRTrainer",
     # The registry's algorithms (a new folder joins the list with no edit here).
     ["ray.rllib.agents.crr", algorithms_summary(), "rlstack has A2C, A3C, APEX", "CRR (offline learning) is not planned yet"]),
    # The parent package is imported first, so its name is the one reported.
    ("import rlstack.trainers.maddpg.maddpg", ["'rlstack.trainers.maddpg'", "ray.rllib.agents.maddpg", "MADDPG"]),
    ("from rlstack.agents.ppo import PPOTrainer", ["rename ray.rllib.agents -> rlstack.trainers"]),
    ("from rlstack.policy.policy import Policy", ["rlstack.policies"]),
    ("from rlstack.env.group_agents_wrapper import GroupAgentsWrapper",
     ["ray.rllib.env.group_agents_wrapper", "with_agent_groups"]),
    ("from rlstack.env.external_multi_agent_env import ExternalMultiAgentEnv", ["ExternalMultiAgentEnv", "PolicyClient"]),
    ("from rlstack.models.torch.complex_input_net import ComplexInputNetwork", ["one encoder per key"]),
    ("from rlstack.execution.rollout_ops import AsyncGradients", ["ray.rllib.execution.rollout_ops.AsyncGradients", "A3C"]),
    ("from rlstack.utils.replay_buffers import ReplayBuffer", ["rlstack.execution.replay_buffer"]),
])
def test_the_message_names_the_rllib_module_and_the_alternative(statement, fragments):
    with pytest.raises(ImportError) as info:
        exec(statement, {})
    assert isinstance(info.value, MissingModuleError)
    for fragment in fragments:
        assert fragment in str(info.value)


def test_an_unlisted_rlstack_name_gets_the_generic_pointer():
    with pytest.raises(ModuleNotFoundError) as info:
        importlib.import_module("rlstack.trainers.not_an_algorithm")
    assert info.value.name == "rlstack.trainers.not_an_algorithm"
    assert "Migrating from RLlib 1.x" in str(info.value) and "ray.rllib.agents -> rlstack.trainers" in str(info.value)


def test_the_algorithm_list_comes_from_the_registry():
    # "rlstack has A2C, A3C, ... and PPO (rlstack.trainers.{a3c,...})": every declared name, in order.
    summary = algorithms_summary()
    names = list(declarations())
    assert summary.startswith("rlstack has " + ", ".join(names[:-1]) + " and " + names[-1] + " (")
    assert all(f"{declaration.folder}," in summary or f"{declaration.folder}}}" in summary
               for declaration in declarations().values())


def test_a_missing_module_inside_an_algorithm_package_is_not_called_an_algorithm_to_come():
    # The ppo folder exists: its entries for 1.13 modules it lacks (ddppo) still apply, but
    # any other module missing from it gets the generic pointer.
    with pytest.raises(MissingModuleError, match="DD-PPO is not planned yet"):
        importlib.import_module("rlstack.trainers.ppo.ddppo")
    with pytest.raises(MissingModuleError) as info:
        importlib.import_module("rlstack.trainers.ppo.not_there")
    assert "rlstack has no such module" in str(info.value)


def test_other_packages_and_real_modules_are_untouched():
    with pytest.raises(ModuleNotFoundError) as info:
        importlib.import_module("surely_not_an_installed_package_xyz")
    assert not isinstance(info.value, MissingModuleError)
    for name in ("rlstack.trainers.ppo", "rlstack.trainers.dqn.apex", "rlstack.policies.sample_batch",
                 "rlstack.utils.annotations", "rlstack.utils.metrics.learner_info",
                 "rlstack.examples.env.action_mask_env"):
        assert importlib.import_module(name).__name__ == name
    assert importlib.util.find_spec("rlstack.trainers.impala") is not None
    # One finder, after Python's own, however often rlstack's install runs (packages
    # imported later may append theirs, e.g. six's, which handle only their own names).
    from importlib.machinery import PathFinder

    from rlstack import _missing_modules

    _missing_modules.install()
    finders = [f for f in sys.meta_path if isinstance(f, _missing_modules.MissingModuleFinder)]
    assert len(finders) == 1 and sys.meta_path.index(finders[0]) > sys.meta_path.index(PathFinder)


def test_import_rlstack_stays_light_and_the_finder_costs_little():
    script = (
        "import sys, time\n"
        "start = time.perf_counter()\n"
        "import rlstack\n"
        "import rlstack.utils.annotations, rlstack.utils.framework, rlstack.utils.metrics.learner_info\n"
        "import rlstack.utils.test_utils, rlstack.utils.typing, rlstack.policies.sample_batch\n"
        "import rlstack.policies.view_requirement\n"
        "print('HEAVY', [m for m in ('torch', 'tensorflow', 'ray.tune') if m in sys.modules])\n"
        "print('LAST', type(sys.meta_path[-1]).__name__)\n"
    )
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "HEAVY []" in proc.stdout and "LAST MissingModuleFinder" in proc.stdout
    # -X importtime lines: "import time: self [us] | cumulative | name".
    own = [line for line in proc.stderr.splitlines() if line.rstrip().endswith("rlstack._missing_modules")]
    assert own, proc.stderr[-2000:]
    cumulative_us = int(own[0].split("|")[1])
    assert cumulative_us < 20_000, f"the finder's module took {cumulative_us} us to import"
