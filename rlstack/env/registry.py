"""Where envs come from: ``register_env`` names, gymnasium ids, classes and creators."""

from __future__ import annotations

import ast
import difflib
import functools
import importlib
import inspect
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, Union

import gymnasium as gym

from rlstack.env import atari
from rlstack.env.base_env import BaseEnv
from rlstack.env.env_context import EnvContext
from rlstack.env.external_env import ExternalEnv
from rlstack.env.gym_ids import gymnasium_successor
from rlstack.env.legacy import LegacyEnvAdapter, is_legacy_env
from rlstack.errors import EnvError, did_you_mean
from rlstack.utils.migration_rule import renamed_module

EnvCreator = Callable[[EnvContext], Any]
EnvSpec = Union[str, type, EnvCreator]

_REGISTRY: dict[str, EnvCreator] = {}
# Example envs every process knows by name (as 1.13's examples were imported by path):
# name -> "module:Class", imported on first use.
EXAMPLE_ENVS = {"StatelessCartPole": "rlstack.examples.env.stateless_cartpole:StatelessCartPole",
                 "RepeatAfterMeEnv": "rlstack.examples.env.repeat_after_me_env:RepeatAfterMeEnv",
                 "RockPaperScissors": "rlstack.examples.env.rock_paper_scissors:RockPaperScissors",
                 **{name: f"rlstack.examples.env.multi_agent:{name}" for name in (
                     "MultiAgentCartPole", "MultiAgentPendulum", "BasicMultiAgent", "RoundRobinMultiAgent",
                     "FlexAgentsMultiAgent", "EarlyDoneMultiAgent")}}
logger = logging.getLogger(__name__)


def register_env(name: str, env_creator: EnvCreator) -> None:
    """Makes ``env_creator`` available as ``config["env"] = name``.

    The creator is called with an :class:`EnvContext` (the ``env_config`` dict with
    ``worker_index``, ``vector_index`` and ``num_workers``) and returns a gymnasium env
    (or an old gym-style env, which is adapted).

    The creator is also registered with Ray Tune's global registry, which Ray makes
    available to every process of the cluster, so Tune trials and rollout workers find it
    too. Register before building the trainer or starting the Tune run.

    Args:
        name: The name to use in ``config["env"]``.
        env_creator: A callable taking an EnvContext.

    Raises:
        TypeError: If ``env_creator`` is not callable.
    """
    if not callable(env_creator):
        raise TypeError(f"register_env({name!r}, ...) needs a callable creator, got {type(env_creator).__name__}.")
    _REGISTRY[name] = env_creator
    from ray.tune.registry import ENV_CREATOR, _global_registry

    try:
        _global_registry.register(ENV_CREATOR, name, env_creator)
    except Exception as exc:  # noqa: BLE001 - e.g. a creator that cannot be pickled
        logger.warning("Env %r is registered in this process only (Tune trials will not find it): %s", name, exc)


def _from_tune_registry(name: str) -> EnvCreator | None:
    # Only consulted for names this process does not know: importing Tune is not free.
    import sys

    if "ray.tune" not in sys.modules:
        import ray

        if not ray.is_initialized():
            return None
    from ray.tune.registry import ENV_CREATOR, _global_registry

    try:
        if _global_registry.contains(ENV_CREATOR, name):
            return _global_registry.get(ENV_CREATOR, name)
    except Exception:  # noqa: BLE001 - no Ray / GCS reachable: treat as unknown
        return None
    return None


def registered_envs() -> dict[str, EnvCreator]:
    """A copy of the envs registered with :func:`register_env` in this process."""
    return dict(_REGISTRY)


def restore_registry(entries: dict[str, EnvCreator]) -> None:
    """Adds entries captured with :func:`registered_envs` (used by remote workers)."""
    _REGISTRY.update(entries)


def _known_names() -> list[str]:
    return sorted(set(_REGISTRY) | set(EXAMPLE_ENVS) | set(gym.registry.keys()))


def _example_env(name: str) -> EnvCreator | None:
    path = EXAMPLE_ENVS.get(name)
    if path is None:
        return None
    module, cls = path.split(":")
    return getattr(importlib.import_module(module), cls)


# The package of the example envs rlstack ships (1.13's ray.rllib.examples.env, renamed).
EXAMPLE_ENV_PACKAGE = "rlstack.examples.env"


