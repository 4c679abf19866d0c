"""The documentation site is generated from the code where it can drift: every config key
has its comment, every algorithm has a page that asks for its generated table, and no
install line anywhere installs the unrelated ``rlstack`` on PyPI."""

from __future__ import annotations

import importlib.util
import json
import re
import tomllib
from pathlib import Path

import nbformat
import pytest

from rlstack.trainers.common.registry import ALGORITHMS

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("rlstack_docs", ROOT / "docs" / "_hooks" / "rlstack_docs.py")
rlstack_docs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rlstack_docs)

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
REPOSITORY = PYPROJECT["project"]["urls"]["Repository"]


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_every_config_key_of_every_algorithm_has_its_comment(name):
    missing = [key for key, comment in rlstack_docs.key_comments(name).items() if not comment]
    assert not missing, (f"{name}'s DEFAULT_CONFIG keys without a comment above them in "
                         f"{[str(p.relative_to(ROOT)) for p in rlstack_docs.config_sources(name)]}: {missing}")


def test_every_common_and_model_key_has_its_comment():
    assert not [k for k, c in rlstack_docs.common_comments().items() if not c]
    assert not [k for k, c in rlstack_docs.model_comments().items() if not c]


def test_a_key_without_a_comment_is_found(tmp_path):
    source = tmp_path / "algo.py"
    source.write_text('DEFAULT_CONFIG = merge({\n    # Learning rate.\n    "lr": 1e-3,\n'
                      '    "gamma": 0.99,  # Discount.\n\n    "tau": 0.5,\n    # === Section ===\n    "beta": 1,\n    # Only the key below.\n'
                      '    "a": 1,\n    "b": 2,\n}, {"c": 3})\n\n\ndef validate(config):\n    # Not a config key.\n'
                      '    return {"d": 1}\n')
    # tau, beta and b have no comment of their own (b does not borrow a's); c is an override that
    # takes its comment from the module that defines it; d is not in a config dict.
    assert rlstack_docs.source_comments(source) == {"lr": "Learning rate.", "gamma": "Discount.",
                                                   "a": "Only the key below."}


def test_the_config_table_shows_each_own_key_with_its_default_and_comment():
    table = rlstack_docs.config_table("PPO")
    assert "| `clip_param` | `0.3` | PPO's clip parameter epsilon" in table
    assert "| `lr` | `5e-05` |" in table  # a common key PPO changes
    assert "| `num_workers` |" not in table  # a common key PPO leaves as it is


def test_every_algorithm_has_a_page_in_the_nav_that_asks_for_its_config_table():
    nav = (ROOT / "mkdocs.yml").read_text()
    for name in ALGORITHMS:
        page = f"algorithms/{name.lower().replace('_', '-')}.md"
        assert page in nav, f"mkdocs.yml's nav has no {page}"
        assert f"<!-- rlstack:config-table {name} -->" in (ROOT / "docs" / page).read_text(), page


def test_the_cli_reference_names_every_command():
    text = rlstack_docs.cli_reference()
    for command in ("train", "evaluate", "ls", "plot", "compare", "submit", "serve", "migrate"):
        assert f"## rlstack {command}\n" in text


def test_the_readme_is_a_front_door():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; the site holds the rest"


def test_no_issue_numbers_in_user_facing_text():
    pages = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]
    found = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p in pages
             for m in re.finditer(r"\(issue \d+\)|\bissue #?\d+\b|\(#\d+\)", p.read_text(), re.I)]
    assert not found


# Install lines: `pip install` of this project, anywhere a user reads one.
PIP = re.compile(r"pip install[^\n\"]*?[\"']?(rlstack[\w-]*)(\[[^\]]*\])?( @ ([^\s\"']+))?")


def _texts():
    for pattern in ("README.md", "*.md", "docs/**/*.md", "rlstack/**/*.py", "rlstack/tune_configs/*.yaml",
                    "cluster/*.yaml", "Makefile"):
        for path in ROOT.glob(pattern):
            yield path, path.read_text()
    for path in (ROOT / "examples").glob("*.ipynb"):
        yield path, "\n".join(cell.source for cell in nbformat.read(path, as_version=4).cells)


def test_every_install_line_installs_this_project_from_its_repository():
    wrong = []
    for path, text in _texts():
        if path == ROOT / "rlstack" / "errors.py":
            continue  # pip_install's template, checked below
        for match in PIP.finditer(text):
            name, url = match.group(1), match.group(4)
            if name != "rlstack-ray" or url != f"git+{REPOSITORY}":
                wrong.append(f"{path.relative_to(ROOT)}: {match.group(0)}")
    assert not wrong, "install lines that do not install rlstack-ray from the repository:\n" + "\n".join(wrong)
    assert PIP.search("pip install 'rlstack[atari]'").group(1) == "rlstack"
    assert PIP.search('%pip install -q "rlstack-ray[torch] @ git+https://x/y"').group(4) == "git+https://x/y"


def test_error_messages_install_from_the_repository_pyproject_names():
    from rlstack.errors import pip_install

    assert pip_install("atari") == f"pip install 'rlstack-ray[atari] @ git+{REPOSITORY}'"


def test_the_distribution_name_is_not_the_unrelated_pypi_project():
    assert PYPROJECT["project"]["name"] == "rlstack-ray"
    for extra, requirements in PYPROJECT["project"]["optional-dependencies"].items():
        assert not [r for r in requirements if re.match(r"rlstack\[", r)], extra


def test_sphinx_roles_in_docstrings_render_as_code():
    html = ":class:<code>~rlstack.trainers.dqn.DQNTrainer</code> and :meth:<code>train</code>"
    assert rlstack_docs.plain_roles(html) == "<code>DQNTrainer</code> and <code>train</code>"
