"""The policies of a rollout worker: how one is built, its acting copy, and (multi-agent)
the map of them by policy id with each one's observation filter and the agent mapping.

A policy of the algorithm's own class is the learner's framework policy on the driver's
worker and on a worker that computes gradients (A3C), a :class:`NumpyPolicy` on the other
remote workers where numpy acting applies (built-in dense model, CPU). Where the framework
policy samples (the driver with ``num_workers=0``) a numpy copy acts for it, reading its
weights in place where both sides allow (:func:`build_policy`). A user's policy class
(``PolicySpec(policy_class=...)``) is built as it is, ``cls(obs_space, action_space,
config)``, and acts itself.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np

from rlstack.env.multi_agent_env import agent_space, spaces_by_agent
from rlstack.errors import ConfigError, EnvError
from rlstack.models.preprocessors import Preprocessor, get_preprocessor
from rlstack.policies.numpy_policy import PostprocessFn, numpy_inference_applies
from rlstack.policies.policy import Policy
from rlstack.policies.policy_map import PolicyMap, PolicySpec
from rlstack.policies.view_requirement import check_views
from rlstack.sample_batch import DEFAULT_POLICY_ID
from rlstack.utils.filters import make_filter
from rlstack.utils.imports import import_object

if TYPE_CHECKING:
    from rlstack.utils.filters import MeanStdFilter, NoFilter

__all__ = ["BuildArgs", "WorkerPolicyMap", "adapt_compute_actions", "build_policy", "class_path", "mapping_caller",
           "resolve_class"]


def resolve_class(policy_class: type[Policy] | str) -> type[Policy]:
    """The class itself, or the class an ``"module:Class"`` import path names (imported here)."""
    return import_object(policy_class, "policy class") if isinstance(policy_class, str) else policy_class


def class_path(cls: type | str) -> str:
    """``"module:Class"`` for a class, so it can travel without importing its module."""
    return cls if isinstance(cls, str) else f"{cls.__module__}:{cls.__qualname__}"


@dataclass
class BuildArgs:
    """What a worker builds its policies of the algorithm's class with.

    Attributes:
        policy_class: The algorithm's policy class for the framework, or its import path.
        worker_index: 0 for the driver's worker.
        num_gpus: GPUs for the policy.
        postprocess_fn: The algorithm's numpy postprocessing (None: no numpy acting).
        numpy_class: The algorithm's numpy acting policy class.
        learns: The worker computes gradients (A3C): it keeps the framework policy.
        has_env: The worker samples (only then does an acting copy pay off).
    """

    policy_class: type[Policy] | str
    worker_index: int
    num_gpus: float
    postprocess_fn: PostprocessFn | None
    numpy_class: type[Policy]
    learns: bool
    has_env: bool


def algorithm_defaults(policy_class: type) -> dict:
    """The DEFAULT_CONFIG of the rlstack algorithm package that defines ``policy_class``
    (or the first of its bases from one), else ``{}``."""
    for cls in policy_class.__mro__:
        parts = cls.__module__.split(".")
        if parts[:2] == ["rlstack", "trainers"] and len(parts) > 3:
            # Imported when asked: the algorithm packages are a layer above this one.
            package = importlib.import_module(".".join(parts[:3]))
            defaults = getattr(package, "DEFAULT_CONFIG", None)
            if isinstance(defaults, dict):
                return defaults
    return {}


def build_policy(args: BuildArgs, observation_space: gym.Space, action_space: gym.Space, config: dict,
                 sampling_seed: int | None) -> tuple[Policy, Policy, bool]:
    """Builds a policy of the algorithm's class for one worker.

    Returns:
        ``(policy, acting_policy, shares_weights)``: the policy the worker holds (the
        learner's on the driver), the one that acts while sampling (itself, or a numpy
        copy), and whether the copy reads the policy's weights in place.
    """
    numpy_acting = args.postprocess_fn is not None and numpy_inference_applies(
        observation_space, action_space, config, args.num_gpus)
    if args.worker_index > 0 and numpy_acting and not args.learns:
        # A remote worker that acts in numpy never imports torch or TensorFlow.
        policy: Policy = args.numpy_class(observation_space, action_space, config, sampling_seed=sampling_seed,
                                          postprocess_fn=args.postprocess_fn)
        return policy, policy, False
    policy_class = resolve_class(args.policy_class)
    if args.worker_index > 0:
        # Rollout workers share the machine's cores with each other and the learner.
        policy_class.pin_threads(config)
    if _takes_rlstack_arguments(policy_class):
        policy = policy_class(observation_space, action_space, config, num_gpus=args.num_gpus,
                              sampling_seed=sampling_seed)
    else:  # a Policy subclass written for 1.13: (observation_space, action_space, config)
        policy = construct_classic_policy(policy_class, observation_space, action_space, config)
    if policy.framework not in ("torch", "tf", "numpy"):
        # A hand-written Policy subclass: 1.13's compute_actions; without a value function
        # its rows get no bootstrap values (as in a multi-agent run).
        adapt_compute_actions(policy)
        if type(policy).compute_values is Policy.compute_values:
            policy.needs_bootstrap_value = False
    if not ((args.worker_index == 0 or args.learns) and numpy_acting and args.has_env
            and getattr(policy, "builtin_model", False)):
        return policy, policy, False
    # The driver's worker, and a remote worker that computes gradients, keep the framework
    # policy for learning but act through a numpy copy (one framework call per step costs
    # more than the step).
    acting = args.numpy_class(observation_space, action_space, config, sampling_seed=sampling_seed,
                              postprocess_fn=args.postprocess_fn)
    views = policy.shared_weights()
    shares = views is not None and acting.share_weights(views)
    if not shares:
        acting.set_weights(policy.get_weights())
    return policy, acting, shares


def refresh_acting(policy: Policy, acting: Policy, shares: bool, weights: dict[str, np.ndarray] | None = None) -> None:
    """Copies the policy's weights (or ``weights``) into its separate acting copy, if it
    has one that does not read them in place, and moves the copy's schedules along."""
    if acting is not policy:
        if not shares and weights is None:
            acting.set_acting_weights(policy.acting_weights())
        elif not shares:
            acting.set_weights(weights)
        acting.on_global_var_update(policy.global_timestep)


