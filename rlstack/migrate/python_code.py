"""The rewriting of one RLlib 1.x Python file, on LibCST's concrete syntax tree.

Two passes over the same tree: :class:`_Survey` learns what the file binds and builds
(where each env object comes from, which classes it defines, whether it uses TensorFlow,
whether it sets ``framework``), then :class:`_Migrator` rewrites. Names are matched by
what they are bound to (LibCST's qualified names, from the file's imports), not by how
they are spelled: ``from ray.tune import run`` then ``run(...)`` is ``ray.tune.run`` as
much as ``tune.run(...)`` is. Strings, comments and everything not rewritten keep their
characters.

Each rewrite is recorded as a :class:`Change` with its line; what needs a person's choice
is a :class:`Finding`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider, QualifiedNameProvider, ScopeProvider

from rlstack.utils.imports import import_object
from rlstack.utils.migration_rule import FRAMEWORK_KEYS, renamed_module

# `from ray.rllib import agents` names a module the rules rename: the imported name
# changes, bound under its old name so that the code using it stays the same.
_RENAMED_SUBMODULES = {"agents": "trainers", "policy": "policies"}

# Modules Ray 2.x moved, by their 1.x names.
_RAY_MODULE_MOVES = {"ray.tune.utils.placement_groups": "ray.tune.execution.placement_groups"}

# numpy's removed names (1.24 dropped the builtin aliases, 2.0 the rest): the name to use
# instead, either a builtin ("float") or numpy's own (".prod", kept on the same module).
_NUMPY_REMOVED = {
    "float": "float", "int": "int", "bool": "bool", "object": "object", "str": "str", "complex": "complex",
    "long": "int", "unicode": "str",
    "product": ".prod", "cumproduct": ".cumprod", "sometrue": ".any", "alltrue": ".all", "round_": ".round",
    "float_": ".float64", "complex_": ".complex128", "cfloat": ".complex128", "string_": ".bytes_",
    "unicode_": ".str_", "NaN": ".nan", "NAN": ".nan", "Inf": ".inf", "Infinity": ".inf", "infty": ".inf",
    "PINF": ".inf",
}

# The abstract base classes Python 3.10 removed from `collections` (they live in collections.abc).
_COLLECTIONS_ABCS = frozenset({
    "Awaitable", "Coroutine", "AsyncIterable", "AsyncIterator", "AsyncGenerator", "Hashable", "Iterable",
    "Iterator", "Generator", "Reversible", "Sized", "Container", "Callable", "Collection", "Set", "MutableSet",
    "Mapping", "MutableMapping", "MappingView", "KeysView", "ItemsView", "ValuesView", "Sequence",
    "MutableSequence", "ByteString",
})

# tune.run's 1.x arguments that Ray 2.x's has no more and that ask for what it does anyway:
# left out of the call.
_TUNE_RUN_DROPPED = {
    "queue_trials": "Ray 2.x queues trials that wait for resources by itself",
    "ray_auto_init": "Ray 2.x's Tune starts Ray when it is not running",
    "global_checkpoint_period": "Ray 2.x checkpoints the experiment's state by itself",
    "trial_executor": "Ray 2.x has one trial executor",
    "server_port": "Ray 2.x's Tune has no trial server",
}
# The ones that chose something: what to write instead, for a person.
_TUNE_RUN_GONE = {
    "loggers": "log with callbacks=[...] of Tune's LoggerCallback classes",
    "sync_to_driver": "give sync_config=tune.SyncConfig(...)",
    "sync_to_cloud": "give storage_path='s3://...' (or another URI)",
    "upload_dir": "give storage_path='s3://...' (or another URI)",
}

# ray.init()'s 0.8-1.x arguments that Ray 2.x's has no more: left out where they asked for
# what Ray 2.x does anyway (or tuned what it no longer has), renamed where Ray 2.x kept them
# under another name.
_RAY_INIT_DROPPED = {
    "local_mode": "Ray 2.x has no local mode",
    "_redis_max_memory": "Ray 2.x keeps no Redis of its own", "redis_max_memory": "Ray 2.x keeps no Redis of its own",
    "lru_evict": "Ray 2.x spills objects to disk instead", "_lru_evict": "Ray 2.x spills objects to disk instead",
    "huge_pages": "Ray 2.x has no huge-pages option", "include_java": "Ray 2.x has no Java switch",
    "java_worker_options": "Ray 2.x has no Java switch", "load_code_from_local": "Ray 2.x has no such option",
    "use_pickle": "Ray 2.x always pickles", "object_id_seed": "Ray 2.x has no object id seed",
}
_RAY_INIT_RENAMED = {
    "redis_address": "address", "webui_host": "dashboard_host", "include_webui": "include_dashboard",
    "temp_dir": "_temp_dir", "plasma_directory": "_plasma_directory", "memory": "_memory",
    "driver_object_store_memory": "_driver_object_store_memory", "redis_password": "_redis_password",
    "node_ip_address": "_node_ip_address",
}

# gym's env registration, whose entry points migrate wraps (see _legacy_entry_point).
_GYM_REGISTERS = frozenset({"gym.envs.registration.register", "gym.register", "gym.envs.register"})

# Tune's functions that take a trainable first (and hand it on to tune.run).
_TUNE_WRAPPERS = frozenset({"ray.tune.with_parameters", "ray.tune.with_resources", "ray.tune.register_trainable"})

_TUNE_RUNS = frozenset({"ray.tune.run", "ray.tune.run_experiments", "ray.tune.tune.run", "ray.tune.Tuner",
                        "ray.tune.tuner.Tuner"})

# Where an env object comes from, as far as the file shows: made by gym (gymnasium once
# migrated: its reset returns (obs, info), its step 5 values), an instance of a class the
# file defines (a 1.x env keeps its own API, which rlstack adapts), or not known.
GYMNASIUM, OWN, UNKNOWN = "gymnasium", "own", "unknown"

# The 1.x config keys a dict literal holds when it is a trainer's config.
_CONFIG_KEYS = frozenset({"env", "env_config", "num_workers", "model", "lr", "gamma", "train_batch_size",
                          "rollout_fragment_length", "num_gpus", "callbacks", "multiagent", "exploration_config",
                          "sgd_minibatch_size", "num_sgd_iter", "horizon"})


@dataclass(frozen=True)
class _Place:
    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


@dataclass(frozen=True)
class Finding(_Place):
    """Something in a file that ``rlstack migrate`` could not rewrite, left for a person."""


@dataclass(frozen=True)
class Change(_Place):
    """A rewrite ``rlstack migrate`` made, for the report."""


def _dotted(node: cst.CSTNode | None) -> str | None:
    # "a.b.c" for a Name / Attribute chain, else None.
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr.value}"
    return None


def _as_expression(dotted: str) -> cst.Attribute | cst.Name:
    parts = dotted.split(".")
    node: cst.Attribute | cst.Name = cst.Name(parts[0])
    for part in parts[1:]:
        node = cst.Attribute(value=node, attr=cst.Name(part))
    return node


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


def _names_library(module: str) -> bool:
    # rlstack, or RLlib under its 1.x name (before the rename).
    return module.split(".")[0] == "rlstack" or module == "ray.rllib" or module.startswith("ray.rllib.")


def _is_self_attribute(node: cst.BaseExpression) -> str | None:
    # "self.env" for `self.env`, else None.
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self":
        return f"self.{node.attr.value}"
    return None


def _string_keys(node: cst.Dict) -> set[str]:
    return {element.key.evaluated_value for element in node.elements
            if isinstance(element, cst.DictElement) and isinstance(element.key, cst.SimpleString)}


def _without_arg(args: Iterable[cst.Arg], keyword: str) -> list[cst.Arg]:
    # The call's arguments less `keyword=`, the last one left without a trailing comma.
    kept = [arg for arg in args if not (arg.keyword is not None and arg.keyword.value == keyword)]
    if kept:
        kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return kept


class _ReporterUses(cst.CSTVisitor):
    """Whether a trainable's ``reporter`` is only ever called with keyword or ``**`` arguments."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
        self.only_called = True

    def visit_Call(self, node: cst.Call) -> bool:
        if isinstance(node.func, cst.Name) and node.func.value == self.name:
            if any(arg.keyword is None and arg.star != "**" for arg in node.args):
                self.only_called = False
            for arg in node.args:
                arg.value.visit(self)
            return False
        return True

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == self.name:
            self.only_called = False


