"""The algorithms rlstack has, found by the declaration each algorithm package makes in
its own ``__init__.py``, and the same names for Ray Tune.

**The declaration.** A folder ``rlstack/trainers/<algo>/`` is an algorithm package when
its ``__init__.py`` holds, at module level::

    TRAINERS = {"PPO": "rlstack.trainers.ppo.ppo:PPOTrainer"}      # `run:` name -> "module:Class"
    PUBLIC = {"DEFAULT_CONFIG": "rlstack.trainers.ppo.ppo:DEFAULT_CONFIG"}  # optional extra names
    __getattr__, __dir__, __all__ = lazy_exports(__name__, TRAINERS, PUBLIC)

``TRAINERS`` maps each name a YAML file's ``run:`` key (classic RLlib 1.13's names) uses to
its trainer class; a folder may declare several (``dqn`` declares DQN and APEX).
``PUBLIC`` names whatever else ``from rlstack.trainers.<algo> import ...`` offers (the
``DEFAULT_CONFIG``, 1.13's spellings such as ``ApexTrainer``). :func:`lazy_exports` makes
the package hand those names out on first use, so importing the package imports neither
Ray nor Tune nor a framework. Nothing outside the folder names the algorithm:
:data:`ALGORITHMS`, ``rlstack.<Class>``, ``rlstack.__all__``, ``rlstack ls`` and Tune's
names all come from :func:`declarations`, which scans the packages under
``rlstack/trainers/`` once, on first use.

**Tune.** ``tune.run("PPO")`` / ``tune.Tuner("PPO")`` run rlstack's trainer once
``rlstack`` is imported, even when Ray's own RLlib is installed. Tune resolves a name
through ``ray.tune.registry._has_trainable``, and for a name it does not know it imports
``ray.rllib`` and registers every RLlib algorithm under the same names
(``ray.rllib._register_all``), overwriting any earlier registration in the job-wide
key-value store, from any process of the job. A registration made once could therefore be
lost later, so this module is the one place rlstack registers its trainers: it wraps that
lookup, and each time Tune looks up one of :data:`ALGORITHMS` it (re-)registers rlstack's
class first (trainer modules register nothing themselves); RLlib is never imported for
these names. The wrap is installed when ``ray.tune.registry`` is first imported (or at once
if it already is), so ``import rlstack`` imports neither Ray nor a trainer. A trainable
registered by the user under one of these names is replaced by rlstack's at lookup.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import pkgutil
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from rlstack.errors import ConfigError, RLStackError, did_you_mean

__all__ = [
    "ALGORITHMS",
    "Declaration",
    "declarations",
    "get_trainer_class",
    "install_tune_names",
    "lazy_exports",
    "load",
    "recurrent_algorithms",
    "scan",
    "trainer_class_names",
]

_TRAINERS_PACKAGE = "rlstack.trainers"
_TUNE_REGISTRY = "ray.tune.registry"


@dataclass(frozen=True)
class Declaration:
    """One trainer an algorithm package declares.

    Attributes:
        name: The ``run:`` name, e.g. ``"APEX"``.
        package: The declaring package, e.g. ``"rlstack.trainers.dqn"``.
        target: ``"module:Class"``, e.g. ``"rlstack.trainers.dqn.apex:ApeXTrainer"``.
    """

    name: str
    package: str
    target: str

    @property
    def class_name(self) -> str:
        """The trainer class's name, e.g. ``"ApeXTrainer"``."""
        return self.target.partition(":")[2]

    @property
    def folder(self) -> str:
        """The package's last name part, e.g. ``"dqn"``."""
        return self.package.rpartition(".")[2]


def load(target: str) -> Any:
    """Imports ``"module:attribute"`` and returns the attribute.

    Raises:
        ImportError: If the module cannot be imported.
        AttributeError: If the module has no such attribute (a wrong declaration).
    """
    module_name, _, attribute = target.partition(":")
    module = importlib.import_module(module_name)
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise AttributeError(f"{target!r}: module {module_name!r} has no attribute {attribute!r}; fix the "
                             "declaration (TRAINERS or PUBLIC) that names it.") from None


def _check_target(package: str, key: str, target: Any, table: str) -> None:
    module_name, colon, attribute = target.partition(":") if isinstance(target, str) else ("", "", "")
    if not (colon and attribute.isidentifier() and (module_name == package or module_name.startswith(package + "."))):
        raise RLStackError(
            f"{package}.{table}[{key!r}] = {target!r}: expected 'module:Name' with the module inside {package} "
            f"(e.g. '{package}.{package.rpartition('.')[2]}:{attribute or 'SomeTrainer'}')."
        )