@functools.lru_cache(maxsize=1)
def shipped_example_envs() -> dict[str, str]:
    """The example envs rlstack ships, found without importing them.

    Returns:
        ``{class name: "module.Class"}`` relative to ``rlstack.examples.env`` (so
        ``"random_env.RandomEnv"``), for each public env class, env creator named as a
        class (``RockPaperScissors``) or env made at module level
        (``TransformedActionPendulum = transform_action_space(...)``) of its modules;
        wrappers are left out.
    """
    folder = Path(__file__).resolve().parents[1] / "examples" / "env"
    found: dict[str, str] = {}
    for file in sorted(folder.glob("*.py")):
        if file.name.startswith("_"):
            continue
        tree = ast.parse(file.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(base) for base in node.bases]
                names = [] if any(base.endswith("Wrapper") for base in bases) else [node.name]
            elif isinstance(node, ast.FunctionDef):
                names = [node.name]  # an env creator named as a class (RockPaperScissors)
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                names = [target.id for target in node.targets if isinstance(target, ast.Name)]
            else:
                continue
            for name in names:
                # CamelCase names only: not constants, not private helpers.
                if name[:1].isupper() and not name.isupper():
                    found.setdefault(name, f"{file.stem}.{name}")
    return found


def _not_shipped(path: str, prefix: str, name: str, reason: str) -> EnvError:
    # An example env of 1.13's that rlstack does not ship: name the closest ones it does.
    shipped = shipped_example_envs()
    closest = difflib.get_close_matches(name, list(shipped), n=3, cutoff=0.0)
    return EnvError(
        f"config['env'] = {path!r}: {reason}, so this example env is not shipped with rlstack. Closest shipped "
        f"example envs: {', '.join(repr(f'{prefix}.{shipped[c]}') for c in closest)} (all of them: "
        f"{', '.join(sorted(shipped))}, under {EXAMPLE_ENV_PACKAGE}). For another one, copy its class into a module "
        "of your own and give that class's path, or register it with rlstack.register_env."
    )


