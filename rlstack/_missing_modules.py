"""The ImportError for the RLlib 1.13 modules rlstack does not have.

The rule: a 1.13 script runs after the renames ``ray.rllib.agents`` ->
``rlstack.trainers``, ``ray.rllib.policy`` -> ``rlstack.policies``, ``ray.rllib`` ->
``rlstack``; where rlstack has no such thing, the import fails with an ImportError that
says what rlstack offers instead. :class:`MissingModuleFinder` sits LAST on
``sys.meta_path`` and is asked only about names every other finder gave up on; for an
``rlstack.*`` name it raises :class:`MissingModuleError` (a ``ModuleNotFoundError``,
``.name`` set) from :data:`MISSING`, or a generic message for names not in it.

Known limit: ``from rlstack.trainers import es`` (a missing module named in a
``from package import ...`` list) gets Python's own "cannot import name" message, since
Python drops a ModuleNotFoundError raised for a name in that list; ``import
rlstack.trainers.es`` and ``from rlstack.trainers.es import ESTrainer`` get this one.

An algorithm package that exists wins over its entry here, with no edit to this file:
Python's own finders find the folder before this finder is asked, and a missing module
inside a declared algorithm package (``rlstack.trainers.sac.nope``: ``sac/`` exists)
skips that package's entry. The list of algorithms the messages give comes from the
registry (``rlstack/trainers/common/registry.py``) when a message is built.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from rlstack.errors import RLStackError

# Stands for "rlstack has A2C, ..., PPO (rlstack.trainers.{...})" in an entry; replaced by
# the registry's list when a message is built, so a new algorithm folder shows up in it.
_ALGORITHMS = "<rlstack's algorithms>"


def _not_yet(name: str, verb: str = "is") -> str:
    return f"{_ALGORITHMS}; {name} {verb} not planned yet"


def algorithms_summary() -> str:
    """``"rlstack has A2C, ..., PPO (rlstack.trainers.{a3c,...,ppo})"``, from the registry."""
    from rlstack.trainers.common.registry import declarations  # the registry is a layer above

    found = declarations()
    if not found:  # asked while the registry scans (an algorithm package failed to import)
        return "rlstack's algorithms are listed by rlstack.trainers.ALGORITHMS"
    names = list(found)
    listed = ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]
    folders = sorted({declaration.folder for declaration in found.values()})
    return f"rlstack has {listed} (rlstack.trainers.{{{','.join(folders)}}})"


def describe(entry: str) -> str:
    """An entry of :data:`MISSING` as the message shows it (the algorithm list filled in)."""
    return entry.replace(_ALGORITHMS, algorithms_summary())


_MIGRATING = "the docs' 'Migrating from RLlib 1.x' page (docs/migrating.md)"

# rlstack module name (1.13's name after the renames) -> what rlstack offers instead.
# A name also covers its submodules (rlstack.trainers.es.es_torch_policy).
MISSING: dict[str, str] = {
    # --- the renames not applied -------------------------------------------------------
    "rlstack.agents": "RLlib's ray.rllib.agents is rlstack.trainers: rename ray.rllib.agents -> rlstack.trainers "
                      "first, then ray.rllib.policy -> rlstack.policies, then ray.rllib -> rlstack "
                      "(e.g. from rlstack.trainers.ppo import PPOTrainer)",
    "rlstack.policy": "RLlib's ray.rllib.policy is rlstack.policies: rename ray.rllib.policy -> rlstack.policies "
                      "before ray.rllib -> rlstack (e.g. from rlstack.policies.sample_batch import SampleBatch)",
    "rlstack.algorithms": "ray.rllib.algorithms is RLlib 2.x's name; rlstack keeps 1.x's: rlstack.trainers "
                          "(PPOTrainer, DEFAULT_CONFIG)",
    # --- algorithms --------------------------------------------------------------------
    # Once a folder of this name exists its entry is never used (see the module docstring).
    "rlstack.trainers.ppo.ddppo": _not_yet("DD-PPO") + " (APPO and IMPALA are the distributed ones)",
    "rlstack.trainers.ddppo": _not_yet("DD-PPO") + " (APPO and IMPALA are the distributed ones)",
    "rlstack.trainers.bc": "BCTrainer and BC_DEFAULT_CONFIG live in rlstack.trainers.marwil, as in 1.13's "
                           "ray.rllib.agents.marwil: from rlstack.trainers.marwil import BCTrainer",
    "rlstack.trainers.crr": _not_yet("CRR (offline learning)"),
    "rlstack.trainers.dt": _not_yet("Decision Transformer (offline learning)"),
    "rlstack.trainers.maddpg": _not_yet("MADDPG (multi-agent)"),
    "rlstack.trainers.qmix": _not_yet("QMIX (multi-agent)"),
    "rlstack.trainers.alpha_star": _not_yet("AlphaStar (multi-agent league)"),
    "rlstack.trainers.dreamer": _not_yet("Dreamer"),
    "rlstack.trainers.alpha_zero": _not_yet("AlphaZero"),
    "rlstack.trainers.slateq": _not_yet("SlateQ"),
    "rlstack.trainers.mbmpo": _not_yet("MB-MPO"),
    "rlstack.trainers.maml": _not_yet("MAML"),
    "rlstack.trainers.simple_q": _not_yet("SimpleQ") + " (DQN with double_q=False, dueling=False, "
                                 "prioritized_replay=False is SimpleQ)",
    "rlstack.trainers.dqn.simple_q": _not_yet("SimpleQ") + " (DQN with double_q=False, "
                                     "dueling=False, prioritized_replay=False is SimpleQ)",
    "rlstack.trainers.r2d2": _not_yet("R2D2 (recurrent models)"),
    "rlstack.trainers.dqn.r2d2": _not_yet("R2D2 (recurrent models)"),
    "rlstack.trainers.mock": _ALGORITHMS + "; 1.x's test-only MockTrainer is not there",
    "rlstack.trainers.random_agent": _ALGORITHMS + "; a random policy is not there",
    # --- environments ------------------------------------------------------------------
    "rlstack.env.external_multi_agent_env": "ExternalMultiAgentEnv is not in rlstack yet; the single-agent "
                                            "ExternalEnv (rlstack.env.external_env) and PolicyServerInput / "
                                            "PolicyClient are, and multi-agent envs that rlstack steps "
                                            "(rlstack.env.multi_agent_env)",
    "rlstack.env.remote_base_env": "rlstack's sub-envs as Ray actors of their own (remote_worker_envs=True) are "
                                   "rlstack.env.remote_vector_env.RemoteVectorEnv, built by the rollout worker; "
                                   "1.x's poll/send_actions protocol is not offered",
    "rlstack.env.wrappers": "rlstack.env.wrappers.pettingzoo_env holds PettingZooEnv and ParallelPettingZooEnv, "
                            "and rlstack.env.atari the DeepMind Atari preprocessing (preprocessor_pref='deepmind'); "
                            "1.x's other env wrappers (Unity3D, dm_control, RecSim, group_agents) are not in rlstack "
                            "yet",
    "rlstack.env.group_agents_wrapper": "agent groups (MultiAgentEnv.with_agent_groups, for QMIX) are not "
                                        "implemented; multi-agent envs are (rlstack.env.multi_agent_env)",
    # --- offline data, execution plans, replay buffers ---------------------------------
    "rlstack.execution.parallel_requests": "rlstack's asynchronous trainers use ray.wait over "
                                           "RolloutWorker.sample.remote() calls (an execution plan: "
                                           "ParallelRollouts(workers, mode='async') in rlstack.execution.rollout_ops)",
    "rlstack.execution.multi_gpu_learner_thread": "rlstack's learner runs on one GPU at most; its learner "
                                                  "thread is rlstack.execution.learner_thread.LearnerThread",
    "rlstack.execution.multi_gpu_impl": "rlstack's learner runs on one GPU at most (no multi-GPU towers)",
    "rlstack.execution.tree_agg": "rlstack has no aggregation-worker trees for IMPALA; all workers send "
                                  "to the driver",
    "rlstack.execution.minibatch_buffer": "MinibatchBuffer is in rlstack.execution.buffers.minibatch_buffer "
                                          "(1.13's module path)",
    "rlstack.utils.replay_buffers": "rlstack's replay buffers are rlstack.execution.replay_buffer "
                                    "(ReplayBuffer, PrioritizedReplayBuffer) and rlstack.execution.replay_actor "
                                    "(ApeX's shards); DQN's are configured with buffer_size and prioritized_replay",
    # --- models and policies -----------------------------------------------------------
    "rlstack.models.torch.complex_input_net": "rlstack's ModelCatalog builds Dict/Tuple observation encoders "
                                              "itself (one encoder per key) for the default model",
    "rlstack.models.tf.complex_input_net": "rlstack's ModelCatalog builds Dict/Tuple observation encoders itself "
                                           "(one encoder per key) for the default model",
    "rlstack.policies.dynamic_tf_policy": "rlstack's TF policies are tf.function-compiled TF 2 code: subclass "
                                          "rlstack.policies.tf_policy.TFPolicy",
    "rlstack.policies.eager_tf_policy": "rlstack's TF policies are tf.function-compiled TF 2 code: subclass "
                                        "rlstack.policies.tf_policy.TFPolicy",
    "rlstack.evaluation.sampler": "rlstack's sampling loop is RolloutWorker.sample() "
                                  "(rlstack.evaluation.rollout_worker)",
    "rlstack.evaluation.collectors": "rlstack's RolloutWorker builds its SampleBatch itself; there are no "
                                     "sample collectors",
    "rlstack.evaluation.observation_function": "rlstack's multiagent.observation_fn is a plain function "
                                               "fn(agent_obs, worker, base_env, policies, episode, **kwargs) -> "
                                               "agent_obs; 1.13's ObservationFunction base class is not needed",
    # --- utils -------------------------------------------------------------------------
    "rlstack.contrib": "RLlib's contributed algorithms are not in rlstack",
    # --- examples ----------------------------------------------------------------------
    "rlstack.examples": "this RLlib example module is not shipped with rlstack (see the rlstack/examples folder "
                        "for the ones that are, e.g. rlstack.examples.env.action_mask_env); copy the example you "
                        "need into your project",
}


class MissingModuleError(RLStackError, ModuleNotFoundError):
    """An ``rlstack.*`` module that does not exist; the message says what rlstack offers instead."""


def _rllib_name(name: str) -> str:
    # The renames, undone: rlstack.trainers -> ray.rllib.agents, rlstack.policies ->
    # ray.rllib.policy, rlstack -> ray.rllib.
    for ours, theirs in (("rlstack.trainers", "ray.rllib.agents"), ("rlstack.policies", "ray.rllib.policy")):
        if name == ours or name.startswith(ours + "."):
            return theirs + name[len(ours):]
    return "ray.rllib" + name[len("rlstack"):]


def _guidance(fullname: str) -> str:
    # An algorithm package that exists is not "missing", though a module inside it may be.
    from rlstack.trainers.common.registry import declarations

    existing = {declaration.package for declaration in declarations().values()}
    parts = fullname.split(".")
    for end in range(len(parts), 1, -1):  # the longest listed prefix
        prefix = ".".join(parts[:end])
        if prefix in MISSING and prefix not in existing:
            original = _rllib_name(fullname)
            return (f"No module named {fullname!r} (RLlib's {original}): {describe(MISSING[prefix])}. "
                    f"See {_MIGRATING}.")
    return (f"No module named {fullname!r}: rlstack has no such module. After renaming ray.rllib.agents -> "
            f"rlstack.trainers, ray.rllib.policy -> rlstack.policies and ray.rllib -> rlstack, see {_MIGRATING} "
            "for what rlstack offers instead.")


class MissingModuleFinder:
    """A ``sys.meta_path`` finder, placed last, that turns a failed ``rlstack.*`` import
    into a :class:`MissingModuleError` saying what rlstack offers instead."""

    def find_spec(self, fullname: str, path: Sequence[str] | None = None, target: Any = None) -> None:
        """Raises for an ``rlstack.*`` name (every earlier finder gave up on it); returns
        None for any other name, leaving it to Python's own error.

        Raises:
            MissingModuleError: For an ``rlstack.*`` name.
        """
        if fullname.startswith("rlstack."):
            raise MissingModuleError(_guidance(fullname), name=fullname)
        return None

    def invalidate_caches(self) -> None:
        """Nothing is cached (``importlib.invalidate_caches`` calls this)."""


def install() -> None:
    """Appends the finder to ``sys.meta_path`` once (``import rlstack`` calls this)."""
    if not any(isinstance(finder, MissingModuleFinder) for finder in sys.meta_path):
        sys.meta_path.append(MissingModuleFinder())