def construct_classic_policy(policy_class: type, observation_space: gym.Space, action_space: gym.Space,
                             config: dict) -> Policy:
    """A hand-written policy (neither torch, TF nor numpy) built as 1.13 built it: with
    the observation space its observations arrive in, preprocessed (a one-hot Box for a
    Discrete space, one flat Box for Dict / Tuple; ``.original_space`` the env's), while
    the worker encodes the env's observations with the env space's preprocessor."""
    if getattr(policy_class, "framework", "") in ("torch", "tf", "numpy") \
            or isinstance(observation_space, gym.spaces.Box):
        return policy_class(observation_space, action_space, config)
    preprocessor = get_preprocessor(observation_space)(observation_space)
    policy = policy_class(preprocessor.observation_space, action_space, config)
    policy.preprocessor = Preprocessor(observation_space)
    return policy


def _takes_rlstack_arguments(policy_class: type) -> bool:
    # Whether the constructor takes rlstack's num_gpus / sampling_seed keywords.
    try:
        parameters = inspect.signature(policy_class).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.kind is p.VAR_KEYWORD or p.name == "num_gpus" for p in parameters)


def adapt_compute_actions(policy: Policy) -> None:
    """Lets a user's policy written for 1.13 act where rlstack calls ``compute_actions``:
    its ``(actions, state_outs, extras)`` comes back as rlstack's ``(actions, extras)``
    (numpy), each state output as the extra ``state_out_<i>``; ``explore`` is passed only
    if its signature takes it, and ``state_batches`` only when given (a policy whose
    ``get_initial_state()`` is not empty carries a state per agent). A policy that
    declares views the samplers do not build is refused (``check_views``)."""
    check_views(policy.view_requirements, f"policy {type(policy).__name__}")
    compute_actions = policy.compute_actions
    try:
        params = inspect.signature(compute_actions).parameters
        takes_explore = "explore" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())
    except (TypeError, ValueError):
        takes_explore = True

    def call(obs_batch: Any, explore: bool | None = None, **kwargs: Any) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        out = compute_actions(obs_batch, explore=explore, **kwargs) if takes_explore else \
            compute_actions(obs_batch, **kwargs)
        actions, state_outs, extras = out if len(out) == 3 else (out[0], [], out[1])
        n = len(obs_batch)
        columns = {key: np.asarray(value) for key, value in (extras or {}).items()
                   if np.ndim(value) and len(value) == n}
        for i, value in enumerate(state_outs or []):
            columns[f"state_out_{i}"] = np.asarray(value)
        return np.asarray(actions), columns

    policy.compute_actions = call  # type: ignore[method-assign]