class _Survey(cst.CSTVisitor):
    """What the file binds and defines, read before anything is rewritten."""

    METADATA_DEPENDENCIES = (QualifiedNameProvider, ScopeProvider)

    def __init__(self, tf_modules: Iterable[str] = ()) -> None:
        super().__init__()
        self.tf_modules = frozenset(tf_modules)  # the project's modules that build on TensorFlow
        self.classes: dict[str, set[str]] = {}  # class name -> its bases' qualified names
        self.origins: dict[str, set[str]] = {}  # "env" / "self.env" -> where its values come from
        self.bound: set[str] = set()  # every name the file assigns, imports or defines
        self.names: set[str] = set()  # every name the file spells
        self.trainables: set[int] = set()  # id() of `def f(config, reporter)` whose reporter is only called
        self.uses_tf = False
        self.sets_framework = False
        self.random_state = False  # the file makes its own numpy RandomState as np_random
        self.calls_tune = False
        self.trainable_names: set[str] = set()  # functions the file hands to Tune
        self.steppers: set[str] = set()  # receivers of the file's .step(...) calls ("env", "self.env")
        self.module_name_variables: set[str] = set()  # names whose value the file hands to import_module
        self._class_stack: list[str] = []

    def _qualified(self, node: cst.CSTNode) -> set[str]:
        return {q.name for q in self.get_metadata(QualifiedNameProvider, node, set())}

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        bases: set[str] = set()
        for arg in node.bases:
            bases |= self._qualified(arg.value) or {_dotted(arg.value) or ""}
        self.classes[node.name.value] = bases
        self.bound.add(node.name.value)
        self._class_stack.append(node.name.value)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._class_stack.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        params = [param.name.value for param in node.params.params]
        if len(params) == 2 and params[0] == "config" and params[1] in ("reporter", "report"):
            calls = _ReporterUses(params[1])
            node.body.visit(calls)
            if calls.only_called:
                self.trainables.add(id(node))

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)

    def _unknown(self, target: cst.BaseExpression) -> None:
        # A name bound where the file does not show what it holds (a function's parameter,
        # a loop's target): origins are kept by name, not by scope, so the name stays unknown.
        if isinstance(target, cst.Name):
            self.origins.setdefault(target.value, set()).add(UNKNOWN)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._unknown(element.value)

    def visit_Param(self, node: cst.Param) -> None:
        self._unknown(node.name)

    def visit_For(self, node: cst.For) -> None:
        self._unknown(node.target)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self._unknown(node.target)

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self._unknown(node.asname.name)

    def visit_Module(self, node: cst.Module) -> None:
        scope = self.get_metadata(ScopeProvider, node)
        self.bound = {assignment.name for assignment in scope.assignments}

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            name = _dotted(alias.name) or ""
            if name.split(".")[0] in ("tensorflow", "keras"):
                self.uses_tf = True

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        module = _dotted(node.module) or ""
        parts = module.split(".")
        if parts[0] in ("tensorflow", "keras") or _names_library(module) and any(
                part == "tf" or part.startswith("tf_") or part.endswith("_tf_policy") for part in parts):
            self.uses_tf = True
        if module and any(module == name or name.endswith("." + module) for name in self.tf_modules):
            self.uses_tf = True  # one of the project's own modules that builds on TensorFlow
        if not isinstance(node.names, cst.ImportStar):
            for alias in node.names:
                if (_dotted(alias.name) or "") in ("TFModelV2", "try_import_tf", "TFPolicy", "build_tf_policy"):
                    self.uses_tf = True

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if node.evaluated_value in ("framework", "use_pytorch", "eager", "--framework", "--torch"):
            self.sets_framework = True

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None and node.keyword.value == "framework":
            self.sets_framework = True

    def _origin(self, value: cst.BaseExpression) -> str:
        if isinstance(value, cst.Attribute) and value.attr.value == "env" and isinstance(value.value, cst.Call) \
                and isinstance(value.value.func, cst.Attribute) and value.value.func.attr.value == "local_worker":
            return GYMNASIUM  # trainer.workers.local_worker().env: rlstack's worker holds gymnasium envs
        if not isinstance(value, cst.Call):
            return UNKNOWN
        qualified = self._qualified(value.func)
        if any(q in ("gym.make", "gymnasium.make") or q.startswith(("gym.envs.", "gymnasium.envs.", "gym.wrappers.",
                                                                     "gymnasium.wrappers."))
               for q in qualified):
            return GYMNASIUM
        for name in qualified:
            if name.startswith("ray.rllib.") and _is_single_agent_gymnasium_env(renamed_module(name)):
                return GYMNASIUM  # one of rlstack's example envs, written to gymnasium's API
        name = _dotted(value.func)
        if name in self.classes and not any(b.startswith(("gym.", "gymnasium.")) and ("Wrapper" in b)
                                             for b in self.classes[name]):
            return OWN
        return UNKNOWN

    def visit_Assign(self, node: cst.Assign) -> None:
        if isinstance(node.value, cst.Name) and node.value.value == "None":
            return  # `self.env = None` before the env is made says nothing of where it comes from
        origin = self._origin(node.value)
        for target in node.targets:
            key = _dotted(target.target) if isinstance(target.target, cst.Name) else _is_self_attribute(target.target)
            if key is not None:
                if key.startswith("self.") and self._class_stack:
                    key = f"{self._class_stack[-1]}.{key}"
                self.origins.setdefault(key, set()).add(origin)
            if _is_self_attribute(target.target) == "self.np_random" and isinstance(node.value, cst.Call) \
                    and any(q.endswith("RandomState") for q in self._qualified(node.value.func)):
                self.random_state = True

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self._qualified(node.func)
        if qualified & _TUNE_RUNS:
            self.calls_tune = True
        args = node.args[1:] if "ray.tune.register_trainable" in qualified else node.args
        if qualified & (_TUNE_RUNS | _TUNE_WRAPPERS) and args and isinstance(args[0].value, cst.Name):
            self.trainable_names.add(args[0].value.value)  # tune.run(train_fn), with_parameters(train_fn)
        if qualified & {"importlib.import_module", "builtins.__import__"} and node.args \
                and isinstance(node.args[0].value, cst.Name):
            self.module_name_variables.add(node.args[0].value.value)
        if any("try_import_tf" in q or q.startswith(("tensorflow.", "keras.")) for q in self._qualified(node.func)):
            self.uses_tf = True
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "step":
            self.steppers.add(_code(node.func.value))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value in ("TFModelV2", "try_import_tf", "base_model"):
            self.uses_tf = True

    def looks_like_env(self, node: cst.BaseExpression) -> bool:
        """Whether ``node`` (a receiver of ``.reset()``) is plausibly an env: named like one,
        or stepped too somewhere in the file (a timer's reset is not listed)."""
        code = _code(node)
        return "env" in code.rsplit(".", 1)[-1].lower() or code in self.steppers

    def origin_of(self, node: cst.BaseExpression, class_name: str | None) -> str:
        """Where the env object ``node`` (a name or ``self.x``) comes from."""
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "super" \
                and class_name is not None:
            bases = self.classes.get(class_name, set())
            # A subclass of one of gym's own envs (CartPoleEnv ...): its parent is gymnasium's.
            if bases and all(b.startswith(("gym.envs.", "gymnasium.envs.")) for b in bases):
                return GYMNASIUM
            return UNKNOWN
        if isinstance(node, cst.Call):
            return self._origin(node)
        if isinstance(node, cst.Name) and node.value == "self" and class_name in self.classes:
            return OWN  # an env class's call of its own method
        key = _dotted(node) if isinstance(node, cst.Name) else _is_self_attribute(node)
        if key is None:
            return UNKNOWN
        if key.startswith("self.") and class_name is not None:
            key = f"{class_name}.{key}"
        found = self.origins.get(key, set())
        return next(iter(found)) if len(found) == 1 else UNKNOWN


