"""Writes docs/reference/rllib-1x-keys.md: every RLlib 1.13 config key and what rlstack does
with it, one table for the common keys, the ``model`` and ``multiagent`` sub-keys, then one
per algorithm.

The statuses come from ``rlstack.trainers.common.keys_1x`` and the descriptions of the keys
rlstack has from the comments above them in the code (``docs/_hooks/rlstack_docs.py``), so the
page is regenerated, never edited, whenever a key changes:

    python docs/_tools/rllib_1x_keys.py           # rewrite the page
    python docs/_tools/rllib_1x_keys.py --check   # exit 1 if the page is out of date

tests/unit/test_keys_1x.py fails when the committed page differs from what this writes.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "reference" / "rllib-1x-keys.md"
COMMAND = "python docs/_tools/rllib_1x_keys.py"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from rlstack.trainers.common import keys_1x  # noqa: E402
from rlstack.trainers.common.keys_1x import IMPLEMENTED, NO_EFFECT, RENAMED, STATUSES, KeyStatus  # noqa: E402

_spec = importlib.util.spec_from_file_location("rlstack_docs", ROOT / "docs" / "_hooks" / "rlstack_docs.py")
rlstack_docs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rlstack_docs)

INTRO = f"""\
# RLlib 1.13 config keys

Every key of RLlib 1.13's `COMMON_CONFIG`, of its `model` and `multiagent` sub-dicts and of
the `DEFAULT_CONFIG` of each algorithm rlstack has, with 1.13's default as 1.13's source
wrote it, and what rlstack does with the key:

- **implemented**: the key is in rlstack's config of that algorithm; the last column is its
  description from rlstack's code, and *default differs* says that rlstack's default is not
  1.13's;
- **renamed**: rlstack reads the key as the key(s) named;
- **accepted, no effect**: rlstack accepts the key at the values named (or at any value),
  which mean what rlstack does anyway, and refuses any other value with the reason given;
- **refused**: a config that sets the key is refused as an unknown key; the last column says
  why, or that the key is not in rlstack yet.

A default marked *(merged)* is a dict 1.13 merged key by key into the one it inherits;
`DEPRECATED_VALUE` marks a key 1.13 still took with a deprecation warning; *set from* names
the older key whose value 1.13 copied over the key's own, which rlstack's default is then
compared with. The page is
generated from the code (`{COMMAND}`); the [common config keys](common-config.md) page
describes rlstack's own keys.
"""


def _code(text: str) -> str:
    if len(text) > 90:
        text = text[:87] + "…"
    return "`" + text.replace("|", "\\|").replace("`", "'") + "`"


def _python(value: Any) -> str:
    # As Python writes it, like 1.13's column (the config tables' JSON would write None as null).
    return _code(value.__name__ if isinstance(value, type) or callable(value) else repr(value))


def _values(values: tuple[Any, ...]) -> str:
    return " or ".join(_python(value) for value in values)


def _status_cell(status: KeyStatus) -> str:
    return "implemented, default differs" if status.status == IMPLEMENTED and status.differs else status.status


def _what(status: KeyStatus, comments: dict[str, str]) -> str:
    if status.status == IMPLEMENTED:
        text = rlstack_docs._markdown_text(comments.get(status.key, ""))
        if status.differs:
            text += f" rlstack's default: {_python(status.rlstack_default)}."
        return text.strip()
    if status.status == RENAMED:
        text = "Read as " + ", ".join(_code(key) for key in status.to)
        return text + (f" ({status.reason})." if status.reason else ".")
    if status.status == NO_EFFECT:
        accepted = "at any value" if status.accepted is None else f"as {_values(status.accepted)} only"
        return f"Accepted {accepted}: {rlstack_docs._markdown_text(status.reason)}."
    if status.reason:
        return rlstack_docs._markdown_text(status.reason)
    return "Not in rlstack yet: a config that sets it is refused as an unknown key."


def _table(rows: list[KeyStatus], comments: dict[str, str], name: str = "COMMON") -> str:
    keys = keys_1x.config_1x(name)
    out = ["| key | 1.13 default | status | what rlstack does |", "|---|---|---|---|"]
    for status in rows:
        default = _code(status.default_1x) + (" *(merged)*" if status.merged else "")
        if status.set_from:
            default += f", set from `{status.set_from}`: {_code(keys[status.set_from][0])}"
        out.append(f"| `{status.key}` | {default} | {_status_cell(status)} | {_what(status, comments)} |")
    return "\n".join(out) + "\n"


def _facts(status: KeyStatus) -> tuple[Any, ...]:
    return status.status, status.to, status.accepted, status.reason, status.differs


def _counts(rows: list[KeyStatus]) -> str:
    counts = Counter(status.status for status in rows)
    return " | ".join(str(counts[name]) for name in STATUSES)


def page() -> str:
    """The page's Markdown."""
    config_file = rlstack_docs._module_file("rlstack.trainers.common.config")
    common_rows = keys_1x.statuses("COMMON")
    common = {status.key: status for status in common_rows}
    common_comments = rlstack_docs.common_comments()
    sections = {section: keys_1x.sub_key_statuses(section) for section in ("model", "multiagent")}
    per_algorithm = {name: keys_1x.statuses(name) for name in keys_1x.algorithms()}

    parts = [INTRO, "\n## Summary\n\nThe count of each status among all the 1.13 keys of each config (the common "
             "keys included):\n\n| config | " + " | ".join(STATUSES) + " |\n|---|" + "---|" * len(STATUSES) + "\n"]
    parts.append(f"| common keys | {_counts(common_rows)} |\n")
    for section, rows in sections.items():
        parts.append(f"| `{section}` sub-keys | {_counts(rows)} |\n")
    for name, rows in per_algorithm.items():
        parts.append(f"| [{name}](#{name.lower()}) | {_counts(rows)} |\n")

    parts += ["\n## Common keys\n\n1.13's `COMMON_CONFIG` (`ray/rllib/agents/trainer.py`), against rlstack's "
              "`COMMON_CONFIG`.\n\n", _table(common_rows, common_comments)]
    parts += ["\n## The `model` keys\n\n1.13's `MODEL_DEFAULTS` (`ray/rllib/models/catalog.py`), against "
              "rlstack's `MODEL_DEFAULTS`.\n\n", _table(sections["model"], rlstack_docs.model_comments())]
    parts += ["\n## The `multiagent` keys\n\n", _table(sections["multiagent"],
                                                       rlstack_docs.source_comments(config_file))]
    for name, rows in per_algorithm.items():
        # The algorithm's own keys, the common keys its 1.13 config sets again, and the
        # common keys rlstack treats otherwise for it than for the common table.
        shown = [status for status in rows if status.key not in common
                 or keys_1x.config_1x(name)[status.key] != keys_1x.config_1x("COMMON")[status.key]
                 or _facts(status) != _facts(common[status.key])]
        comments = rlstack_docs.key_comments(name)
        parts.append(f"\n## {name}\n\n1.13's keys of {name} beyond the common keys, the common keys whose "
                     f"default it changes, and the common keys rlstack's {name} treats otherwise.\n\n")
        parts.append(_table(shown, comments, name) if shown else "(none)\n")
    return "".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if the page is out of date")
    args = parser.parse_args()
    text = page()
    if args.check:
        if not PAGE.exists() or PAGE.read_text() != text:
            sys.exit(f"{PAGE.relative_to(ROOT)} is out of date: run {COMMAND}")
        return
    PAGE.write_text(text)
    print(f"wrote {PAGE.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