def mapping_caller(fn: Any, policy_ids: list[str]) -> Callable[[Any, Any, Any], str]:
    """``call(agent_id, episode, worker) -> policy id`` for ``policy_mapping_fn``: an import
    path is imported; 1.13's ``fn(agent_id)`` and ``fn(agent_id, episode, **kw)`` forms
    get the arguments they take. None maps every agent to the only policy when there is
    one, else to ``"default_policy"``."""
    if fn is None:
        only = policy_ids[0] if len(policy_ids) == 1 else DEFAULT_POLICY_ID
        return lambda agent_id, episode, worker: only
    if isinstance(fn, str):
        fn = import_object(fn, "multiagent.policy_mapping_fn")
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # a builtin without a signature (e.g. str): one argument
        return lambda agent_id, episode, worker: fn(agent_id)
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    takes_any = any(p.kind is p.VAR_POSITIONAL for p in params)
    takes_keywords = any(p.kind is p.VAR_KEYWORD for p in params)
    # (agent_id, episode, worker) go positionally as far as the function takes them, the
    # rest by keyword if it takes **kwargs (1.13's call: fn(agent_id, episode, worker=worker)).
    n = 3 if takes_any else max(1, min(len(positional), 3))

    def call(agent_id: Any, episode: Any, worker: Any) -> str:
        named = {"episode": episode, "worker": worker}
        keywords = dict(list(named.items())[n - 1:]) if takes_keywords else {}
        return fn(*(agent_id, episode, worker)[:n], **keywords)

    return call


