"""Every algorithm's DEFAULT_CONFIG against the record of it in tests/fixtures/default_configs.json.

A user's 1.x config or YAML file means what it meant yesterday only if no default moves
without a word. The fixture holds each algorithm's defaults as data (a class or function by
its import path); a change is allowed only when it is listed in CHANGES below with the
reason, so a moved default is a decision in a diff, not an accident. To record a new
state after a deliberate change: `python tests/unit/test_default_configs.py > tests/fixtures/default_configs.json`,
then empty CHANGES.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

from rlstack.trainers.common.registry import ALGORITHMS

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "default_configs.json"
_ADDED = object()

# (algorithm, dotted key) -> the value now; _ADDED marks a key the fixture lacks.
# Each entry: a default moved back to RLlib 1.13's, or a 1.13 key given its meaning.
CHANGES: dict[tuple[str, str], Any] = {
    # 1.13's APEX_DDPG explored with per-worker OU noise; rlstack had Gaussian noise.
    ("APEX_DDPG", "exploration_config.type"): "PerWorkerOrnsteinUhlenbeckNoise",
    # 1.13's V-trace switches and the separate value-function optimizer (IMPALA's keys,
    # APPO's by inheritance), at 1.13's defaults: behaviour at the defaults is unchanged.
    **{(algorithm, key): value for algorithm in ("IMPALA", "APPO")
       for key, value in (("vtrace_drop_last_ts", True), ("_separate_vf_optimizer", False), ("_lr_vf", 0.0005))},
    # 1.13's common keys given their meaning (in_evaluation: True in the evaluation workers'
    # config; the others change results or iteration length only when set), and 1.13's
    # model keys (no_final_linear implemented, the others accepted at their no-op values),
    # all at 1.13's defaults, so behaviour at the defaults is unchanged.
    **{(algorithm, key): value for algorithm in ALGORITHMS
       for key, value in (("in_evaluation", False), ("always_attach_evaluation_results", False),
                          ("keep_per_episode_custom_metrics", False), ("min_train_timesteps_per_reporting", None),
                          ("model.no_final_linear", False), ("model._disable_preprocessor_api", False),
                          ("model._disable_action_flattening", False), ("model._time_major", False))},
    # 1.13's CQL: an iteration trains on at least 100 rows (its one batch of 256 does).
    ("CQL", "min_train_timesteps_per_reporting"): 100,
}


def as_data(value: Any) -> Any:
    """A config value as JSON data: classes and functions by their import path."""
    if isinstance(value, dict):
        return {str(key): as_data(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [as_data(item) for item in value]
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, type) or callable(value):
        return f"<{getattr(value, '__module__', '?')}:{getattr(value, '__qualname__', repr(value))}>"
    return f"<{type(value).__module__}.{type(value).__qualname__}: {value!r}>"


def current_defaults() -> dict[str, Any]:
    from rlstack.trainers.common.registry import ALGORITHMS, get_trainer_class

    return {name: as_data(dict(get_trainer_class(name).get_default_config())) for name in sorted(ALGORITHMS)}


def _flatten(section: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in section.items():
        if isinstance(value, dict) and value:
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def test_every_default_is_the_recorded_one_but_for_the_listed_changes():
    recorded = json.loads(FIXTURE.read_text())
    now = current_defaults()
    assert sorted(now) == sorted(recorded), "an algorithm was added or removed: record the defaults anew"
    found: dict[tuple[str, str], Any] = {}
    removed = []
    for algorithm in now:
        before, after = _flatten(recorded[algorithm]), _flatten(now[algorithm])
        removed += [f"{algorithm}: {key}" for key in before if key not in after]
        found.update({(algorithm, key): value for key, value in after.items()
                      if key not in before or before[key] != value})
    assert not removed, f"defaults removed: {removed}"
    unlisted = {change: value for change, value in found.items() if change not in CHANGES}
    assert not unlisted, f"defaults changed without an entry in CHANGES: {unlisted}"
    stale = {change: value for change, value in CHANGES.items() if found.get(change, _ADDED) != value}
    assert not stale, f"CHANGES lists values the defaults do not have: {stale}"


if __name__ == "__main__":
    json.dump(current_defaults(), sys.stdout, indent=1, sort_keys=True)
    print()
