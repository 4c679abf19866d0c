"""rlstack's packages import one way (ARCHITECTURE.md, "Packages"): a module imports, when it
is imported, only modules of its own layer or of the layers below. A function may import a
higher layer when it runs (the policy client's local inference builds a rollout worker),
and a type annotation may name one under ``if TYPE_CHECKING``; neither is an import when
the module loads, so neither counts here. 1.13's module paths that now lead to a higher
layer (``rlstack.env.policy_server_input``) resolve their names on first use.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

# Lowest first. A package not listed is an application (cli, experiments, serve, ...):
# it may import anything and nothing in the library imports it.
LAYERS = [
    {"errors"},
    {"utils", "sample_batch"},
    {"models", "env"},
    {"policies"},
    {"offline", "execution"},
    {"evaluation"},
    {"trainers"},
]
APPLICATION = len(LAYERS)


def layer(module: str) -> int:
    parts = module.split(".")
    if len(parts) == 1:
        return -1  # the package root: Python imports it before any module of the package
    for rank, packages in enumerate(LAYERS):
        if parts[1] in packages:
            return rank
    return APPLICATION


def _is_type_checking(test: ast.expr) -> bool:
    return ((isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
            or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def module_level_imports(tree: ast.Module, module: str, is_package: bool) -> list[tuple[str, int]]:
    """The modules a module imports when it is imported (``from m import name`` counts as
    ``m.name`` where that is a module), with their line numbers."""
    found: list[tuple[str, int]] = []

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.If):
                if not _is_type_checking(node.test):
                    visit(node.body)
                    visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for handler in node.handlers:
                    visit(handler.body)
                visit(node.orelse)
                visit(node.finalbody)
            elif isinstance(node, (ast.With, ast.For, ast.While)):
                visit(node.body)
            elif isinstance(node, ast.Import):
                found.extend((alias.name, node.lineno) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = module.split(".") if is_package else module.split(".")[:-1]
                    anchor = anchor[:len(anchor) - (node.level - 1)]
                    base = ".".join(anchor + ([node.module] if node.module else []))
                found.append((base, node.lineno))
                found.extend((f"{base}.{alias.name}", node.lineno) for alias in node.names)

    visit(tree.body)
    return found


def import_graph(root: Path) -> dict[str, dict[str, int]]:
    """``{module: {imported module: line}}`` for every module under ``root`` (a package
    folder), counting only imports of modules in that package; importing ``a.b.c`` also
    imports the packages ``a.b`` (their ``__init__``), as Python does."""
    package = root.name
    files = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        files[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    graph: dict[str, dict[str, int]] = {}
    for module, (path, is_package) in files.items():
        edges: dict[str, int] = {}
        for name, line in module_level_imports(ast.parse(path.read_text()), module, is_package):
            if name.split(".")[0] != package:
                continue
            parts = name.split(".")
            for end in range(2, len(parts) + 1):  # the packages on the way, then the module
                target = ".".join(parts[:end])
                if target in files and target != module and not module.startswith(target + "."):
                    edges.setdefault(target, line)
        graph[module] = edges
    return graph


def upward_imports(graph: dict[str, dict[str, int]]) -> list[str]:
    return sorted(f"{module} imports {target} (line {line})"
                  for module, edges in graph.items() for target, line in edges.items()
                  if layer(target) > layer(module) >= 0)


def import_cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm,
    iterative: the graph is deeper than Python's recursion limit allows for)."""
    index: dict[str, int] = {}
    lowlink: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    cycles: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(graph[start]))]
        index[start] = lowlink[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            target = next(edges, None)
            if target is not None:
                if target not in index:
                    index[target] = lowlink[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(graph.get(target, {}))))
                elif target in on_stack:
                    lowlink[node] = min(lowlink[node], index[target])
                continue
            work.pop()
            if work:
                lowlink[work[-1][0]] = min(lowlink[work[-1][0]], lowlink[node])
            if lowlink[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


RLSTACK = Path(__file__).resolve().parents[2] / "rlstack"


def test_no_module_imports_a_higher_layer_when_it_loads():
    assert upward_imports(import_graph(RLSTACK)) == []


def test_no_import_cycle():
    assert import_cycles(import_graph(RLSTACK)) == []


@pytest.fixture
def sample_package(tmp_path):
    package = tmp_path / "rlstack"
    for folder in ("policies", "trainers", "env"):
        (package / folder).mkdir(parents=True)
        (package / folder / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "trainers" / "config.py").write_text("from rlstack.policies.policy import Policy\n")
    return package


def test_the_check_sees_an_upward_import_a_cycle_and_lets_a_lazy_one_pass(sample_package):
    policies = sample_package / "policies"
    (policies / "policy.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from rlstack.trainers.config import Config\n"
        "def build():\n"
        "    from rlstack.trainers import config\n")
    assert upward_imports(import_graph(sample_package)) == []
    (policies / "state.py").write_text("import os\nfrom rlstack.trainers.config import merge\n")
    assert upward_imports(import_graph(sample_package)) == ["rlstack.policies.state imports rlstack.trainers "
                                                            "(line 2)", "rlstack.policies.state imports "
                                                            "rlstack.trainers.config (line 2)"]
    (sample_package / "env" / "a.py").write_text("from . import b\n")
    (sample_package / "env" / "b.py").write_text("from rlstack.env.a import thing\n")
    assert import_cycles(import_graph(sample_package)) == [["rlstack.env.a", "rlstack.env.b"]]