class WorkerPolicyMap:
    """A multi-agent worker's policies, acting copies and observation filters by policy id.

    Args:
        specs: ``{policy_id: PolicySpec}`` from the trainer (configs complete; spaces may
            be None); None: one ``default_policy`` of the algorithm's class.
        spaces: ``{policy_id: (obs_space, action_space)}`` for a worker without envs (from
            a worker that has them); None: taken from ``env``.
        env: One sub-env (a MultiAgentEnv) to read spaces and agent ids from.
        config: The worker's config (the policies' own come with ``specs``).
        args: How to build a policy of the algorithm's class.
        bind: ``bind(policy_id, policy, acting_policy)``: the worker's per-policy set-up
            (worker index, callbacks).
    """

    def __init__(self, specs: dict[str, PolicySpec] | None, spaces: dict[str, tuple[gym.Space, gym.Space]] | None,
                 env: Any, config: dict, args: BuildArgs, bind: Callable[[str, Policy, Policy], None]) -> None:
        self.config = config
        self.args = args
        self._bind = bind
        multiagent = config["multiagent"]
        specs = dict(specs or {DEFAULT_POLICY_ID: PolicySpec()})
        self.map_agent = mapping_caller(multiagent["policy_mapping_fn"], list(specs))
        self.specs = {pid: self._complete(pid, spec, env, spaces) for pid, spec in specs.items()}
        self.to_train = multiagent["policies_to_train"]
        self._checked: set[tuple[Any, str]] = set()  # (agent id, policy id) pairs whose spaces fit
        self._build()

    def _complete(self, policy_id: str, spec: PolicySpec, env: Any, spaces: dict | None) -> PolicySpec:
        # Fills in the spaces (from the driver's copy, or from the env: the space of an
        # agent mapped to this policy, or the env's one space) and the config.
        obs_space, action_space = spec.observation_space, spec.action_space
        if spaces is not None:
            obs_space, action_space = spaces[policy_id]
        elif obs_space is None or action_space is None:
            agent = self._agent_of(policy_id, env)
            obs_space = obs_space or agent_space(env, agent, "observation")
            action_space = action_space or agent_space(env, agent, "action")
        return PolicySpec(spec.policy_class, obs_space, action_space, spec.config or self.config)

    def _agent_of(self, policy_id: str, env: Any) -> Any:
        # An agent of the env that maps to ``policy_id`` (any agent when every agent has
        # the same spaces); the mapping is asked with no episode, as 1.13 did to infer spaces.
        agents = sorted(env.get_agent_ids(), key=str)
        if not (spaces_by_agent(env, "observation") or spaces_by_agent(env, "action")):
            return agents[0] if agents else None  # every agent has the env's one space
        for agent_id in agents:
            try:
                if self.map_agent(agent_id, None, None) == policy_id:
                    return agent_id
            except Exception:  # noqa: BLE001 - a mapping that needs an episode: ask the next agent
                continue
        raise ConfigError(
            f"Cannot infer the spaces of policy {policy_id!r}: {type(env).__name__} has a space per agent and no "
            f"agent of {sorted(map(str, agents))} maps to {policy_id!r} (policy_mapping_fn asked without an "
            f"episode). Give them: multiagent.policies[{policy_id!r}] = PolicySpec(observation_space=..., "
            "action_space=...).")

    def _build(self) -> None:
        self.policies = PolicyMap()
        self.acting: dict[str, Policy] = {}
        self.filters: dict[str, NoFilter | MeanStdFilter] = {}
        self._shares: dict[str, bool] = {}
        self._built = 0  # policies built so far: each new one samples from its own stream
        for pid, spec in self.specs.items():
            self._build_one(pid, spec)

    def _build_one(self, pid: str, spec: PolicySpec) -> None:
        config = spec.config
        # Each policy samples from its own stream (the first from the worker's, as single-agent).
        seed = self.config.get("seed")
        sampling_seed = None if seed is None else seed + self.args.worker_index + 100_003 * self._built
        self._built += 1
        if spec.policy_class is None or class_path(spec.policy_class) == class_path(self.args.policy_class):
            policy, acting, shares = build_policy(self.args, spec.observation_space, spec.action_space, config,
                                                  sampling_seed)
        else:
            # A user's policy acts as it is; one with a state (1.13's get_initial_state())
            # gets its state per agent, carried from step to step by the sampler.
            policy_class = resolve_class(spec.policy_class)
            # Another algorithm's policy (a DQN policy in a PPO trainer, 1.13's two-trainer
            # pattern) finds its own algorithm's keys beneath the trainer's, as in 1.13.
            config = {**algorithm_defaults(policy_class), **config}
            policy = construct_classic_policy(policy_class, spec.observation_space, spec.action_space, config)
            adapt_compute_actions(policy)
            acting, shares = policy, False
        self.policies[pid], self.acting[pid], self._shares[pid] = policy, acting, shares
        self.filters[pid] = make_filter(config["observation_filter"], policy.preprocessor.shape)
        self._bind(pid, policy, acting)

    def add(self, policy_id: str, spec: PolicySpec, policy_mapping_fn: Any = None,
            policies_to_train: Any = None, env: Any = None) -> Policy:
        """Builds one more policy (``Trainer.add_policy`` on this worker).

        Args:
            policy_id: Its id (not one of the map's).
            spec: How to build it (config complete; spaces None: taken from ``env``).
            policy_mapping_fn: The mapping new episodes use from now on (None: unchanged).
            policies_to_train: The new ``policies_to_train`` (None: unchanged).
            env: One sub-env, to read missing spaces from.

        Returns:
            The new policy.

        Raises:
            ConfigError: If the id is taken or the spaces cannot be inferred.
        """
        if policy_id in self.policies:
            raise ConfigError(f"Policy {policy_id!r} exists already (the policies are {sorted(self.policies)}); "
                              "add it under a new id, or remove_policy() it first.")
        if policy_mapping_fn is not None:
            self.set_mapping(policy_mapping_fn)
        if policies_to_train is not None:
            self.to_train = policies_to_train
        spec = self._complete(policy_id, spec, env, None)
        self.specs[policy_id] = spec
        self._build_one(policy_id, spec)
        return self.policies[policy_id]

    def remove(self, policy_id: str, policy_mapping_fn: Any = None, policies_to_train: Any = None) -> None:
        """Drops a policy (``Trainer.remove_policy`` on this worker).

        Raises:
            KeyError: For an unknown policy id, naming the known ones.
            ConfigError: For the last policy (a worker needs one).
        """
        if policy_id not in self.policies:
            raise KeyError(f"Unknown policy id {policy_id!r}; the policies are {sorted(self.policies)}.")
        if len(self.policies) == 1:
            raise ConfigError(f"Cannot remove {policy_id!r}: it is the only policy; add another one first.")
        for table in (self.policies, self.acting, self.filters, self._shares, self.specs):
            del table[policy_id]
        self._checked = {pair for pair in self._checked if pair[1] != policy_id}
        if policy_mapping_fn is not None:
            self.set_mapping(policy_mapping_fn)
        if policies_to_train is not None:
            self.to_train = policies_to_train

    def set_mapping(self, policy_mapping_fn: Any) -> None:
        """Maps the agents of new episodes with ``policy_mapping_fn`` (running episodes keep
        their agents' policies, as 1.13's did)."""
        self.map_agent = mapping_caller(policy_mapping_fn, list(self.policies))

    # ----- agents -----------------------------------------------------------------------

    def policy_for(self, agent_id: Any, episode: Any, worker: Any, env: Any) -> str:
        """The policy id ``policy_mapping_fn`` gives ``agent_id`` in ``episode``, checked.

        Raises:
            ConfigError: If the mapping raises or names no policy of the map, or the
                policy's spaces differ from the env's for that agent.
        """
        try:
            policy_id = self.map_agent(agent_id, episode, worker)
        except Exception as exc:  # noqa: BLE001 - any error of the user's function
            raise ConfigError(f"policy_mapping_fn raised {type(exc).__name__} for agent {agent_id!r}: {exc}. It "
                              f"must map every agent the env returns observations for to one of "
                              f"{sorted(self.policies)}.") from exc
        if policy_id not in self.policies:
            raise ConfigError(f"policy_mapping_fn maps agent {agent_id!r} to policy {policy_id!r}, which does not "
                              f"exist; the policies are {sorted(self.policies)}. Add it to multiagent.policies or "
                              "map the agent to one of them.")
        if (agent_id, policy_id) not in self._checked:
            self._check_spaces(agent_id, policy_id, env)
            self._checked.add((agent_id, policy_id))
        return policy_id

    def _check_spaces(self, agent_id: Any, policy_id: str, env: Any) -> None:
        spec = self.specs[policy_id]
        for kind, given in (("observation", spec.observation_space), ("action", spec.action_space)):
            if kind == "observation" and (self.config.get("multiagent") or {}).get("observation_fn"):
                continue  # observation_fn gives the policies observations of its own making
            try:
                expected = agent_space(env, agent_id, kind)
            except KeyError as exc:
                raise EnvError(f"{type(env).__name__} returned an observation for agent {agent_id!r} (mapped to policy "
                               f"{policy_id!r}), but its {kind}_space has no space for it: {exc.args[0]}") from None
            if expected is not None and expected != given:  # None: the env declares no spaces
                raise ConfigError(
                    f"Agent {agent_id!r} is mapped to policy {policy_id!r}, whose {kind} space is {given}, but the "
                    f"env's {kind} space for that agent is {expected}. Give {policy_id!r} the agent's spaces (None "
                    "takes them from the env) or map the agent to a policy with its spaces.")

    def is_trained(self, policy_id: str, batch: Any = None) -> bool:
        """Whether ``policy_id`` learns (``policies_to_train``: a list, or ``fn(id, batch)``)."""
        if self.to_train is None:
            return True
        if callable(self.to_train):
            return bool(self.to_train(policy_id, batch))
        return policy_id in self.to_train

    # ----- weights and filters ----------------------------------------------------------

    def spaces(self) -> dict[str, tuple[gym.Space, gym.Space]]:
        """``{policy_id: (obs_space, action_space)}``."""
        return {pid: (spec.observation_space, spec.action_space) for pid, spec in self.specs.items()}

    def get_weights(self, policy_ids: Any = None) -> dict[str, dict[str, np.ndarray]]:
        """``{policy_id: weights}`` of ``policy_ids`` (None: every policy)."""
        ids = list(self.policies) if policy_ids is None else list(policy_ids)
        return {pid: self.policies[pid].get_weights() for pid in ids}

    def set_weights(self, weights: dict[str, dict[str, np.ndarray]], global_timestep: int | None = None) -> None:
        """Loads ``{policy_id: weights}`` (other policies keep theirs) and moves every
        policy's schedules to ``global_timestep``."""
        for pid, policy_weights in weights.items():
            self.policies[pid].set_weights(policy_weights)
        for pid, policy in self.policies.items():
            if global_timestep is not None:
                policy.on_global_var_update(global_timestep)
            if pid in weights or global_timestep is not None:
                refresh_acting(policy, self.acting[pid], self._shares[pid], weights.get(pid))

    def refresh(self, weights: dict[str, dict[str, np.ndarray]] | None = None) -> None:
        """Brings each acting copy up to its policy (``weights``: those that changed)."""
        for pid in (self.policies if weights is None else weights):
            refresh_acting(self.policies[pid], self.acting[pid], self._shares[pid],
                           None if weights is None else weights[pid])

    def get_filter_state(self) -> dict[str, dict[str, np.ndarray]]:
        """Each policy's observation-filter statistics."""
        return {pid: f.get_state() for pid, f in self.filters.items()}

    def set_filter_state(self, state: dict[str, dict[str, np.ndarray]]) -> None:
        """Replaces the statistics of the policies in ``state``."""
        for pid, policy_state in state.items():
            self.filters[pid].set_state(policy_state)

    def flush_filters(self) -> dict[str, dict[str, np.ndarray]]:
        """What each filter saw since the last sync (buffers cleared)."""
        return {pid: f.flush_buffer() for pid, f in self.filters.items()}

    def apply_filter_buffers(self, buffers: dict[str, dict[str, np.ndarray]]) -> None:
        """Merges another worker's :meth:`flush_filters` into these filters."""
        for pid, buffer in buffers.items():
            self.filters[pid].apply_buffer(buffer)

    def uses_filters(self) -> bool:
        """Whether some policy filters its observations."""
        return any(spec.config["observation_filter"] != "NoFilter" for spec in self.specs.values())

    def reset(self, config: dict, specs: dict[str, PolicySpec] | None) -> None:
        """Rebuilds every policy from its initial weights with new configs (same spaces)."""
        self.config = config
        fresh = specs or {DEFAULT_POLICY_ID: PolicySpec()}
        self.specs = {pid: PolicySpec(spec.policy_class, self.specs[pid].observation_space,
                                      self.specs[pid].action_space, (fresh.get(pid) or spec).config or config)
                      for pid, spec in self.specs.items()}
        self.to_train = config["multiagent"]["policies_to_train"]
        self._build()
