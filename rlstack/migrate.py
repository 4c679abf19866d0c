"""``rlstack migrate``: rewrites RLlib 1.x scripts for rlstack, by the migration rule (docs/migrating.md).

The rule, applied to module names in imports and to dotted names in code (``ray.rllib.x.y``
used through ``import ray.rllib.x``):

1. ``ray.rllib.agents`` -> ``rlstack.trainers``;
2. ``ray.rllib.policy`` -> ``rlstack.policies``;
3. ``ray.rllib`` -> ``rlstack``;

and ``gym`` -> ``gymnasium`` (``import gym`` becomes ``import gymnasium as gym``, so the
code that says ``gym.spaces.Box`` is left as it is). Nothing else is changed: strings,
comments, relative imports and the layout of the file stay as they were (the rewriting
works on LibCST's concrete syntax tree, which keeps every character it is not told to
change).

A script that calls Tune and names an algorithm by string (``tune.run("PPO", ...)``, an
experiment's ``"run": "PPO"``, a ``--run`` option's ``default="PPO"``) and imports nothing of
RLlib gets ``import rlstack`` after its ``import ray``: RLlib 1.x registered its algorithms
with Tune by itself, and rlstack does so when it is imported.

What cannot be migrated mechanically is reported by file and line, and left for a person:

* an imported 1.13 name that rlstack does not have (the import's own error message says
  what to use instead);
* a call of ``.step(...)`` unpacked into 4 names, or ``.reset(...)`` assigned to one name:
  gymnasium's ``step`` returns ``(obs, reward, terminated, truncated, info)`` and its
  ``reset`` returns ``(obs, info)``.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from rlstack.utils.migration_rule import RENAMES, renamed_module

# `from ray.rllib import agents` names a module the rules rename: the imported name
# changes, bound under its old name so that the code using it stays the same.
_RENAMED_SUBMODULES = {"agents": "trainers", "policy": "policies"}


@dataclass(frozen=True)
class Finding:
    """Something in a file that ``rlstack migrate`` could not rewrite by the rule."""

    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


@dataclass
class FileResult:
    """One file's migration: its text before and after, and what was left to a person."""

    path: str
    before: str
    after: str
    findings: list[Finding] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def diff(self) -> str:
        """The change as a unified diff (empty when nothing changed)."""
        return "".join(difflib.unified_diff(self.before.splitlines(keepends=True), self.after.splitlines(keepends=True),
                                            fromfile=f"a/{self.path}", tofile=f"b/{self.path}"))


def _dotted(node: cst.BaseExpression) -> str | None:
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


