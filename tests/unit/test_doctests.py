"""Examples in docstrings run (STYLE.md: examples in docstrings are tests)."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["rlstack.sample_batch", "rlstack.trainers.ppo.ppo", "rlstack.trainers.dqn.dqn", "rlstack.trainers.a3c.a2c",
           "rlstack.execution.segment_tree", "rlstack.jobs", "rlstack.utils.annotations"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