def _declared_in(module: ModuleType) -> list[Declaration]:
    trainers = vars(module).get("TRAINERS")
    if trainers is None:
        return []
    if not isinstance(trainers, Mapping) or not trainers:
        raise RLStackError(f"{module.__name__}.TRAINERS must be a non-empty dict of run name -> 'module:Class', "
                           f"got {trainers!r}.")
    found = []
    for name, target in trainers.items():
        if not (isinstance(name, str) and name.isidentifier()):
            raise RLStackError(f"{module.__name__}.TRAINERS key {name!r}: a run name is a string such as 'PPO' "
                               "or 'APEX_DDPG' (classic RLlib's names).")
        _check_target(module.__name__, name, target, "TRAINERS")
        found.append(Declaration(name, module.__name__, target))
    return found


def scan(package_name: str = _TRAINERS_PACKAGE) -> dict[str, Declaration]:
    """Imports each subpackage of ``package_name`` and collects the ``TRAINERS`` they declare.

    Subpackages without ``TRAINERS`` are skipped; modules (``trainer.py``) are not imported.

    Args:
        package_name: The package whose folders hold the algorithms.

    Returns:
        The declarations by run name, sorted by name.

    Raises:
        RLStackError: For a malformed declaration, or two packages declaring one name.
    """
    package = importlib.import_module(package_name)
    found: dict[str, Declaration] = {}
    for info in pkgutil.iter_modules(package.__path__, package_name + "."):
        if not info.ispkg:
            continue
        for declaration in _declared_in(importlib.import_module(info.name)):
            earlier = found.get(declaration.name)
            if earlier is not None:
                raise RLStackError(f"Trainer name {declaration.name!r} is declared twice: in {earlier.package} "
                                   f"and in {declaration.package}; one of them must use another name.")
            found[declaration.name] = declaration
    return dict(sorted(found.items()))


_declarations: dict[str, Declaration] | None = None
_scanning = False


def declarations() -> dict[str, Declaration]:
    """Every trainer the packages under ``rlstack/trainers/`` declare, by run name.

    Scanned once per process, on first use. A call made while that scan runs (an
    algorithm package's import failing and asking again) gets an empty dict.
    """
    global _declarations, _scanning
    if _declarations is None:
        if _scanning:
            return {}
        _scanning = True
        try:
            _declarations = scan()
        finally:
            _scanning = False
    return _declarations


class _Algorithms(Mapping[str, str]):
    """Run name -> ``"module:Class"``, read-only, filled from :func:`declarations`."""

    def __getitem__(self, name: str) -> str:
        return declarations()[name].target

    def __iter__(self) -> Iterator[str]:
        return iter(declarations())

    def __len__(self) -> int:
        return len(declarations())

    def __repr__(self) -> str:
        return f"ALGORITHMS({dict(self)!r})"


# Run name -> "module:Class" (e.g. "PPO" -> "rlstack.trainers.ppo.ppo:PPOTrainer").
ALGORITHMS: Mapping[str, str] = _Algorithms()


def trainer_class_names() -> dict[str, str]:
    """Each declared trainer class's name -> ``"module:Class"``, for ``rlstack.<Class>``."""
    return {declaration.class_name: declaration.target for declaration in declarations().values()}


def get_trainer_class(name: str, return_config: bool = False) -> Any:
    """Returns the trainer class registered under ``name`` (e.g. ``"PPO"``).

    Args:
        name: The algorithm's name.
        return_config: Also return its ``DEFAULT_CONFIG`` (classic RLlib 1.x's signature).

    Returns:
        The trainer class, or ``(trainer_class, DEFAULT_CONFIG)`` with ``return_config``
        (a deep copy that the caller may change).

    Raises:
        ConfigError: For an unknown name, listing the available ones.
    """
    if name not in ALGORITHMS:
        raise ConfigError(
            f"Unknown algorithm {name!r}{did_you_mean(name, ALGORITHMS) or '.'} Available: {', '.join(ALGORITHMS)}."
        )
    trainer_class = load(ALGORITHMS[name])
    if return_config:
        return trainer_class, trainer_class.get_default_config()
    return trainer_class


def recurrent_algorithms() -> list[str]:
    """The names of the algorithms whose trainers train recurrent models (LSTM, attention),
    for the errors that refuse one elsewhere."""
    return sorted(name for name in ALGORITHMS if get_trainer_class(name).supports_recurrent_models)