def _renamed_module_string(node: cst.BaseExpression) -> cst.BaseExpression | None:
    # A module name in a string, "ray.rllib.agents.ppo" or the "ray.rllib.agents." of
    # "ray.rllib.agents." + name, by the migration rule; None when there is none to rename.
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add):
        left = _renamed_module_string(node.left)
        return None if left is None else node.with_changes(left=left)
    if not isinstance(node, cst.SimpleString) or not isinstance(node.evaluated_value, str):
        return None
    value = node.evaluated_value
    if not (value == "ray.rllib" or value.startswith("ray.rllib.")):
        return None
    stem = value.rstrip(".")
    new = renamed_module(stem) + value[len(stem):]
    return node.with_changes(value=f"{node.prefix}{node.quote}{new}{node.quote}")


def _is_single_agent_gymnasium_env(path: str) -> bool:
    # Whether rlstack's `module.Class` is a gymnasium env (not a MultiAgentEnv, whose step
    # returns per-agent dicts that `terminated or truncated` would not merge).
    try:
        import gymnasium

        from rlstack.env.multi_agent_env import MultiAgentEnv

        found = import_object(path)
    except Exception:  # noqa: BLE001 - not importable here: not known
        return False
    return isinstance(found, type) and issubclass(found, gymnasium.Env) and not issubclass(found, MultiAgentEnv)