class _Migrator(cst.CSTTransformer):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, path: str, algorithms: Iterable[str] = ()) -> None:
        super().__init__()
        self.path = path
        self.findings: list[Finding] = []
        # (line, module, names) of each rewritten `from rlstack... import ...`, checked later.
        self.imports: list[tuple[int, str, list[str]]] = []
        self.algorithms = frozenset(algorithms)
        # Whether the file imports RLlib / rlstack, and whether it names an algorithm to
        # Tune by string (then it needs `import rlstack`, see the module docstring).
        self.imports_library = False
        self.calls_tune = False
        self.names_algorithm = False

    def _line(self, node: cst.CSTNode) -> int:
        return self.get_metadata(PositionProvider, node).start.line

    # ----- imports ---------------------------------------------------------------------

    def leave_Import(self, original: cst.Import, updated: cst.Import) -> cst.Import:
        names = []
        for alias in updated.names:
            old = _dotted(alias.name)
            new = renamed_module(old) if old else old
            if old is None or new == old:
                names.append(alias)
                continue
            if old.split(".")[0] == "gym" and alias.asname is None:
                # `import gym` / `import gym.spaces` bind `gym`: keep that name bound.
                alias = alias.with_changes(name=cst.Name("gymnasium"),
                                           asname=cst.AsName(name=cst.Name("gym")))
                if old != "gym":
                    self.findings.append(Finding(self.path, self._line(original),
                                                 f"`import {old}` became `import gymnasium as gym` (gymnasium "
                                                 "imports its submodules itself)"))
            else:
                alias = alias.with_changes(name=_as_expression(new))
            self.imports.append((self._line(original), new, []))
            names.append(alias)
        return updated.with_changes(names=names)

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
            # `from ray import rllib` -> `import rlstack as rllib` is a different statement
            # kind; reported instead.
            for alias in names:
                if _dotted(alias.name) == "rllib":
                    self.findings.append(Finding(self.path, self._line(original),
                                                 "`from ray import rllib`: write `import rlstack as rllib`"))
        new = renamed_module(old)
        if new == old and names is updated.names:
            return updated
        if new.startswith("rlstack") and not isinstance(names, cst.ImportStar):
            self.imports.append((self._line(original), new, [_dotted(a.name) or "" for a in names]))
        return updated.with_changes(module=_as_expression(new), names=names)

    # ----- dotted names in code ----------------------------------------------------------

    def visit_Import(self, node: cst.Import) -> bool:
        if any(_names_library(_dotted(alias.name) or "") for alias in node.names):
            self.imports_library = True
        return False  # rewritten in leave_Import; its dotted names are modules, not code

    def _check_tune_logger(self, node: cst.ImportFrom) -> None:
        if _dotted(node.module) == "ray.tune.logger" and not isinstance(node.names, cst.ImportStar):
            gone = [alias.name.value for alias in node.names if isinstance(alias.name, cst.Name)
                    and alias.name.value in ("Logger", "LegacyLoggerCallback")]
            if gone:
                self.findings.append(Finding(
                    self.path, self._line(node),
                    f"Ray 2.x's Tune has no {' or '.join(gone)}: log with a Tune callback (ray.tune.logger."
                    "LoggerCallback), or for a trainer logger_creator / logger_config"))

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        if node.module is not None:
            self._check_tune_logger(node)
        module = _dotted(node.module) if node.module is not None and not node.relative else None
        if module and _names_library(module):
            self.imports_library = True
        elif module == "ray" and not isinstance(node.names, cst.ImportStar) \
                and any(_dotted(alias.name) == "rllib" for alias in node.names):
            self.imports_library = True
        return False

    # ----- algorithms named to Tune by string -----------------------------------------------

    def visit_Call(self, node: cst.Call) -> None:
        # tune.run(...), ray.tune.run(...), tune.Tuner(...), tune.run_experiments(...).
        parts = (_dotted(node.func) or "").split(".")
        if parts[-1] in ("run", "Tuner", "run_experiments") and "tune" in parts[:-1]:
            self.calls_tune = True
            if any(arg.keyword is not None and arg.keyword.value == "local_dir" for arg in node.args):
                self.findings.append(Finding(
                    self.path, self._line(node),
                    "Ray 2.x's Tune has no local_dir: write storage_path= (an absolute path)"))
        elif parts[-2:] == ["tune", "report"] and any(arg.star == "**" for arg in node.args):
            self.findings.append(Finding(
                self.path, self._line(node),
                "Ray 2.x's tune.report takes one dict: write tune.report(metrics), not tune.report(**metrics)"))
        elif parts[-2:] == ["ray", "init"] and any(
                arg.keyword is not None and arg.keyword.value == "local_mode" for arg in node.args):
            self.findings.append(Finding(
                self.path, self._line(node), "Ray 2.x has no local mode: leave local_mode out of ray.init()"))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        # 1.x function trainables: def train_fn(config, reporter).
        names = [param.name.value for param in node.params.params]
        if names == ["config", "reporter"]:
            self.findings.append(Finding(
                self.path, self._line(node),
                f"`{node.name.value}(config, reporter)`: Ray 2.x's function trainables take (config) and report "
                "with tune.report(metrics)"))

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        # "PPO" as tune.run's argument, an experiment's "run": "PPO", or argparse's
        # default="PPO" of a --run option the script hands to Tune.
        if node.evaluated_value in self.algorithms:
            self.names_algorithm = True

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        if not (self.calls_tune and self.names_algorithm) or self.imports_library:
            return updated
        # After the top-level `import ray` / `from ray import tune` (else the last
        # top-level import), so the file's header keeps its order.
        body = list(updated.body)
        anchor = next((index for index, statement in enumerate(body) if _imports_ray(statement)), None)
        if anchor is None:
            imports = [i for i, statement in enumerate(body) if isinstance(statement, cst.SimpleStatementLine)
                       and all(isinstance(small, (cst.Import, cst.ImportFrom)) for small in statement.body)]
            docstring = bool(body) and isinstance(body[0], cst.SimpleStatementLine) \
                and isinstance(body[0].body[0], cst.Expr) and isinstance(body[0].body[0].value, cst.SimpleString)
            anchor = imports[-1] if imports else (0 if docstring else -1)
        line = cst.parse_statement("import rlstack  # noqa: F401 - registers rlstack's algorithms with Tune by name\n")
        body.insert(anchor + 1, line)
        return updated.with_changes(body=body)

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        # Read from the original chain: its inner links were rewritten on their own first
        # (``ray.rllib`` -> ``rlstack``), which would hide the longer rules.
        dotted = _dotted(original)
        if dotted is None or not dotted.startswith("ray.rllib"):
            return updated
        new = renamed_module(dotted)
        if new == dotted:
            return updated
        # Keep the outermost node's own whitespace and parentheses.
        return _as_expression(new).with_changes(lpar=updated.lpar, rpar=updated.rpar)

    # ----- gym API patterns that need a person ---------------------------------------------

    def visit_Assign(self, node: cst.Assign) -> None:
        call = node.value
        if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)):
            return
        method = call.func.attr.value
        if len(node.targets) != 1:
            return
        target = node.targets[0].target
        if method == "step" and isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 4:
            self.findings.append(Finding(
                self.path, self._line(node),
                "`.step()` unpacked into 4 values: gymnasium's step returns 5, "
                "(obs, reward, terminated, truncated, info); done = terminated or truncated"))
        elif method == "reset" and isinstance(target, cst.Name):
            self.findings.append(Finding(
                self.path, self._line(node),
                f"`{target.value} = ....reset()`: gymnasium's reset returns (obs, info); "
                f"write `{target.value}, info = ....reset()`"))


