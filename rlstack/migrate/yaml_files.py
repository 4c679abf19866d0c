"""The rewriting of one Tune YAML experiment file (``rllib train -f FILE``'s format).

The file is read with PyYAML's composer, which gives every scalar its line and column, and
rewritten in its text at those places only, so comments, order and layout stay as they
were. What is rewritten: an env named by 1.x's path to one of its example envs
(``ray.rllib.examples.env.random_env.RandomEnv``) becomes rlstack's path where rlstack has
that env; a retired gym id becomes gymnasium's; ``eager`` / ``use_pytorch`` become the
``framework`` they stood for. What is listed: an algorithm rlstack does
not have, an example env it lacks.
"""

from __future__ import annotations

from collections.abc import Callable

import yaml

from rlstack.migrate.python_code import Change, Finding
from rlstack.utils.imports import import_object
from rlstack.utils.migration_rule import FRAMEWORK_KEYS, renamed_module


def _scalar(mapping: yaml.MappingNode, key: str) -> yaml.ScalarNode | None:
    for key_node, value in mapping.value:
        if isinstance(key_node, yaml.ScalarNode) and key_node.value == key and isinstance(value, yaml.ScalarNode):
            return value
    return None


def _mapping(mapping: yaml.MappingNode, key: str) -> yaml.MappingNode | None:
    for key_node, value in mapping.value:
        if isinstance(key_node, yaml.ScalarNode) and key_node.value == key and isinstance(value, yaml.MappingNode):
            return value
    return None


def _has_class(path: str) -> bool:
    try:
        import_object(path)
    except Exception:  # noqa: BLE001 - any failure means rlstack cannot give that env
        return False
    return True


def _value_span(source: str, node: yaml.ScalarNode) -> tuple[int, int]:
    # The scalar's own characters: PyYAML's start mark sits before an anchor or a tag
    # (`env: &e Pendulum-v0`), which stay as they are.
    start, end = node.start_mark.index, node.end_mark.index
    if source[start:start + 1] not in ("&", "!"):
        return start, end
    raw = source[start:end]
    quote = node.style if node.style in ("'", '"') else ""
    found = raw.rfind(f"{quote}{node.value}{quote}")
    return (start + found, end) if found >= 0 else (start, end)


def _framework_keys(source: str, config: yaml.MappingNode, path: str, edits: list[tuple[int, int, str]],
                    changes: list[Change]) -> None:
    # `eager: true` -> `framework: tf2`, `use_pytorch: true` -> `framework: torch`.
    keys = {key.value for key, _ in config.value if isinstance(key, yaml.ScalarNode)}
    if "framework" in keys:
        return
    for key, value in config.value:
        if isinstance(key, yaml.ScalarNode) and key.value in FRAMEWORK_KEYS and isinstance(value, yaml.ScalarNode) \
                and value.value.lower() in ("true", "false"):
            framework = FRAMEWORK_KEYS[key.value][value.value.lower() == "true"]
            edits.append((_value_span(source, key)[0], _value_span(source, value)[1], f"framework: {framework}"))
            changes.append(Change(path, key.start_mark.line + 1, f"{key.value}: {value.value} -> framework: "
                                                                  f"{framework} (1.x's name before framework)"))
            return


def rewrite_yaml(source: str, path: str,
                 successor: Callable[[str], str | None] | None) -> tuple[str, list[Change], list[Finding]]:
    """Rewrites one YAML experiment file's text.

    Returns:
        ``(text after, changes, findings)``; a file that is not YAML, or not a mapping of
        experiments, is returned unchanged with a finding or nothing to do.
    """
    from rlstack.trainers.common.registry import ALGORITHMS

    changes: list[Change] = []
    findings: list[Finding] = []
    try:
        documents = list(yaml.compose_all(source))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 1
        return source, [], [Finding(path, line, f"not valid YAML, left as it is: {exc}")]
    edits: list[tuple[int, int, str]] = []  # (start, end, new text) in source offsets
    for document in documents:
        if not isinstance(document, yaml.MappingNode):
            continue
        for _, experiment in document.value:
            if not isinstance(experiment, yaml.MappingNode):
                continue
            run = _scalar(experiment, "run")
            if run is not None and run.value not in ALGORITHMS and run.value.isupper():
                findings.append(Finding(path, run.start_mark.line + 1,
                                        f"run: {run.value}: rlstack has no {run.value}; it has {', '.join(ALGORITHMS)}"))
            envs = [_scalar(experiment, "env")]
            config = _mapping(experiment, "config")
            if config is not None:
                envs.append(_scalar(config, "env"))
                _framework_keys(source, config, path, edits, changes)
            for env in envs:
                if env is None or env.style not in (None, "'", '"'):
                    continue
                new = None
                if env.value.startswith("ray.rllib."):
                    candidate = renamed_module(env.value)
                    if _has_class(candidate):
                        new = candidate
                    else:
                        findings.append(Finding(path, env.start_mark.line + 1,
                                                f"env: {env.value}: rlstack has no such example env "
                                                f"({candidate}); register your own with rlstack.register_env"))
                elif successor is not None:
                    new = successor(env.value)
                if new is None or new == env.value:
                    continue
                quote = env.style or ""
                edits.append((*_value_span(source, env), f"{quote}{new}{quote}"))
                changes.append(Change(path, env.start_mark.line + 1, f"env: {env.value} -> {new}"))
    text = source
    # An aliased node (&a ... *a) is visited once per use: one edit per place in the text.
    for start, end, new in sorted(set(edits), reverse=True):
        text = text[:start] + new + text[end:]
    changes, findings = list(dict.fromkeys(changes)), list(dict.fromkeys(findings))  # an alias's node once
    return text, sorted(changes, key=lambda c: c.line), sorted(findings, key=lambda f: f.line)