class _Migrator(cst.CSTTransformer):
    METADATA_DEPENDENCIES = (PositionProvider, QualifiedNameProvider)

    def __init__(self, path: str, survey: _Survey, algorithms: Iterable[str], successor) -> None:
        super().__init__()
        self.path = path
        self.survey = survey
        self.successor = successor  # old gym id -> gymnasium's id, or None
        self.findings: list[Finding] = []
        self.changes: list[Change] = []
        # (line, module, names) of each rewritten `from rlstack... import ...`, checked later.
        self.imports: list[tuple[int, str, list[str]]] = []
        self.algorithms = frozenset(algorithms)
        self.imported: set[str] = set()  # top-level modules the file imports (for the compat extra)
        # Whether the file imports RLlib / rlstack, and whether it names an algorithm to
        # Tune by string (then it needs `import rlstack`: 1.x registered its algorithms
        # with Tune by itself, rlstack does so when imported).
        self.imports_library = False
        self.calls_tune = False
        self.names_algorithm = False
        self.needs_imports: set[str] = set()  # "os", "tune", "tempfile": names a rewrite uses
        self._class_stack: list[str] = []
        self._trainables: list[set[str]] = []  # reporter parameter names of the enclosing trainables
        self._settled: set[int] = set()  # id() of reset calls an Assign / statement handles itself
        self._framework_vars: set[str] = set()  # DEFAULT_CONFIG copies given "framework": "tf"
        self._framework_added = 0
        self._skip_framework: set[int] = set()  # id() of dicts merged into such a copy (config.update({...}))
        self._container_depth = 0  # dict / tuple / list literals around the current node
        self._alone = True  # the current small statement is the only one on its line
        self._crowded: set[int] = set()  # id() of step assignments that share their line
        self._functions: list[str] = []  # names of the enclosing functions
        self._makes_config = False  # the file builds a trainer (its config is made here)
        self._done_after: dict[int, str] = {}  # id() of a step Assign -> the name `done` is given after it
        self._config_dicts: set[int] = set()  # id() of dict literals passed as a trainer's / Tune's config
        self._done_names = self._fresh_names()

    # ----- bookkeeping -------------------------------------------------------------------

    def _line(self, node: cst.CSTNode) -> int:
        return self.get_metadata(PositionProvider, node).start.line

    def _qualified(self, node: cst.CSTNode) -> set[str]:
        return {q.name for q in self.get_metadata(QualifiedNameProvider, node, set())}

    def _changed(self, node: cst.CSTNode, message: str) -> None:
        self.changes.append(Change(self.path, self._line(node), message))

    def _person(self, node: cst.CSTNode, message: str) -> None:
        self.findings.append(Finding(self.path, self._line(node), message))

    def _fresh_names(self) -> tuple[str, str]:
        bound = self.survey.names
        terminated, truncated = "terminated", "truncated"
        while terminated in bound or truncated in bound:
            terminated, truncated = terminated + "_", truncated + "_"
        return terminated, truncated

    @property
    def _class(self) -> str | None:
        return self._class_stack[-1] if self._class_stack else None

    # ----- imports ---------------------------------------------------------------------

    def visit_Import(self, node: cst.Import) -> bool:
        for alias in node.names:
            name = _dotted(alias.name) or ""
            self.imported.add(name.split(".")[0])
            if _names_library(name):
                self.imports_library = True
        return False  # rewritten in leave_Import; its dotted names are modules, not code

    def leave_Import(self, original: cst.Import, updated: cst.Import) -> cst.Import:
        names = []
        for alias in updated.names:
            old = _dotted(alias.name)
            new = _RAY_MODULE_MOVES.get(old, renamed_module(old)) if old else old
            if old is None or new == old:
                names.append(alias)
                continue
            if old.split(".")[0] == "gym" and alias.asname is None:
                # `import gym` / `import gym.spaces` bind `gym`: keep that name bound.
                alias = alias.with_changes(name=cst.Name("gymnasium"), asname=cst.AsName(name=cst.Name("gym")))
            else:
                alias = alias.with_changes(name=_as_expression(new))
            self.imports.append((self._line(original), new, []))
            self._changed(original, f"import {old} -> {new}")
            names.append(alias)
        return updated.with_changes(names=names)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        module = _dotted(node.module) if node.module is not None and not node.relative else None
        if module:
            self.imported.add(module.split(".")[0])
        if module == "ray.tune.logger" and not isinstance(node.names, cst.ImportStar):
            gone = [alias.name.value for alias in node.names if isinstance(alias.name, cst.Name)
                    and alias.name.value in ("Logger", "LegacyLoggerCallback", "UnifiedLogger", "JsonLogger",
                                             "CSVLogger", "TBXLogger")]
            if gone:
                self._person(node, f"Ray 2.x's Tune has no {', '.join(gone)}: log with a Tune callback "
                                   "(ray.tune.logger.LoggerCallback, e.g. JsonLoggerCallback), or for a trainer "
                                   "logger_config")
        if module and _names_library(module):
            self.imports_library = True
        elif module == "ray" and not isinstance(node.names, cst.ImportStar) \
                and any(_dotted(alias.name) == "rllib" for alias in node.names):
            self.imports_library = True
        return False

    def leave_ImportFrom(self, original: cst.ImportFrom, updated: cst.ImportFrom) -> cst.ImportFrom:
        if updated.relative or updated.module is None:
            return updated
        old = _dotted(updated.module)
        if old is None:
            return updated
        names = updated.names
        if old == "ray.rllib" and not isinstance(names, cst.ImportStar):
            # `from ray.rllib import agents` -> `from rlstack import trainers as agents`.
            renamed = []
            for alias in names:
                name = _dotted(alias.name)
                if name in _RENAMED_SUBMODULES:
                    alias = alias.with_changes(name=cst.Name(_RENAMED_SUBMODULES[name]),
                                               asname=alias.asname or cst.AsName(name=cst.Name(name)))
                renamed.append(alias)
            names = renamed
        elif old == "ray" and not isinstance(names, cst.ImportStar):
            for alias in names:
                if _dotted(alias.name) == "rllib":
                    self._person(original, "`from ray import rllib`: write `import rlstack as rllib`")
        elif old == "collections" and not isinstance(names, cst.ImportStar) \
                and all(_dotted(alias.name) in _COLLECTIONS_ABCS for alias in names):
            self._changed(original, "collections -> collections.abc (Python 3.10 removed the aliases)")
            return updated.with_changes(module=_as_expression("collections.abc"))
        new = _RAY_MODULE_MOVES.get(old, renamed_module(old))
        if new == old and names is updated.names:
            return updated
        if new.startswith(("rlstack", "gymnasium")) and not isinstance(names, cst.ImportStar):
            self.imports.append((self._line(original), new, [_dotted(a.name) or "" for a in names]))
        self._changed(original, f"from {old} import ... -> from {new} import ...")
        return updated.with_changes(module=_as_expression(new), names=names)

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self._alone = len(node.body) == 1

    def visit_SimpleStatementSuite(self, node: cst.SimpleStatementSuite) -> None:
        self._alone = False  # `while not done: obs, r, done, i = env.step(a)`: no room for a line after

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine):
        # Statements that become two lines: a mixed `from collections import deque, Mapping`,
        # and a gymnasium step unpacked into 4 names (done = terminated or truncated after it).
        if len(updated.body) != 1:
            return updated
        statement = updated.body[0]
        if isinstance(statement, cst.ImportFrom) and not statement.relative \
                and _dotted(statement.module) == "collections" and not isinstance(statement.names, cst.ImportStar):
            abcs = [a for a in statement.names if _dotted(a.name) in _COLLECTIONS_ABCS]
            rest = [a for a in statement.names if _dotted(a.name) not in _COLLECTIONS_ABCS]
            if abcs and rest:
                self._changed(original, f"{', '.join(_dotted(a.name) for a in abcs)} imported from collections.abc "
                                        "(Python 3.10 removed the collections aliases)")

                def listed(aliases):
                    return [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in aliases]

                first = updated.with_changes(body=[statement.with_changes(names=listed(rest), lpar=None, rpar=None)])
                second = updated.with_changes(
                    leading_lines=[],
                    body=[statement.with_changes(module=_as_expression("collections.abc"), names=listed(abcs),
                                                 lpar=None, rpar=None)])
                return cst.FlattenSentinel([first, second])
        if isinstance(statement, cst.Assign) and self._wants_framework() and len(statement.targets) == 1 \
                and isinstance(statement.targets[0].target, cst.Name) and "DEFAULT_CONFIG" in _code(statement.value) \
                and isinstance(statement.value, cst.Call) and statement.targets[0].target.value not in self._framework_vars:
            name = statement.targets[0].target.value
            self._framework_vars.add(name)
            self._framework_added += 1
            self._changed(original, f'{name}["framework"] = "tf" added: RLlib 1.x ran TensorFlow when the config '
                                    "named no framework, and this file builds on TensorFlow")
            return cst.FlattenSentinel([updated, cst.parse_statement(f'{name}["framework"] = "tf"\n')])
        done_target = self._done_after.get(id(original.body[0]))
        if done_target is not None:
            done_line = cst.parse_statement(f"{done_target} = {self._done_names[0]} or {self._done_names[1]}\n")
            return cst.FlattenSentinel([updated, done_line])
        return updated

    # ----- classes and functions ------------------------------------------------------------

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._class_stack.append(node.name.value)

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        self._class_stack.pop()
        return updated

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._functions.append(node.name.value)
        params = [param.name.value for param in node.params.params]
        handed_to_tune = node.name.value in self.survey.trainable_names
        if id(node) in self.survey.trainables and handed_to_tune:
            self._trainables.append({params[1]})
        else:
            self._trainables.append(set())
            if len(params) == 2 and params[0] == "config" and params[1] == "reporter":
                why = ("this one hands reporter on" if handed_to_tune else
                       "if Tune runs it (this file does not hand it to Tune)")
                self._person(node, f"`{node.name.value}(config, reporter)`: Ray 2.x's function trainables take "
                                   f"(config) and report with tune.report(metrics); {why}, change it by hand")
        if len(params) == 2 and params[0] == "config" and params[1] == "checkpoint_dir" \
                and node.name.value in self.survey.trainable_names:
            self._person(node, f"`{node.name.value}(config, checkpoint_dir)`: Ray 2.x's function trainables take "
                               "(config) and checkpoint with tune.report(metrics, checkpoint=Checkpoint."
                               "from_directory(dir)); read the last one with tune.get_checkpoint()")

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        self._functions.pop()
        reporters = self._trainables.pop()
        if not reporters:
            return updated
        # 1.x's `def train(config, reporter)`: Ray 2.x calls a function trainable with the config.
        params = list(updated.params.params)
        params = [params[0].with_changes(comma=cst.MaybeSentinel.DEFAULT)]
        self._changed(original, f"`{original.name.value}(config, {next(iter(reporters))})` -> "
                                f"`{original.name.value}(config)`: Ray 2.x's function trainables take the config, "
                                "and report with tune.report(metrics)")
        return updated.with_changes(params=updated.params.with_changes(params=params))

    def leave_Return(self, original: cst.Return, updated: cst.Return) -> cst.Return:
        # `def step(self, a): return self.env.step(a)` in the project's own 1.x env class over
        # a gymnasium env: the class keeps 1.x's 4 values (its reset gets [0] likewise).
        value = original.value
        if self._class is not None and self._class in self.survey.classes and self._functions[-1:] == ["step"] \
                and isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) \
                and value.func.attr.value == "step" \
                and self.survey.origin_of(value.func.value, self._class) == GYMNASIUM:
            self.needs_imports.add("four_values")
            self._changed(original, "return ....step() -> return four_values(....step()): the class keeps 1.x's "
                                    "4 values over gymnasium's 5")
            return updated.with_changes(value=cst.Call(func=cst.Name("four_values"), args=[cst.Arg(updated.value)]))
        return updated

    # ----- calls -----------------------------------------------------------------------------

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self._qualified(node.func)
        parts = (_dotted(node.func) or "").split(".")
        if not qualified and parts[-1] in ("run", "Tuner", "run_experiments") and "tune" in parts[:-1]:
            qualified = {"ray.tune." + parts[-1]}  # `tune` used without the file importing it
        trainer = any(q.endswith("Trainer") and _names_library(q) for q in qualified)
        if qualified & _TUNE_RUNS:
            self.calls_tune = True
        if trainer:
            self._makes_config = True
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "update" \
                and isinstance(node.func.value, cst.Name) and node.func.value.value in self._framework_vars:
            self._skip_framework.update(id(arg.value) for arg in node.args)
        if qualified & _TUNE_RUNS or trainer:
            for index, arg in enumerate(node.args):
                if arg.keyword is not None and arg.keyword.value == "config" or trainer and index == 0 \
                        and arg.keyword is None:
                    self._config_dicts.add(id(arg.value))
        if qualified & {"ray.tune.run", "ray.tune.tune.run"}:
            for arg in node.args:
                if arg.keyword is not None and arg.keyword.value in _TUNE_RUN_GONE:
                    self._person(arg, f"Ray 2.x's tune.run has no {arg.keyword.value}=: "
                                      f"{_TUNE_RUN_GONE[arg.keyword.value]}")

    def _report_dict(self, call: cst.Call) -> cst.Call | None:
        # `report(**m)` -> `(m)`; `report(a=1, **m)` -> `({"a": 1, **m})`; None if positional.
        args = list(call.args)
        if any(arg.keyword is None and arg.star != "**" for arg in args):
            return None
        if len(args) == 1 and args[0].star == "**":
            return call.with_changes(args=[args[0].with_changes(star="", whitespace_after_star=cst.SimpleWhitespace(""),
                                                                comma=cst.MaybeSentinel.DEFAULT)])
        elements = []
        for arg in args:
            if arg.star == "**":
                elements.append(cst.StarredDictElement(value=arg.value))
            else:
                elements.append(cst.DictElement(key=cst.SimpleString(repr(arg.keyword.value).replace("'", '"')),
                                                value=arg.value))
        return call.with_changes(args=[cst.Arg(value=cst.Dict(elements=elements))])

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        qualified = self._qualified(original.func)
        keywords = {arg.keyword.value for arg in updated.args if arg.keyword is not None}
        for keyword in sorted(keywords & set(_TUNE_RUN_DROPPED)) if qualified & _TUNE_RUNS else ():
            self._changed(original, f"{keyword}= left out of the Tune call: {_TUNE_RUN_DROPPED[keyword]}")
            updated = updated.with_changes(args=_without_arg(updated.args, keyword))
            keywords.discard(keyword)
        if qualified & _TUNE_RUNS and "local_dir" in keywords:
            args = []
            for arg in updated.args:
                if arg.keyword is not None and arg.keyword.value == "local_dir":
                    arg = arg.with_changes(keyword=cst.Name("storage_path"), value=self._absolute(arg.value))
                args.append(arg)
            self._changed(original, "local_dir= -> storage_path= (Ray 2.x's name; it must be an absolute path)")
            return updated.with_changes(args=args)
        if "ray.init" in qualified and keywords & (set(_RAY_INIT_DROPPED) | set(_RAY_INIT_RENAMED)):
            for keyword in sorted(keywords & set(_RAY_INIT_DROPPED)):
                self._changed(original, f"{keyword}= left out of ray.init(): {_RAY_INIT_DROPPED[keyword]}")
                updated = updated.with_changes(args=_without_arg(updated.args, keyword))
            args = []
            for arg in updated.args:
                if arg.keyword is not None and arg.keyword.value in _RAY_INIT_RENAMED:
                    new = _RAY_INIT_RENAMED[arg.keyword.value]
                    self._changed(original, f"ray.init({arg.keyword.value}=) -> ray.init({new}=) (Ray 2.x's name)")
                    arg = arg.with_changes(keyword=cst.Name(new))
                args.append(arg)
            return updated.with_changes(args=args)
        if "ray.tune.report" in qualified or "ray.tune.track.log" in qualified:
            rewritten = self._report_dict(updated)
            if rewritten is not None and rewritten is not updated:
                if "ray.tune.track.log" in qualified:
                    rewritten = rewritten.with_changes(func=self._tune("report"))
                self._changed(original, "tune.report(**metrics) -> tune.report(metrics): Ray 2.x's report takes "
                                        "one dict")
                return rewritten
        if "ray.tune.get_trial_dir" in qualified:
            self._changed(original, "tune.get_trial_dir() -> tune.get_context().get_trial_dir() (Ray 2.x)")
            return cst.parse_expression(f"{_code(self._tune('get_context'))}().get_trial_dir()")
        if qualified & {"importlib.import_module", "builtins.__import__"} and updated.args:
            renamed = _renamed_module_string(updated.args[0].value)
            if renamed is not None:
                self._changed(original, "the module name given to import_module follows the migration rule")
                return updated.with_changes(args=[updated.args[0].with_changes(value=renamed), *updated.args[1:]])
        if qualified & _GYM_REGISTERS:
            rewritten = self._legacy_entry_point(original, updated)
            if rewritten is not None:
                return rewritten
        if "ray._private.utils.get_user_temp_dir" in qualified:
            self.needs_imports.add("tempfile")
            self._changed(original, "ray._private.utils.get_user_temp_dir() -> tempfile.gettempdir() (Ray 2.x "
                                    "dropped the private helper)")
            return cst.parse_expression("tempfile.gettempdir()")
        if isinstance(original.func, cst.Name) and any(original.func.value in r for r in self._trainables):
            rewritten = self._report_dict(updated)
            if rewritten is not None:
                self._changed(original, f"{original.func.value}(...) -> tune.report({{...}}) (Ray 2.x)")
                return rewritten.with_changes(func=self._tune("report"))
        if isinstance(original.func, cst.Attribute) and original.func.attr.value == "randint" \
                and _is_self_attribute(original.func.value) == "self.np_random" and not self.survey.random_state:
            self._changed(original, "self.np_random.randint(...) -> self.np_random.integers(...): gymnasium's "
                                    "np_random is numpy's Generator")
            return updated.with_changes(func=updated.func.with_changes(attr=cst.Name("integers")))
        if isinstance(original.func, cst.Attribute) and original.func.attr.value in ("seed", "render") \
                and self.survey.origin_of(original.func.value, self._class) == GYMNASIUM:
            if original.func.attr.value == "seed" and id(original) in self._settled and len(original.args) == 1 \
                    and original.args[0].keyword is None:
                self._changed(original, "env.seed(s) -> env.reset(seed=s): gymnasium seeds at reset")
                return updated.with_changes(func=updated.func.with_changes(attr=cst.Name("reset")),
                                            args=[updated.args[0].with_changes(keyword=cst.Name("seed"),
                                                                               equal=cst.AssignEqual(
                                                                                   whitespace_before=cst.SimpleWhitespace(""),
                                                                                   whitespace_after=cst.SimpleWhitespace("")))])
            if original.func.attr.value == "seed":
                self._person(original, "gymnasium's envs have no seed(): seed with env.reset(seed=s)")
            elif original.args:
                self._person(original, "gymnasium's render() takes no mode: make the env with gym.make(id, "
                                       "render_mode='rgb_array' or 'human') and call env.render()")
            return updated
        if isinstance(original.func, cst.Attribute) and original.func.attr.value == "reset" \
                and id(original) not in self._settled and all(a.keyword is not None for a in original.args):
            origin = self.survey.origin_of(original.func.value, self._class)
            if origin == GYMNASIUM:
                self._changed(original, "reset() -> reset()[0]: gymnasium's reset returns (obs, info)")
                return cst.Subscript(value=updated, slice=[cst.SubscriptElement(slice=cst.Index(cst.Integer("0")))])
            if origin == UNKNOWN and self.survey.looks_like_env(original.func.value):
                self._person(original, "`....reset()`: if the env is gymnasium's (gym.make), reset returns (obs, "
                                       "info): take `[0]`; if it is your own 1.x env class, leave it as it is")
        return updated

    def _legacy_entry_point(self, original: cst.Call, updated: cst.Call) -> cst.Call | None:
        # gym.register(id=..., entry_point="my_pkg.envs:MyEnv"): the project's own 1.x env,
        # which gymnasium.make would reset with seed= and step for 5 values; wrapped so that
        # gym.make gives it gymnasium's API (and the loops migrate rewrote over gym.make hold).
        args = list(updated.args)
        for index, arg in enumerate(args):
            if arg.keyword is not None and arg.keyword.value == "entry_point" or arg.keyword is None and index == 1:
                value = arg.value
                if isinstance(value, cst.SimpleString) and str(value.evaluated_value).startswith(("gym.", "gymnasium.")):
                    return None  # one of gym's own envs: gymnasium's now
                if isinstance(value, cst.Call) and _dotted(value.func) == "legacy_entry_point":
                    return None  # migrated before
                self.needs_imports.add("legacy_entry_point")
                self._changed(original, "entry_point wrapped in rlstack's legacy_entry_point: gymnasium.make then "
                                        "gives the project's 1.x env gymnasium's reset/step")
                args[index] = arg.with_changes(value=cst.Call(func=cst.Name("legacy_entry_point"),
                                                              args=[cst.Arg(value=value)]))
                return updated.with_changes(args=args)
        return None

    def _tune(self, attribute: str) -> cst.Attribute:
        # `tune.<attribute>`, with `from ray import tune` added where the file lacks it.
        self.needs_imports.add("tune")
        return cst.Attribute(value=cst.Name("tune"), attr=cst.Name(attribute))

    def _absolute(self, value: cst.BaseExpression) -> cst.BaseExpression:
        # Ray 2.x wants an absolute storage_path; 1.x took ~ and relative folders.
        if isinstance(value, cst.Name) and value.value == "None":
            return value
        if isinstance(value, cst.SimpleString) and isinstance(value.evaluated_value, str):
            if value.evaluated_value.startswith("/"):
                return value
            self.needs_imports.add("os")
            wrap = "expanduser" if value.evaluated_value.startswith("~") else "abspath"
            return cst.parse_expression(f"os.path.{wrap}({_code(value)})")
        self.needs_imports.add("os")
        code = _code(value)
        if isinstance(value, (cst.Name, cst.Attribute, cst.Subscript)):  # may hold None (an option's default)
            return cst.parse_expression(f"os.path.abspath(os.path.expanduser({code})) if {code} else None")
        return cst.parse_expression(f"os.path.abspath(os.path.expanduser({code}))")

    # ----- names ----------------------------------------------------------------------------

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        # "PPO" as tune.run's argument, an experiment's "run": "PPO", or argparse's
        # default="PPO" of a --run option the script hands to Tune.
        if node.evaluated_value in self.algorithms:
            self.names_algorithm = True

    def leave_SimpleString(self, original: cst.SimpleString, updated: cst.SimpleString) -> cst.SimpleString:
        value = original.evaluated_value
        if not isinstance(value, str) or "-v" not in value or self.successor is None:
            return updated
        new = self.successor(value)
        if new is None:
            return updated
        self._changed(original, f"{value!r} -> {new!r}: gymnasium's id for the retired gym env")
        prefix = original.prefix
        quote = original.quote
        return updated.with_changes(value=f"{prefix}{quote}{new}{quote}")

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        dotted = _dotted(original)
        qualified = self._qualified(original)
        for name in qualified:
            module, _, attr = name.rpartition(".")
            if module == "numpy" and attr in _NUMPY_REMOVED:
                new = _NUMPY_REMOVED[attr]
                replacement = (cst.Name(new) if not new.startswith(".")
                               else updated.with_changes(attr=cst.Name(new[1:])))
                self._changed(original, f"np.{attr} -> {new if not new.startswith('.') else 'np' + new} "
                                        "(numpy removed the alias)")
                return replacement.with_changes(lpar=updated.lpar, rpar=updated.rpar)
            if module == "collections" and attr in _COLLECTIONS_ABCS and dotted == f"collections.{attr}":
                self._changed(original, f"collections.{attr} -> collections.abc.{attr} (Python 3.10)")
                self.needs_imports.add("collections.abc")
                return cst.Attribute(value=_as_expression("collections.abc"), attr=cst.Name(attr),
                                     lpar=updated.lpar, rpar=updated.rpar)
        # Read from the original chain: its inner links were rewritten on their own first
        # (``ray.rllib`` -> ``rlstack``), which would hide the longer rules.
        if dotted is None:
            return updated
        for old, new in _RAY_MODULE_MOVES.items():
            if dotted == old or dotted.startswith(old + "."):
                self._changed(original, f"{old} -> {new} (Ray 2.x moved it)")
                return _as_expression(new + dotted[len(old):]).with_changes(lpar=updated.lpar, rpar=updated.rpar)
        if not dotted.startswith("ray.rllib"):
            return updated
        new = renamed_module(dotted)
        if new == dotted:
            return updated
        self._changed(original, f"{dotted} -> {new}")
        # Keep the outermost node's own whitespace and parentheses.
        return _as_expression(new).with_changes(lpar=updated.lpar, rpar=updated.rpar)

    # ----- gym API patterns -----------------------------------------------------------------

    @staticmethod
    def _unpack_case() -> str:
        return ("if the env is gymnasium's (gym.make), it returns 5 values: (obs, reward, terminated, truncated, "
                "info), done = terminated or truncated; if it is your own 1.x env class, leave the line as it is")

    def visit_Expr(self, node: cst.Expr) -> None:
        if isinstance(node.value, cst.Call):
            self._settled.add(id(node.value))  # a reset() whose result is dropped needs nothing

    def visit_Assign(self, node: cst.Assign) -> None:
        call = node.value
        if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)):
            return
        method = call.func.attr.value
        if method not in ("step", "reset"):
            return
        self._settled.add(id(call))
        origin = self.survey.origin_of(call.func.value, self._class)
        if len(node.targets) != 1:
            if origin == GYMNASIUM or self.survey.looks_like_env(call.func.value):
                self._person(node, f"`.{method}()` assigned to several targets: gymnasium's reset returns (obs, info), "
                                   "its step 5 values; split the line and unpack them")
            return
        target = node.targets[0].target
        four = isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 4
        if method == "step" and four:
            if origin == UNKNOWN:
                self._person(node, "`.step()` unpacked into 4 values: " + self._unpack_case())
            elif origin == GYMNASIUM and not self._alone:
                self._crowded.add(id(node))
                self._person(node, "`.step()` unpacked into 4 values on a line it shares: gymnasium's step returns 5, "
                                   "(obs, reward, terminated, truncated, info); put it on a line of its own with "
                                   "done = terminated or truncated after it")
        elif method == "step" and not isinstance(target, (cst.Tuple, cst.List)) and origin == GYMNASIUM:
            self._person(node, f"`{_code(target)} = ....step()`: gymnasium's step returns 5 values, (obs, reward, "
                               "terminated, truncated, info), not 4")
        elif method == "reset" and isinstance(target, (cst.Name, cst.Attribute, cst.Subscript)) and origin == UNKNOWN \
                and self.survey.looks_like_env(call.func.value):
            name = _code(target)
            self._person(node, f"`{name} = ....reset()`: if the env is gymnasium's (gym.make), reset returns "
                               f"(obs, info): write `{name}, info = ....reset()`; if it is your own 1.x env "
                               "class, leave the line as it is")

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign:
        if len(original.targets) == 1 and isinstance(original.targets[0].target, cst.Name) \
                and original.targets[0].target.value in self.survey.module_name_variables:
            renamed = _renamed_module_string(updated.value)
            if renamed is not None:  # name = "ray.rllib.agents." + algo; importlib.import_module(name)
                self._changed(original, "the module name given to import_module follows the migration rule")
                return updated.with_changes(value=renamed)
        call = original.value
        if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)) or len(original.targets) != 1:
            return updated
        method = call.func.attr.value
        target = original.targets[0].target
        if method not in ("step", "reset") or self.survey.origin_of(call.func.value, self._class) != GYMNASIUM:
            return updated
        if method == "reset" and isinstance(target, (cst.Name, cst.Attribute, cst.Subscript)):
            name = _code(target)
            self._changed(original, f"`{name} = ....reset()` -> `{name}, _ = ....reset()`: "
                                    "gymnasium's reset returns (obs, info)")
            new_target = cst.Tuple(elements=[cst.Element(target, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                                             cst.Element(cst.Name("_"))], lpar=[], rpar=[])
            return updated.with_changes(targets=[updated.targets[0].with_changes(target=new_target)])
        if method == "step" and isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 4 \
                and id(original) not in self._crowded:
            terminated, truncated = self._done_names
            done = target.elements[2].value
            obs, reward, info = (_code(target.elements[i].value) for i in (0, 1, 3))
            if isinstance(done, cst.Name) and done.value == "_":
                text = f"{obs}, {reward}, _, _, {info}"
                done_target = None
            else:
                text = f"{obs}, {reward}, {terminated}, {truncated}, {info}"
                done_target = _code(done)
            self._changed(original, "step() unpacked into gymnasium's 5 values, done = terminated or truncated")
            new_target = cst.parse_expression(text)
            assign = updated.with_changes(targets=[updated.targets[0].with_changes(target=new_target)])
            if done_target is not None:
                self._done_after[id(original)] = done_target
            return assign
        return updated

    # ----- config dicts (1.x's default framework was TensorFlow) ------------------------------

    def _wants_framework(self) -> bool:
        return self.survey.uses_tf and not self.survey.sets_framework

    def visit_Dict(self, node: cst.Dict) -> None:
        self._container_depth += 1
        for element in node.elements:
            # An experiment's "config": {...} is a trainer's config, however deep it sits.
            if isinstance(element, cst.DictElement) and isinstance(element.key, cst.SimpleString) \
                    and element.key.evaluated_value == "config" and isinstance(element.value, cst.Dict):
                self._config_dicts.add(id(element.value))

    def visit_Tuple(self, node: cst.Tuple) -> None:
        self._container_depth += 1

    def leave_Tuple(self, original: cst.Tuple, updated: cst.Tuple) -> cst.Tuple:
        self._container_depth -= 1
        return updated

    def visit_List(self, node: cst.List) -> None:
        self._container_depth += 1

    def leave_List(self, original: cst.List, updated: cst.List) -> cst.List:
        self._container_depth -= 1
        return updated

    def _framework_element(self, original: cst.BaseDictElement, element: cst.BaseDictElement,
                           keys: set[str]) -> cst.BaseDictElement:
        # "eager": True -> "framework": "tf2", "use_pytorch": True -> "framework": "torch".
        if not (isinstance(element, cst.DictElement) and isinstance(element.key, cst.SimpleString)
                and element.key.evaluated_value in FRAMEWORK_KEYS and isinstance(element.value, cst.Name)
                and element.value.value in ("True", "False") and "framework" not in keys):
            return element
        old = element.key.evaluated_value
        framework = FRAMEWORK_KEYS[old][element.value.value == "True"]
        quote = element.key.quote
        self._changed(original, f'"{old}": {element.value.value} -> "framework": "{framework}" (1.x\'s name before '
                               "framework)")
        return element.with_changes(key=cst.SimpleString(f"{quote}framework{quote}"),
                                    value=cst.SimpleString(f"{quote}{framework}{quote}"))

    def leave_Dict(self, original: cst.Dict, updated: cst.Dict) -> cst.Dict:
        nested = self._container_depth > 1  # inside another literal (a policy's overrides, evaluation_config)
        self._container_depth -= 1
        keys = _string_keys(original)
        if keys & set(FRAMEWORK_KEYS):
            updated = updated.with_changes(elements=[
                self._framework_element(old, new, keys) if isinstance(old, cst.DictElement) else new
                for old, new in zip(original.elements, updated.elements)])
        if self.survey.calls_tune and "local_dir" in _string_keys(original):
            # A dict of tune.run's arguments (tune.run(..., **kwargs)).
            elements = []
            for element in updated.elements:
                if isinstance(element, cst.DictElement) and isinstance(element.key, cst.SimpleString) \
                        and element.key.evaluated_value == "local_dir":
                    quote = element.key.quote
                    element = element.with_changes(key=cst.SimpleString(f"{quote}storage_path{quote}"),
                                                   value=self._absolute(element.value))
                elements.append(element)
            self._changed(original, '"local_dir" -> "storage_path" (Ray 2.x\'s name; it must be an absolute path)')
            updated = updated.with_changes(elements=elements)
        if not self._wants_framework() or not original.elements:
            return updated
        keys = _string_keys(original)
        if "framework" not in keys and id(original) not in self._skip_framework and (
                id(original) in self._config_dicts or not nested and "run" not in keys
                and len(keys & _CONFIG_KEYS) >= 2):
            self._framework_added += 1
            self._changed(original, '"framework": "tf" added: RLlib 1.x ran TensorFlow when the config named no '
                                    "framework, and this file builds on TensorFlow")
            elements = list(updated.elements)
            last = elements[-1]
            comma = last.comma if not isinstance(last.comma, cst.MaybeSentinel) else \
                cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
            elements[-1] = last.with_changes(comma=comma)
            elements.append(cst.DictElement(key=cst.SimpleString('"framework"'), value=cst.SimpleString('"tf"')))
            return updated.with_changes(elements=elements)
        return updated

    # ----- the module ---------------------------------------------------------------------------

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        body = list(updated.body)
        added = []
        if self.calls_tune and self.names_algorithm and not self.imports_library:
            added.append("import rlstack  # noqa: F401 - registers rlstack's algorithms with Tune by name\n")
        bound = self.survey.bound
        if "os" in self.needs_imports and "os" not in bound:
            added.append("import os\n")
        if "collections.abc" in self.needs_imports:
            added.append("import collections.abc\n")
        if "tempfile" in self.needs_imports and "tempfile" not in bound:
            added.append("import tempfile\n")
        if "legacy_entry_point" in self.needs_imports:
            added.append("from rlstack.env.legacy import legacy_entry_point\n")
        if "four_values" in self.needs_imports:
            added.append("from rlstack.env.legacy import four_values\n")
        if "tune" in self.needs_imports and "tune" not in bound:
            added.append("from ray import tune\n")
        if self._wants_framework() and not self._framework_added and (self.calls_tune or self._makes_config):
            self.findings.append(Finding(self.path, 1, "this file builds on TensorFlow and its config never sets "
                                                       "framework: RLlib 1.x then ran TensorFlow, rlstack runs torch; "
                                                       'set config["framework"] = "tf" where the config is made'))
        if not added:
            return updated
        # After the top-level `import ray` / `from ray import tune` (else the last
        # top-level import), so the file's header keeps its order.
        anchor = next((index for index, statement in enumerate(body) if _imports_ray(statement)), None)
        if anchor is None:
            imports = [i for i, statement in enumerate(body) if isinstance(statement, cst.SimpleStatementLine)
                       and all(isinstance(small, (cst.Import, cst.ImportFrom)) for small in statement.body)]
            docstring = bool(body) and isinstance(body[0], cst.SimpleStatementLine) \
                and isinstance(body[0].body[0], cst.Expr) and isinstance(body[0].body[0].value, cst.SimpleString)
            anchor = imports[-1] if imports else (0 if docstring else -1)
        for offset, line in enumerate(added):
            body.insert(anchor + 1 + offset, cst.parse_statement(line))
        return updated.with_changes(body=body)


def _imports_ray(statement: cst.CSTNode) -> bool:
    # A top-level `import ray...` or `from ray... import ...` line.
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    for small in statement.body:
        if isinstance(small, cst.Import) and any((_dotted(a.name) or "").split(".")[0] == "ray" for a in small.names):
            return True
        if isinstance(small, cst.ImportFrom) and not small.relative and small.module is not None \
                and (_dotted(small.module) or "").split(".")[0] == "ray":
            return True
    return False


@dataclass
class Rewritten:
    """One file's text after the rewrite, what was changed and what is left to a person."""

    after: str
    changes: list[Change]
    findings: list[Finding]
    imports: list[tuple[int, str, list[str]]]
    imported: set[str]


def rewrite(source: str, path: str, algorithms: Iterable[str], successor, tf_modules: Iterable[str] = ()) -> Rewritten:
    """Rewrites one Python file's text; ``tf_modules`` names the project's modules that
    build on TensorFlow (a script importing its Keras model from one runs TF in 1.x).

    Raises:
        libcst.ParserSyntaxError: If ``source`` is not valid Python.
    """
    wrapper = MetadataWrapper(cst.parse_module(source))
    survey = _Survey(tf_modules)
    wrapper.visit(survey)
    migrator = _Migrator(path, survey, algorithms, successor)
    after = wrapper.visit(migrator).code
    return Rewritten(after, migrator.changes, migrator.findings, migrator.imports, migrator.imported)