def lazy_exports(
    package: str, trainers: Mapping[str, str], public: Mapping[str, str] | None = None
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """The module ``__getattr__``, ``__dir__`` and ``__all__`` of an algorithm package,
    which hand out the declared names on first use (PEP 562).

    Args:
        package: The package's ``__name__``.
        trainers: Its ``TRAINERS`` (each trainer class becomes a public name).
        public: Its ``PUBLIC``: further name -> ``"module:attribute"``.

    Returns:
        ``(__getattr__, __dir__, __all__)`` to assign at the package's module level.

    Raises:
        RLStackError: For a target outside the package or not of the form ``module:Name``.
    """
    names: dict[str, str] = {}
    for table, entries in (("TRAINERS", trainers), ("PUBLIC", public or {})):
        for key, target in entries.items():
            _check_target(package, key, target, table)
            names[target.partition(":")[2] if table == "TRAINERS" else key] = target

    def __getattr__(name: str) -> Any:
        if name not in names:
            # An AttributeError (not an ImportError) lets `from package import submodule` go on
            # to import the submodule, as Python does for any package.
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = load(names[name])
        setattr(sys.modules[package], name, value)  # later lookups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(names))

    return __getattr__, __dir__, sorted(names)


def install_tune_names() -> None:
    """Makes Tune resolve :data:`ALGORITHMS` names to rlstack's trainers in this process,
    and ``ray.tune`` reachable as an attribute of ``ray`` without importing it first (1.13's
    ``import ray.rllib.agents.ppo`` brought Tune in, so 1.13 scripts call ``ray.tune.run``
    after a plain ``import ray``): now for modules already loaded, else as soon as they
    are (idempotent)."""
    for name, wrap in ((_TUNE_REGISTRY, _wrap_lookup), ("ray", _lazy_tune_attribute)):
        module = sys.modules.get(name)
        if module is not None:
            wrap(module)
        elif not any(isinstance(finder, _AfterImport) and finder.fullname == name for finder in sys.meta_path):
            sys.meta_path.insert(0, _AfterImport(name, wrap))


def _lazy_tune_attribute(module: ModuleType) -> None:
    original = getattr(module, "__getattr__", None)
    if getattr(original, "_rlstack_tune", False):
        return

    def __getattr__(name: str) -> Any:
        if name == "tune":
            return importlib.import_module("ray.tune")  # sets ray.tune: later lookups skip this
        if original is None:
            raise AttributeError(f"module 'ray' has no attribute {name!r}")
        return original(name)

    __getattr__._rlstack_tune = True  # type: ignore[attr-defined]
    module.__getattr__ = __getattr__  # type: ignore[attr-defined]


# RLlib 1.13's trainable names that rlstack has no trainer for, and what each was: Tune's
# lookup of one says so instead of "Unknown trainable".
CLASSIC_ONLY_TRAINABLES = {
    "AlphaStar": "AlphaStar (multi-agent league)", "AlphaZero": "AlphaZero", "BanditLinTS": "a linear bandit",
    "BanditLinUCB": "a linear bandit", "CRR": "CRR (offline learning)", "DDPPO": "DD-PPO", "Dreamer": "Dreamer",
    "DT": "the Decision Transformer", "MADDPG": "MADDPG (multi-agent)", "MAML": "MAML", "MBMPO": "MB-MPO",
    "QMIX": "QMIX (multi-agent)", "R2D2": "R2D2 (recurrent Q-learning)", "RNNSAC": "RNNSAC (recurrent SAC)",
    "SimpleQ": "SimpleQ (DQN with double_q, dueling and prioritized_replay off)", "SlateQ": "SlateQ",
}


def _wrap_lookup(module: ModuleType) -> None:
    original = module._has_trainable
    if getattr(original, "_rlstack_names", False):
        return

    def _has_trainable(trainable_name: str) -> bool:
        if trainable_name in ALGORITHMS:
            # Registered on every lookup: RLlib's _register_all (run by Tune for any name
            # it does not know, in any process of the job) may have overwritten it.
            module.register_trainable(trainable_name, get_trainer_class(trainable_name))
            return True
        if original(trainable_name):
            return True
        if trainable_name in CLASSIC_ONLY_TRAINABLES:
            from rlstack._missing_modules import algorithms_summary  # an application-level module

            raise ConfigError(f"Tune has no trainable {trainable_name!r}: "
                              f"{CLASSIC_ONLY_TRAINABLES[trainable_name]} is RLlib 1.13's and not in rlstack; "
                              f"{algorithms_summary()}.")
        return False

    _has_trainable._rlstack_names = True  # type: ignore[attr-defined]
    module._has_trainable = _has_trainable


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs ``wrap(module)`` right after the module ``fullname`` is first imported."""

    def __init__(self, fullname: str, wrap: Callable[[ModuleType], None]) -> None:
        self.fullname = fullname
        self.wrap = wrap

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != self.fullname:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_wrap(module: ModuleType) -> None:
            exec_module(module)
            self.wrap(module)

        spec.loader.exec_module = exec_and_wrap  # type: ignore[method-assign]
        return spec


install_tune_names()
