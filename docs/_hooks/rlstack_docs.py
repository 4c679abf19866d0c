"""MkDocs hook: the parts of the site that are generated from the code.

A page asks for a generated part with an HTML comment on a line of its own:

- ``<!-- rlstack:config-table PPO -->``: the algorithm's config keys (its own and the
  common keys it changes), each with its default from ``DEFAULT_CONFIG`` and the comment
  written above the key in the source;
- ``<!-- rlstack:common-config-table -->``: the keys every trainer shares (``COMMON_CONFIG``);
- ``<!-- rlstack:model-config-table -->``: the ``model`` sub-keys (``MODEL_DEFAULTS``);
- ``<!-- rlstack:cli-reference -->``: every ``rlstack`` command and flag, from the parsers;
- ``<!-- rlstack:learning-curves PPO -->``: the learning curve of each tuned example of
  the algorithm (docs/img/curves/, drawn by docs/_tools/learning_curves.py);
- ``<!-- rlstack:api-reference -->``: each public name (a module's ``__all__``) of the
  modules users import from, documented from its docstring by mkdocstrings;
- ``<!-- rlstack:include FILE.md -->``: a Markdown file of the repository's root (COMPAT.md,
  BENCHMARKS.md, RELIABILITY.md), its first heading dropped and its links to the
  repository's files turned into plain paths.

Nothing of this is written by hand, so the pages cannot drift from the code. The same
functions back tests/unit/test_docs.py (every key has its comment).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import inspect
import io
import json
import re
import tokenize
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"^<!-- rlstack:([a-z-]+)(?: ([^ ]+))? -->[ \t]*$", re.M)
# Comment lines that head a group of keys ("# === Environment ===") describe no key.
SECTION = re.compile(r"^#\s*===")


# --- Config keys and their comments ------------------------------------------------------

# Module-level names whose dict literals hold config keys (DEFAULT_CONFIG, COMMON_CONFIG,
# APEX_DEFAULT_CONFIG, MODEL_DEFAULTS, ATTENTION_DEFAULTS, ...).
CONFIG_NAME = re.compile(r"(CONFIG|DEFAULTS)$")


def _config_dicts(tree: ast.Module) -> list[ast.Dict]:
    dicts = []
    for statement in tree.body:
        targets = (statement.targets if isinstance(statement, ast.Assign)
                   else [statement.target] if isinstance(statement, ast.AnnAssign) else [])
        if statement_value := getattr(statement, "value", None):
            if any(isinstance(t, ast.Name) and CONFIG_NAME.search(t.id) for t in targets):
                dicts.extend(node for node in ast.walk(statement_value) if isinstance(node, ast.Dict))
    return dicts


def source_comments(path: Path) -> dict[str, str]:
    """The comment of each string key of the config dicts a Python file defines at module
    level (names ending in CONFIG or DEFAULTS).

    A key's comment is the block of ``#`` lines right above it, or the comment at the end
    of its own line; section headers (``# === Environment ===``) describe no key. A key
    without either has no comment here (an override of another module's key then takes
    that module's comment). The first comment found for a key wins.
    """
    text = path.read_text()
    lines = text.splitlines()
    trailing: dict[int, str] = {}
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT:
            row, col = token.start
            if lines[row - 1][:col].strip():
                trailing[row] = token.string.lstrip("#").strip()
    comments: dict[str, str] = {}
    for node in _config_dicts(ast.parse(text)):
        for key in node.keys:
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                continue
            block: list[str] = []
            row = key.lineno - 1
            while row >= 1 and lines[row - 1].strip().startswith("#") and not SECTION.match(lines[row - 1].strip()):
                block.insert(0, lines[row - 1].strip().lstrip("#").strip())
                row -= 1
            comment = " ".join(block) or trailing.get(key.lineno, "")
            if comment:
                comments.setdefault(key.value, comment)
    return comments


def _module_file(module: str) -> Path:
    return Path(importlib.import_module(module).__file__)


def trainer_class(name: str) -> type:
    from rlstack.trainers.registry import get_trainer_class

    return get_trainer_class(name)


def _config_imports(path: Path) -> list[str]:
    """Modules of rlstack's trainers that ``path`` imports a config dict from
    (``from rlstack.trainers.dqn.dqn import DEFAULT_CONFIG as DQN_DEFAULT_CONFIG``)."""
    modules = []
    for node in ast.walk(ast.parse(path.read_text())):
        if (isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rlstack.trainers.")
                and any(alias.name.endswith("CONFIG") for alias in node.names)):
            modules.append(node.module)
    return modules


def config_sources(name: str) -> list[Path]:
    """The files whose comments describe algorithm ``name``'s keys, nearest first: the
    modules of its trainer class and of each trainer class it derives from, the modules
    they take a config dict from, and the common config last."""
    from rlstack.trainers.common.trainer import Trainer

    pending = [cls.__module__ for cls in trainer_class(name).__mro__
               if isinstance(cls, type) and issubclass(cls, Trainer) and cls is not Trainer]
    common = _module_file("rlstack.trainers.common.config")
    paths: list[Path] = []
    while pending:
        path = _module_file(pending.pop(0))
        if path not in paths and path != common:
            paths.append(path)
            pending.extend(_config_imports(path))
    return paths + [common]


def key_comments(name: str) -> dict[str, str]:
    """Each key of algorithm ``name``'s DEFAULT_CONFIG and its comment ("" where none)."""
    found: dict[str, str] = {}
    for path in config_sources(name):
        for key, comment in source_comments(path).items():
            found.setdefault(key, comment)
    config = trainer_class(name)._default_config
    return {key: found.get(key, "") for key in config}


def common_comments() -> dict[str, str]:
    from rlstack.trainers.common.config import COMMON_CONFIG

    found = source_comments(_module_file("rlstack.trainers.common.config"))
    return {key: found.get(key, "") for key in COMMON_CONFIG}


def model_comments() -> dict[str, str]:
    from rlstack.models.catalog import MODEL_DEFAULTS

    found: dict[str, str] = {}
    for path in sorted((ROOT / "rlstack" / "models").rglob("*.py")):
        for key, comment in source_comments(path).items():
            found.setdefault(key, comment)
    found.update(source_comments(_module_file("rlstack.models.catalog")))
    return {key: found.get(key, "") for key in MODEL_DEFAULTS}


def _value(value: Any) -> str:
    if isinstance(value, type):
        text = value.__name__
    elif callable(value) and hasattr(value, "__name__"):
        text = value.__name__
    else:
        try:
            text = json.dumps(value, sort_keys=False)
        except (TypeError, ValueError):
            text = repr(value)
    if len(text) > 90:
        text = text[:87] + "…"
    return "`" + text.replace("|", "\\|").replace("`", "'") + "`"


def _markdown_text(comment: str) -> str:
    """A source comment as table-cell text: pipes and brackets (``result["x"][name]``)
    would otherwise read as cell borders and reference links."""
    return re.sub(r"([|\[\]])", r"\\\1", comment)


def _table(rows: list[tuple[str, Any, str]]) -> str:
    out = ["| key | default | what it does |", "|---|---|---|"]
    for key, value, comment in rows:
        out.append(f"| `{key}` | {_value(value)} | {_markdown_text(comment)} |")
    return "\n".join(out) + "\n"


def config_table(name: str) -> str:
    """The keys algorithm ``name`` adds to the common ones, and the common keys whose
    default it changes."""
    from rlstack.trainers.common.config import COMMON_CONFIG

    config = trainer_class(name)._default_config
    comments = key_comments(name)
    own = [(k, config[k], comments[k]) for k in config if k not in COMMON_CONFIG]
    changed = [(k, config[k], comments[k]) for k in config if k in COMMON_CONFIG and config[k] != COMMON_CONFIG[k]]
    module = importlib.import_module(trainer_class(name).__module__)
    variable = next((k for k, v in vars(module).items() if v is config and k.isupper()), "DEFAULT_CONFIG")
    parts = [f"Keys of `{name}` beyond the [common keys](../reference/common-config.md) "
             f"(from `{module.__name__}.{variable}`):\n\n", _table(own) if own else "(none)\n"]
    if changed:
        parts += [f"\nCommon keys whose default `{name}` changes:\n\n", _table(changed)]
    return "".join(parts)


def common_config_table() -> str:
    from rlstack.trainers.common.config import COMMON_CONFIG

    comments = common_comments()
    return _table([(k, COMMON_CONFIG[k], comments[k]) for k in COMMON_CONFIG])


def model_config_table() -> str:
    from rlstack.models.catalog import MODEL_DEFAULTS

    comments = model_comments()
    return _table([(k, MODEL_DEFAULTS[k], comments[k]) for k in MODEL_DEFAULTS])


# --- The command line ---------------------------------------------------------------------

def _usage(parser: argparse.ArgumentParser) -> str:
    return parser.format_usage().replace("usage: ", "", 1).strip()


def _arguments_table(parser: argparse.ArgumentParser) -> str:
    rows = ["| argument | default | what it does |", "|---|---|---|"]
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        name = ", ".join(action.option_strings) or action.dest
        if action.metavar and action.option_strings:
            name += f" {action.metavar}"
        default = "" if action.default in (None, argparse.SUPPRESS, False) else f"`{action.default}`"
        help_text = (action.help or "").replace("%(default)s", str(action.default)).replace("|", "\\|")
        rows.append(f"| `{name}` | {default} | {help_text} |")
    return "\n".join(rows) + "\n"


def cli_reference() -> str:
    from rlstack.cli import build_parser

    parser = build_parser()
    out = [f"```\n{_usage(parser)}\n```\n\n{parser.description}\n\n", _arguments_table(parser)]
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {choice.dest: choice.help for choice in subparsers._choices_actions}
    for command, sub in subparsers.choices.items():
        out.append(f"\n## rlstack {command}\n\n{helps.get(command, '')}\n\n")
        if sub.description:
            out.append(inspect.cleandoc(sub.description) + "\n\n")
        out.append(f"```\n{_usage(sub)}\n```\n\n")
        out.append(_arguments_table(sub))
    return "".join(out)


# --- The API reference ------------------------------------------------------------------

# The modules a user imports from, in the order the page shows them. Each one's public
# names are its ``__all__``; each name is documented where it is defined.
API_MODULES = ["rlstack", "rlstack.trainers", "rlstack.trainers.trainer", "rlstack.trainers.callbacks", "rlstack.env",
               "rlstack.evaluation", "rlstack.policies", "rlstack.models", "rlstack.sample_batch", "rlstack.offline",
               "rlstack.serve", "rlstack.errors", "rlstack.utils", "rlstack.compare", "rlstack.plotting", "rlstack.jobs"]


def public_names(module_name: str) -> list[tuple[str, str]]:
    """``(name, "defining.module.Name")`` for each name in the module's ``__all__``."""
    module = importlib.import_module(module_name)
    found = []
    for name in module.__all__:
        obj = getattr(module, name)
        home = getattr(obj, "__module__", None) if (inspect.isclass(obj) or inspect.isfunction(obj)) else None
        found.append((name, f"{home}.{obj.__qualname__}" if home else f"{module_name}.{name}"))
    return found


def api_reference() -> str:
    out = []
    documented: set[str] = set()
    for module_name in API_MODULES:
        out.append(f"\n## `{module_name}`\n\n")
        values = []
        for name, target in public_names(module_name):
            if target in documented:
                out.append(f"- `{module_name}.{name}`: the same as `{target}`, above.\n")
            elif target == f"{module_name}.{name}" or "<locals>" in target:
                # A constant, or a function a factory made: named here, described where it is used.
                values.append(name)
            else:
                documented.add(target)
                out.append(f"\n::: {target}\n    options:\n      heading_level: 3\n\n")
        if values:
            out.append("\nAlso: " + ", ".join(f"`{module_name}.{v}`" for v in values) + ".\n")
    return "".join(out)


# --- Files of the repository --------------------------------------------------------------

LINK = re.compile(r"\[([^\]]+)\]\(([^)#]+)(#[^)]*)?\)")


def include(filename: str) -> str:
    """A root Markdown file for the site: its title dropped (the page has its own) and
    its links to repository files turned into plain text with the path."""
    text = (ROOT / filename).read_text()
    text = re.sub(r"\A# .*\n+", "", text)

    def plain(match: re.Match) -> str:
        label, target = match.group(1), match.group(2)
        if re.match(r"[a-z]+://", target):
            return match.group(0)
        return label if label.strip("`") == target else f"{label} (`{target}`)"

    return LINK.sub(plain, text)


# --- Learning curves ----------------------------------------------------------------------

def learning_curves(name: str) -> str:
    """The curve of each tuned example that runs algorithm ``name``, drawn by
    docs/_tools/learning_curves.py into docs/img/curves/<file>.png, or why there is none."""
    import yaml

    spec = importlib.util.spec_from_file_location("learning_curves", ROOT / "docs" / "_tools" / "learning_curves.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    out = []
    for path in sorted((ROOT / "rlstack" / "tune_configs").glob("*.yaml")):
        runs = {str(experiment.get("run")) for experiment in (yaml.safe_load(path.read_text()) or {}).values()}
        if name not in runs:
            continue
        image = ROOT / "docs" / "img" / "curves" / f"{path.stem}.png"
        if image.exists():
            out.append(f"![Learning curve of {path.name}](../img/curves/{path.stem}.png)\n\n"
                       f"*`{path.name}`, one run in PyTorch: the mean episode return against env steps, the "
                       "dashed line the bar its learning test asserts.*\n")
        else:
            reason = tool.SKIP.get(path.stem, "not drawn yet: python docs/_tools/learning_curves.py --only "
                                   f"{path.stem}")
            out.append(f"*No curve for `{path.name}` here ({reason}).*\n")
    return "\n".join(out)


GENERATORS = {
    "config-table": config_table,
    "common-config-table": lambda _: common_config_table(),
    "model-config-table": lambda _: model_config_table(),
    "cli-reference": lambda _: cli_reference(),
    "include": include,
    "api-reference": lambda _: api_reference(),
    "learning-curves": learning_curves,
}


def expand(markdown: str) -> str:
    """The page with each marker replaced by what it asks for."""

    def generated(match: re.Match) -> str:
        kind, argument = match.group(1), match.group(2)
        if kind not in GENERATORS:
            raise ValueError(f"unknown generated part {kind!r}; known: {', '.join(GENERATORS)}")
        return GENERATORS[kind](argument)

    return MARKER.sub(generated, markdown)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return expand(markdown)


# The docstrings name other objects with Sphinx roles (:class:`~a.b.C`, :meth:`m`), which
# Markdown leaves as text before the code: the HTML keeps the name, as Sphinx shows it
# (a leading ~ keeps its last part only).
SPHINX_ROLE = re.compile(r":(?:class|meth|func|attr|data|mod|exc|obj):<code>(~?)([^<]*)</code>")


def plain_roles(html: str) -> str:
    return SPHINX_ROLE.sub(lambda m: f"<code>{m.group(2).rsplit('.', 1)[-1] if m.group(1) else m.group(2)}</code>",
                           html)


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    return plain_roles(html)
