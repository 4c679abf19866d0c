"""``rlstack migrate``: rewrites an RLlib 1.x project (its Python and Tune YAML files) for rlstack.

What is mechanical is rewritten, each change reported by line (as TensorFlow's
``tf_upgrade_v2`` does); what needs a person's choice is listed by file and line and left as it
was. The rewrites (docs/migrating.md has the whole list):

* the migration rule on module names in imports and on dotted names in code:
  ``ray.rllib.agents`` -> ``rlstack.trainers``, ``ray.rllib.policy`` -> ``rlstack.policies``,
  ``ray.rllib`` -> ``rlstack``, and ``gym`` -> ``gymnasium`` (``import gym`` becomes ``import
  gymnasium as gym``, so the code that says ``gym.spaces.Box`` stays as it is);
* Ray 2.x's Tune and ``ray.init``: ``local_dir=`` -> ``storage_path=`` (absolute),
  ``local_mode=`` left out, ``tune.report(**m)`` -> ``tune.report(m)``, ``def f(config,
  reporter)`` trainables, ``tune.get_trial_dir()``, moved modules; names imported by
  themselves (``from ray.tune import run``) as much as dotted ones;
* today's Python stack: retired gym ids (``"Pendulum-v0"`` -> ``"Pendulum-v1"``), numpy's
  removed aliases, ``collections.Iterable``, ``self.np_random.randint``;
* gymnasium's ``reset`` / ``step`` where the env visibly comes from gym (``gym.make``, one of
  gym's env classes); a 1.x env class of the user's own keeps its API (rlstack adapts it);
* ``"framework": "tf"`` in the config of a file that builds on TensorFlow and never sets a
  framework (1.x ran TensorFlow by default, rlstack runs torch);
* a script that hands an algorithm to Tune by string and imports nothing of RLlib gets
  ``import rlstack`` (1.x registered its algorithms with Tune by itself);
* YAML experiment files: 1.x's example envs named by path, retired gym ids.

Strings, comments and the layout of a file stay as they were (LibCST keeps every
character it is not told to change). Every file is processed: one that does not parse or
is not UTF-8 is listed and left as it is.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import os
import re
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlstack.migrate.python_code import Change, Finding
from rlstack.utils.migration_rule import COMPAT_IMPORTS, renamed_module

__all__ = ["Change", "FileResult", "Finding", "migrate_paths", "migrate_source", "migrate_yaml", "project_files",
           "renamed_module", "tensorflow_modules"]

_SUFFIXES = (".py", ".yaml", ".yml")
# Folders a project holds that are not its code (a virtualenv of any name is found by its
# pyvenv.cfg; see _skipped).
_SKIPPED_DIRS = frozenset({".git", ".hg", ".venv", "venv", "__pycache__", "node_modules", ".tox", ".mypy_cache",
                           "site-packages", "build", "dist", ".eggs"})


def _skipped(folder: Path, root: Path) -> bool:
    # Whether a file under `folder` (inside `root`) belongs to what the project installs or
    # builds rather than to its code.
    for part in folder.relative_to(root).parts:
        if part in _SKIPPED_DIRS or part.endswith(".egg-info"):
            return True
    while folder != root and folder != folder.parent:
        if (folder / "pyvenv.cfg").is_file():
            return True
        folder = folder.parent
    return False


@dataclass
class FileResult:
    """One file's migration: its text before and after, the changes made and what was left to
    a person."""

    path: str
    before: str
    after: str
    findings: list[Finding] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def diff(self) -> str:
        """The change as a unified diff (empty when nothing changed)."""
        return "".join(difflib.unified_diff(self.before.splitlines(keepends=True), self.after.splitlines(keepends=True),
                                            fromfile=f"a/{self.path}", tofile=f"b/{self.path}"))

    def as_dict(self) -> dict[str, Any]:
        """The result as JSON-ready data (``rlstack migrate --format json``)."""
        return {"path": self.path, "changed": self.changed,
                "changes": [{"line": c.line, "message": c.message} for c in self.changes],
                "needs_a_person": [{"line": f.line, "message": f.message} for f in self.findings]}


def _successor():
    # The env registry's table of retired gym ids, where it can be imported.
    try:
        from rlstack.env.gym_ids import gymnasium_successor
    except ImportError:  # pragma: no cover - gymnasium missing
        return None
    return gymnasium_successor


def _missing_names(module: str, names: Sequence[str]) -> str | None:
    # What is wrong with `from module import names` in this rlstack, or None. Any error
    # the import raises is the answer, never an abort: rlstack's modules raise
    # MissingModuleError (a ModuleNotFoundError) from a module __getattr__ for 1.13 names
    # they lack, which hasattr() would let escape.
    try:
        imported = importlib.import_module(module)
    except ImportError as exc:
        missing = getattr(exc, "name", None) or ""
        if missing and not missing.startswith(("rlstack", "gymnasium")):
            return None  # an optional dependency (TensorFlow, ...), not a missing 1.13 name
        return str(exc) + _GYM_HINTS.get(missing, "")
    except Exception as exc:  # noqa: BLE001 - a module that fails to import is reported, not fatal
        return f"importing {module} failed: {type(exc).__name__}: {exc}"
    absent = []
    for name in names:
        if not name or name == "*":
            continue
        try:
            getattr(imported, name)
            continue
        except AttributeError:
            pass
        except ImportError as exc:  # a module __getattr__'s guidance for a 1.13 name
            return str(exc)
        try:
            importlib.import_module(f"{module}.{name}")
        except ImportError:
            absent.append(name)
    if absent:
        hints = "".join(_GYM_HINTS.get(f"{module}.{name}", "") for name in absent)
        return f"{module} has no {', '.join(absent)}{hints}"
    return None


# What to use for the gym names gymnasium dropped, after a missing name's message.
_GYM_HINTS = {
    "gymnasium.wrappers.Monitor": " (gymnasium records episodes with wrappers.RecordVideo and "
                                  "RecordEpisodeStatistics)",
    "gymnasium.envs.classic_control.rendering": " (gymnasium's envs draw themselves: make them with "
                                                "render_mode='rgb_array' and call env.render())",
}


def migrate_source(source: str, path: str = "<string>", check_names: bool = True,
                   tf_modules: Iterable[str] = ()) -> FileResult:
    """Migrates one Python file's text; ``check_names`` imports each rewritten rlstack module
    to report the names it lacks; ``tf_modules`` names the project's own modules that build
    on TensorFlow (see :func:`tensorflow_modules`).

    Raises:
        libcst.ParserSyntaxError: If ``source`` is not valid Python.
    """
    from rlstack.migrate.python_code import rewrite
    from rlstack.trainers.common.registry import ALGORITHMS

    done = rewrite(source, path, ALGORITHMS, _successor(), tf_modules)
    findings = list(done.findings)
    if check_names:
        for line, name, names in done.imports:
            if name.startswith(("rlstack", "gymnasium")):
                problem = _missing_names(name, names)
                if problem:
                    where = "rlstack" if name.startswith("rlstack") else "gymnasium"
                    findings.append(Finding(path, line, f"not in {where}: {problem}"))
    for module in sorted(done.imported & set(COMPAT_IMPORTS)):
        if importlib.util.find_spec(module) is None:
            distribution, extra = COMPAT_IMPORTS[module]
            from rlstack.errors import pip_install

            findings.append(Finding(path, 1, f"imports {module} ({distribution}), which RLlib 1.x installed with "
                                             f"it: {pip_install(extra)}"))
    findings.sort(key=lambda finding: finding.line)
    return FileResult(path, source, done.after, findings, sorted(done.changes, key=lambda change: change.line))


def migrate_yaml(source: str, path: str = "<string>") -> FileResult:
    """Migrates one Tune YAML experiment file's text (see :mod:`rlstack.migrate.yaml_files`)."""
    from rlstack.migrate.yaml_files import rewrite_yaml

    after, changes, findings = rewrite_yaml(source, path, _successor())
    return FileResult(path, source, after, findings, changes)


