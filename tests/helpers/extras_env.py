"""Run a script as if only some of rlstack's extras were installed.

``python -m tests.helpers.extras_env torch,plot SCRIPT`` runs ``SCRIPT`` in this
interpreter with every top-level module of an installed distribution that
``rlstack-ray[torch,plot]`` does not bring in made unimportable (``ModuleNotFoundError``,
as on a machine without it). The allowed set is the requirement closure of the named
extras, read from the installed packages' metadata with their markers evaluated, so it
follows pyproject.toml. A block of the docs that imports TensorFlow, lz4 or PettingZoo
without naming the extra that installs it fails here, as it would for a user who
installed what the block says.

Processes the script starts (Ray's workers) are not restricted: what a user pastes runs
in the driver.
"""

from __future__ import annotations

import importlib.abc
import importlib.metadata as metadata
import re
import runpy
import sys
from pathlib import Path

from packaging.requirements import Requirement

DISTRIBUTION = "rlstack-ray"


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_closure(extras: list[str]) -> set[str]:
    """Canonical names of the distributions ``rlstack-ray[extras]`` installs, itself included."""
    allowed: set[str] = set()
    pending: list[tuple[str, tuple[str, ...]]] = [(DISTRIBUTION, tuple(extras))]
    seen: set[tuple[str, tuple[str, ...]]] = set()
    while pending:
        name, wanted = pending.pop()
        if (name, wanted) in seen:
            continue
        seen.add((name, wanted))
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        allowed.add(_canonical(name))
        for line in dist.requires or []:
            req = Requirement(line)
            environments = [{"extra": extra} for extra in wanted] or [{"extra": ""}]
            if req.marker is None or any(req.marker.evaluate(env) for env in environments):
                pending.append((req.name, tuple(sorted(req.extras))))
    return allowed


def _top_level_modules(dist: metadata.Distribution) -> set[str]:
    text = dist.read_text("top_level.txt")
    if text:
        return {line.strip() for line in text.splitlines() if line.strip()}
    modules = set()
    for file in dist.files or []:
        parts = Path(str(file)).parts
        if not parts or parts[0].endswith((".dist-info", ".egg-info", ".data")) or parts[0] in ("..", "__pycache__"):
            continue
        top = parts[0]
        if top.endswith(".py"):
            modules.add(top[:-3])
        elif len(parts) > 1:
            modules.add(top)
    return modules


def blocked_modules(extras: list[str]) -> set[str]:
    """Top-level modules that only distributions outside the closure provide."""
    allowed = requirement_closure(extras)
    provided_by_allowed: set[str] = set()
    others: set[str] = set()
    for dist in metadata.distributions():
        name = _canonical(dist.metadata["Name"] or "")
        modules = _top_level_modules(dist)
        (provided_by_allowed if name in allowed else others).update(modules)
        if name in allowed:
            # Packages an allowed distribution carries inside itself and puts on sys.path
            # (Ray's ray/thirdparty_files: colorama, psutil, setproctitle).
            for file in dist.files or []:
                parts = Path(str(file)).parts
                if "thirdparty_files" in parts[:-1] and parts.index("thirdparty_files") + 1 < len(parts):
                    provided_by_allowed.add(Path(parts[parts.index("thirdparty_files") + 1]).stem)
    return {m for m in others - provided_by_allowed if m.isidentifier() and m not in sys.stdlib_module_names}


class _Blocker(importlib.abc.MetaPathFinder):
    def __init__(self, blocked: set[str], extras: list[str]):
        self.blocked = blocked
        self.extras = extras

    def find_spec(self, fullname, path=None, target=None):
        if fullname.partition(".")[0] in self.blocked:
            raise ModuleNotFoundError(
                f"No module named {fullname!r} (not installed with rlstack-ray[{','.join(self.extras)}], the "
                "extras this block names)", name=fullname)
        return None


def main() -> None:
    extras = [e.strip() for e in sys.argv[1].split(",") if e.strip()]
    script = sys.argv[2]
    sys.meta_path.insert(0, _Blocker(blocked_modules(extras), extras))
    sys.argv = [script]
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