def _names_library(module: str) -> bool:
    # rlstack, or RLlib under its 1.x name (before the rename).
    return module.split(".")[0] == "rlstack" or module == "ray.rllib" or module.startswith("ray.rllib.")


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


def _missing_names(module: str, names: Sequence[str]) -> str | None:
    # What is wrong with `from module import names` in this rlstack, or None.
    try:
        imported = importlib.import_module(module)
    except ImportError as exc:
        missing = getattr(exc, "name", None) or ""
        if missing and not missing.startswith("rlstack"):
            return None  # an optional dependency (TensorFlow, ...), not a missing 1.13 name
        return str(exc)
    absent = []
    for name in names:
        if name and not hasattr(imported, name):
            try:
                importlib.import_module(f"{module}.{name}")
            except ImportError:
                absent.append(name)
    if absent:
        return f"{module} has no {', '.join(absent)}"
    return None


def migrate_source(source: str, path: str = "<string>", check_names: bool = True) -> FileResult:
    """Migrates one file's text; ``check_names`` imports each rewritten rlstack module
    to report the names it lacks.

    Raises:
        libcst.ParserSyntaxError: If ``source`` is not valid Python.
    """
    from rlstack.trainers.common.registry import ALGORITHMS

    module = cst.parse_module(source)
    migrator = _Migrator(path, ALGORITHMS)
    after = MetadataWrapper(module).visit(migrator).code
    findings = list(migrator.findings)
    if check_names:
        for line, name, names in migrator.imports:
            if name.startswith("rlstack"):
                problem = _missing_names(name, names)
                if problem:
                    findings.append(Finding(path, line, f"not in rlstack: {problem}"))
    findings.sort(key=lambda finding: finding.line)
    return FileResult(path, source, after, findings)


def python_files(paths: Iterable[str]) -> list[Path]:
    """The ``.py`` files named, or under the folders named, sorted.

    Raises:
        FileNotFoundError: For a path that does not exist.
    """
    files: list[Path] = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            files.extend(sorted(p for p in path.rglob("*.py") if p.is_file()))
        elif path.is_file():
            files.append(path)
        else:
            raise FileNotFoundError(f"rlstack migrate: {name} does not exist; name .py files or folders holding them.")
    return files


def migrate_paths(paths: Iterable[str], write: bool = True, check_names: bool = True) -> list[FileResult]:
    """Migrates every Python file named or under the folders named, rewriting the changed
    ones in place when ``write``. A file that does not parse is reported, not changed."""
    results = []
    for path in python_files(paths):
        source = path.read_text(encoding="utf-8")
        try:
            result = migrate_source(source, str(path), check_names)
        except cst.ParserSyntaxError as exc:
            result = FileResult(str(path), source, source,
                                [Finding(str(path), exc.raw_line, f"not valid Python, left as it is: {exc.message}")])
        if write and result.changed:
            path.write_text(result.after, encoding="utf-8")
        results.append(result)
    return results