def project_files(paths: Iterable[str]) -> list[tuple[Path, Path]]:
    """``(file, folder it was found under)`` for each ``.py`` / ``.yaml`` / ``.yml`` file named or
    under the folders named, sorted; a file named itself has its own folder.

    Raises:
        FileNotFoundError: For a path that does not exist.
    """
    files: list[tuple[Path, Path]] = []
    seen: set[Path] = set()
    for name in paths:
        path = Path(name)
        if path.is_dir():
            for found in sorted(path.rglob("*")):
                if found.is_file() and found.suffix in _SUFFIXES and not _skipped(found.parent, path) \
                        and found.resolve() not in seen:
                    seen.add(found.resolve())
                    files.append((found, path))
        elif path.is_file():
            if path.resolve() not in seen:
                seen.add(path.resolve())
                files.append((path, path.parent))
        else:
            raise FileNotFoundError(f"rlstack migrate: {name} does not exist; name .py / .yaml files or folders "
                                    "holding them.")
    return files


# A line that makes a module build on TensorFlow: its import, a TF model base or try_import_tf.
_TF_LINE = re.compile(r"^\s*(import (tensorflow|keras)\b|from (tensorflow|keras)\b|from ray\.rllib\.models\.tf\b"
                      r"|.*\b(TFModelV2|try_import_tf)\b)", re.M)


