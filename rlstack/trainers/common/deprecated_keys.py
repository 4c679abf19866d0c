"""Config keys RLlib 1.x itself still took with a deprecation warning, and what they became.

A 1.x script or YAML file may set a key its RLlib had already retired in favour of
another: ``use_pytorch`` and ``eager`` (RLlib 1.0-1.3's framework switches, before
``framework``), ``monitor`` (``record_env`` in 1.13), ``evaluation_num_episodes``
(``evaluation_duration`` with ``evaluation_duration_unit: episodes``),
``min_iter_time_s`` (``min_time_s_per_reporting``) and ``model.lstm_use_prev_action_reward``
(``lstm_use_prev_action`` and ``lstm_use_prev_reward``). As 1.x did, each is replaced by
its successor with a deprecation warning (once per process) naming both; where the
successor is given too, the deprecated key wins, as in 1.x (a script that copies a whole
1.x config, defaults and all, and sets the old key meant the old key), and the warning
says which value was replaced. Keys 1.13 renamed without a warning
are ``config.RENAMED_KEYS``; keys accepted at a value that changes nothing are
``classic_keys.py``'s.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rlstack.utils.deprecation import deprecation_warning_once


def _framework(value: Any, user: dict[str, Any], when_true: str) -> dict[str, Any]:
    # True picked the framework (a `framework` naming it too, as "tf2", agrees); False left
    # `framework` alone, whose 1.x default was "tf" (rlstack's is torch, so a 1.x script
    # that set False and no framework ran TF).
    given = user.get("framework")
    if value:
        return {"framework": given if given in _ALIASES[when_true] else when_true}
    return {"framework": given if given is not None else "tf"}


_ALIASES = {"tf": ("tf", "tf2", "tfe"), "torch": ("torch",)}


# The deprecated keys that choose the framework (a --framework flag overrides them too).
FRAMEWORK_SWITCHES = ("use_pytorch", "eager")

# key -> (its replacement's items, from the value and the user's whole config).
DEPRECATED_KEYS: dict[str, Callable[[Any, dict[str, Any]], dict[str, Any]]] = {
    # RLlib 1.0-1.3: use_pytorch=True ran torch.
    "use_pytorch": lambda value, user: _framework(value, user, "torch"),
    # RLlib 1.0-1.3: eager=True ran eager TF ("tfe"); rlstack's TF policies are eager TF 2,
    # compiled with tf.function (framework "tf", alias "tf2").
    "eager": lambda value, user: _framework(value, user, "tf"),
    # 1.13: "monitor" -> "record_env" (episode videos).
    "monitor": lambda value, user: {"record_env": value},
    # 1.13: a number of episodes -> evaluation_duration in episodes.
    "evaluation_num_episodes": lambda value, user: {"evaluation_duration": value,
                                                    "evaluation_duration_unit": "episodes"},
    # 1.13: "min_iter_time_s" -> "min_time_s_per_reporting".
    "min_iter_time_s": lambda value, user: {"min_time_s_per_reporting": value},
}

# model sub-keys, as DEPRECATED_KEYS (1.13: one switch for both previous inputs).
DEPRECATED_MODEL_KEYS: dict[str, Callable[[Any, dict[str, Any]], dict[str, Any]]] = {
    "lstm_use_prev_action_reward": lambda value, model: {"lstm_use_prev_action": value,
                                                         "lstm_use_prev_reward": value},
}


def _replace(section: dict[str, Any], table: dict[str, Callable[[Any, dict[str, Any]], dict[str, Any]]],
             where: str) -> dict[str, Any]:
    found = [key for key in section if key in table]
    if not found:
        return section
    replaced = {key: value for key, value in section.items() if key not in table}
    for key in found:
        items = table[key](section[key], section)
        overridden = [f"{where}{new_key}={replaced[new_key]!r}" for new_key, new_value in items.items()
                      if new_key in replaced and replaced[new_key] != new_value]
        replaced.update(items)
        new = ", ".join(f"{where}{new_key}={new_value!r}" for new_key, new_value in items.items())
        help_text = (f"{where}{key}={section[key]!r} replaced {', '.join(overridden)} given beside it, as in RLlib 1.x"
                     if overridden else None)
        deprecation_warning_once(f"{where}{key}", new, help=help_text)
    return replaced


def replace_deprecated_keys(user: dict[str, Any] | None) -> dict[str, Any]:
    """``user`` with each deprecated 1.x key (and ``model`` sub-key) replaced by its
    successor, warning once per key; ``user`` itself is left unchanged.

    Examples:
        >>> replace_deprecated_keys({"use_pytorch": True, "lr": 0.001})
        {'lr': 0.001, 'framework': 'torch'}
    """
    config = _replace(dict(user or {}), DEPRECATED_KEYS, "")
    if isinstance(config.get("model"), dict):
        config["model"] = _replace(config["model"], DEPRECATED_MODEL_KEYS, "model.")
    return config