def _env_class_at(path: str) -> type | None:
    # 1.13 took "package.module.EnvClass" for an unregistered env; a path into RLlib's own
    # modules ("ray.rllib.examples.env.random_env.RandomEnv") names rlstack's by the
    # migration rule, as the codemod leaves strings as they are.
    module, _, name = path.rpartition(".")
    if not module or not name.isidentifier() or not all(part.isidentifier() for part in module.split(".")):
        return None
    renamed = renamed_module(module)
    # A path into the example envs (1.13's or rlstack's name for them) is answered with
    # the shipped ones when it misses; any other module is the user's own.
    example = renamed.rpartition(".")[0] == EXAMPLE_ENV_PACKAGE
    prefix = module.rpartition(".")[0]
    try:
        found = getattr(importlib.import_module(renamed), name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and not renamed.startswith(exc.name):
            raise  # the env's own module imports something missing: say what
        if example:
            raise _not_shipped(path, prefix, name, f"rlstack has no module {renamed!r}") from None
        return None
    except AttributeError:
        if example:
            raise _not_shipped(path, prefix, name, f"module {renamed!r} has no {name!r}") from None
        raise EnvError(f"config['env'] = {path!r}: module {renamed!r} has no {name!r}.") from None
    if not callable(found):
        raise EnvError(f"config['env'] = {path!r} is a {type(found).__name__}, not an env class or creator.")
    return found


# Retired gym ids already warned about in this process (one warning per id, not per env).
_WARNED_RETIRED_IDS: set[str] = set()


def _successor_of_retired_id(env_id: str) -> str:
    # A gym 0.21 id that gymnasium registers under a newer version ("Pendulum-v0") makes
    # that version, as 1.x scripts and YAML files name the old one; anything else stays
    # as it is (and fails as unknown below).
    successor = gymnasium_successor(env_id)
    if successor is None:
        return env_id
    if env_id not in _WARNED_RETIRED_IDS:
        _WARNED_RETIRED_IDS.add(env_id)
        logger.warning("Env %r is a gym id that gymnasium no longer registers: making its successor %r instead. "
                       "Set config['env'] = %r (or run `rlstack migrate` on the script or YAML file) to silence "
                       "this warning.", env_id, successor, successor)
    return successor


def make_env(
    spec: EnvSpec,
    context: EnvContext,
    preprocessor_pref: str | None = None,
    model_config: dict[str, Any] | None = None,
) -> gym.Env:
    """Builds one env from ``spec``.

    Args:
        spec: A name given to :func:`register_env`, a gymnasium id (a gym id gymnasium
            retired, such as ``"Pendulum-v0"``, makes its successor, with a warning:
            :func:`~rlstack.env.gym_ids.gymnasium_successor`), an env class's
            import path (``"my_package.envs.MyEnv"``; a ``ray.rllib.`` one is renamed by
            the migration rule), a ``gym.Env`` subclass (constructed with the EnvContext) or a creator callable.
        context: The ``env_config`` with the env's indices.
        preprocessor_pref: "deepmind" wraps Atari (ALE) screen games in the standard
            preprocessing (env/atari.py); any env it does not take (all of them under
            None or "rllib") gets classic RLlib's own: ``(210, 160, 3)`` screens resized,
            grey-scaled and scaled by the model config, an ALE game's RAM scaled to
            ``[-1, 1)`` (:func:`~rlstack.env.atari.wrap_rllib_preprocessing`). Other envs
            stay as they are.
        model_config: The ``model`` config: ``dim`` and ``framestack`` size the DeepMind
            preprocessing, ``dim``, ``grayscale`` and ``zero_mean`` RLlib's.

    Returns:
        A gymnasium env; old gym-style envs come back wrapped in LegacyEnvAdapter.

    Raises:
        EnvError: If the name is unknown or the creator returns something else than an env.
    """
    if spec is None:
        raise EnvError("No env given: pass PPOTrainer(config, env='CartPole-v1') or set config['env'].")
    if isinstance(spec, str):
        creator = _REGISTRY.get(spec) or _example_env(spec) or (
            None if spec in gym.registry else _from_tune_registry(spec) or _env_class_at(spec))
        if creator is None and spec not in gym.registry and not atari.ensure_ale_registered(spec):
            spec = _successor_of_retired_id(spec)
        if creator is not None:
            env = creator(context)
        elif spec in gym.registry or atari.ensure_ale_registered(spec):
            kwargs = dict(context)
            if preprocessor_pref == "deepmind" and atari.looks_like_atari_id(spec):
                kwargs = atari.make_atari_kwargs(spec, kwargs)
            try:
                env = gym.make(spec, **kwargs)
            except TypeError as exc:
                raise EnvError(f"gymnasium env {spec!r} rejected env_config {dict(context)}: {exc}") from exc
        else:
            raise EnvError(
                f"Unknown env {spec!r}: it is neither registered with rlstack.register_env nor a "
                f"gymnasium id{did_you_mean(spec, _known_names()) or '.'} Register it with "
                f"register_env({spec!r}, creator) or give an env class."
            )
    elif inspect.isclass(spec):
        env = spec(context)
    elif callable(spec):
        env = spec(context)
    else:
        raise EnvError(f"config['env'] must be a name, an env class or a creator, got {type(spec).__name__}.")
    if isinstance(env, (ExternalEnv, BaseEnv)):
        # An ExternalEnv runs its own loop (rlstack/env/external_env.py); a BaseEnv (a
        # classic custom VectorEnv) steps its own sub-envs.
        return env
    env = ensure_gymnasium_env(env, spec)
    if preprocessor_pref == "deepmind" and atari.is_atari(env):
        model_config = model_config or {}
        dim = int(model_config.get("dim", 84))
        if dim < 8:
            raise EnvError(f"model.dim={dim} is too small for Atari screens (preprocessor_pref='deepmind'); use 84 "
                           "or 42.")
        env = atari.wrap_atari(env, dim=dim, framestack=bool(model_config.get("framestack", True)))
    else:
        # 1.x ran its own image / RAM preprocessors wherever the DeepMind wrapper did not.
        env = atari.wrap_rllib_preprocessing(env, model_config)
    return env


def ensure_gymnasium_env(env: Any, spec: Any = None) -> gym.Env:
    """Returns ``env`` as a gymnasium env, adapting an old gym-style env.

    Raises:
        EnvError: If ``env`` has no spaces or no reset/step.
    """
    if isinstance(env, gym.Env):
        return LegacyEnvAdapter(env) if is_legacy_env(env) else env
    if inspect.isclass(env):  # (a class has the attributes an old gym-style env has)
        raise EnvError(
            f"The env creator for {spec!r} returned the class {env.__name__}, not an env: return an instance, "
            f"e.g. lambda ctx: {env.__name__}(...), or pass the class itself as the env."
        )
    if is_legacy_env(env):
        return LegacyEnvAdapter(env)
    text = " ".join(repr(env).split())
    raise EnvError(
        f"The env creator for {spec!r} returned {type(env).__name__}, which is not an env "
        f"({text if len(text) <= 60 else text[:57] + '...'}): it needs observation_space, action_space, reset() "
        "and step(). Return a gymnasium.Env (e.g. gymnasium.make(...) or an instance of your Env class)."
    )


def env_spec_name(spec: EnvSpec) -> str:
    """A printable name for an env spec."""
    if isinstance(spec, str):
        return spec
    return getattr(spec, "__name__", type(spec).__name__)