def tensorflow_modules(found: Iterable[tuple[Path, Path]]) -> set[str]:
    """The dotted module names (relative to the folder each was found under) of the
    project's files that build on TensorFlow: 1.x ran a script on TF when the custom model
    it imports from one of them was a Keras model and the config named no framework."""
    names = set()
    for path, root in found:
        if path.suffix != ".py":
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if _TF_LINE.search(text):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts and parts[-1] == "__init__":
                parts.pop()
            if parts:
                names.add(".".join(parts))
    return names


def _migrate_file(path: Path, check_names: bool, tf_modules: Iterable[str] = ()) -> FileResult:
    raw = path.read_bytes()
    try:
        source = raw.decode("utf-8-sig")  # a BOM is kept aside and written back (see _write)
    except UnicodeDecodeError as exc:
        text = raw.decode("utf-8", errors="replace")
        line = raw[:exc.start].count(b"\n") + 1
        return FileResult(str(path), text, text, [Finding(str(path), line, "not UTF-8, left as it is: save it as "
                                                                           "UTF-8 and run rlstack migrate again")])
    if path.suffix in (".yaml", ".yml"):
        return migrate_yaml(source, str(path))
    import libcst

    try:
        return migrate_source(source, str(path), check_names, tf_modules)
    except libcst.ParserSyntaxError as exc:
        return FileResult(str(path), source, source,
                          [Finding(str(path), exc.raw_line, f"not valid Python, left as it is: {exc.message}")])


def migrate_paths(paths: Iterable[str], write: bool = True, check_names: bool = True,
                  out_dir: str | None = None) -> list[FileResult]:
    """Migrates every Python and YAML file named or under the folders named.

    Args:
        paths: Files or folders.
        write: Write the changed files (in place, or under ``out_dir``).
        check_names: Import each rewritten rlstack module to report the 1.13 names it lacks.
        out_dir: Write the migrated copy of each folder here (every other file of the
            folder copied beside it), leaving the originals as they are.

    Returns:
        One :class:`FileResult` per file, in order; a file that cannot be read as Python
        or YAML is in it with a finding and no change.

    Raises:
        FileNotFoundError: For a path that does not exist.
    """
    found = project_files(paths)
    base = _common_base(paths)
    if out_dir is not None and write:
        _copy_tree(paths, Path(out_dir), base)
    tf_modules = tensorflow_modules(found)
    results = []
    for path, root in found:
        result = _migrate_file(path, check_names, tf_modules)
        if write and result.changed:
            target = path if out_dir is None else Path(out_dir) / path.resolve().relative_to(base)
            target.parent.mkdir(parents=True, exist_ok=True)
            bom = "\ufeff" if path.read_bytes().startswith(b"\xef\xbb\xbf") else ""
            # newline="": the file's own line endings (CRLF stays CRLF), as read.
            with open(target, "w", encoding="utf-8", newline="") as out:
                out.write(bom + result.after)
        results.append(result)
    return results


def _common_base(paths: Iterable[str]) -> Path:
    # What --out mirrors: a folder named alone is copied as its contents; several paths keep
    # their layout below the folder they share.
    named = [Path(p).resolve() for p in paths]
    if len(named) == 1:
        return named[0] if named[0].is_dir() else named[0].parent
    return Path(os.path.commonpath([p if p.is_dir() else p.parent for p in named]))


def _copy_tree(paths: Iterable[str], out: Path, base: Path) -> None:
    # Every file of the folders named (not only the ones migrate rewrites), so the copy runs.
    out.mkdir(parents=True, exist_ok=True)
    for path in (Path(p).resolve() for p in paths):
        target = out / path.relative_to(base)
        if path.is_dir():
            shutil.copytree(path, target, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns(*_SKIPPED_DIRS, "*.egg-info"))
        elif path.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
