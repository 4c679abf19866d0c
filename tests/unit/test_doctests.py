"""Examples in docstrings run (STYLE.md: examples in docstrings are tests).

Every rlstack module whose source holds a ``>>>`` prompt is collected, so a new
algorithm folder's examples run with no edit here.
"""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

PACKAGE_DIR = Path(__file__).resolve().parents[2] / "rlstack"


def _modules_with_examples() -> list[str]:
    # Read as text, not imported: collecting must not import torch, TF or Ray.
    names = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        if any(line.lstrip().startswith(">>> ") for line in path.read_text().splitlines()):
            parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


MODULES = _modules_with_examples()


def test_examples_are_collected():
    # The trainers' examples are the ones a newcomer copies first.
    assert {"rlstack.sample_batch", "rlstack.trainers.ppo.ppo"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
