"""What a user installs (a wheel built from the repository, as `pip install "rlstack-ray @
git+..."` builds one) holds the whole package and its tuned examples, so that `rlstack ls`
and `rlstack compare --examples` work outside a checkout; and the `compat` extra installs
what RLlib 1.x's `ray[rllib]` installed that users' scripts import (`import tree`)."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_wheel_holds_every_module_and_every_tuned_example(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
                           "--wheel-dir", str(tmp_path), str(ROOT)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    wheel, = tmp_path.glob("rlstack_ray-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    modules = {str(p.relative_to(ROOT)) for p in (ROOT / "rlstack").rglob("*.py")}
    assert modules - names == set()
    examples = {f"rlstack/tune_configs/{p.name}" for p in (ROOT / "rlstack" / "tune_configs").glob("*.yaml")}
    assert len(examples) >= 20 and examples <= names
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(wheel).read(metadata).decode()
    assert "Name: rlstack-ray\n" in text and "Project-URL: Repository, https://github.com/rlstack-dev/rlstack" in text


def _extras() -> dict[str, list[str]]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]


def _name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower()


def test_the_compat_extra_installs_what_1x_scripts_import_and_all_includes_it():
    from rlstack.utils.migration_rule import COMPAT_IMPORTS

    extras = _extras()
    compat = {_name(requirement) for requirement in extras["compat"]}
    assert "dm-tree" in compat
    # migrate names the extra of each module it finds imported: the two tables agree.
    assert {distribution for distribution, _ in COMPAT_IMPORTS.values()} == compat
    assert {extra for _, extra in COMPAT_IMPORTS.values()} == {"compat"}
    assert "compat" in extras["all"][0].split("[", 1)[1].rstrip("]").split(",")
    # `make test` installs .[all,test]: the modules import (1.13's examples call
    # tree.map_structure on nested actions).
    for module in COMPAT_IMPORTS:
        importlib.import_module(module)
    import tree

    assert tree.map_structure(lambda x: 2 * x, {"a": (1, [2])}) == {"a": (2, [4])}
