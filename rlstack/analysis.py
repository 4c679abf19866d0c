"""Reading results back: ``rlstack.analysis.load(path)`` -> ``pandas.DataFrame``.

``path`` may be a trainer's log directory, a Tune trial directory, or a Tune experiment
directory (then one frame with a ``trial`` column for all its trials).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd

from rlstack.trainers.result_logger import flatten


def _load_trial(directory: Path) -> pd.DataFrame:
    rows = []
    with open(directory / "result.json") as f:
        for line in f:
            line = line.strip()
            if line:
                rows.append(flatten(json.loads(line)))
    frame = pd.DataFrame(rows)
    frame.insert(0, "trial", directory.name)
    return frame


def load(path: str | os.PathLike) -> pd.DataFrame:
    """Loads every result under ``path`` into one DataFrame, one row per iteration.

    Nested keys are flattened with ``/`` (``info/learner/default_policy/...``).

    Raises:
        FileNotFoundError: If no ``result.json`` is found under ``path``.
    """
    root = Path(path)
    if (root / "result.json").exists():
        return _load_trial(root)
    trials = sorted({p.parent for p in root.rglob("result.json")})
    if not trials:
        raise FileNotFoundError(f"No result.json under {str(root)!r}: not a trainer, trial or experiment directory.")
    return pd.concat([_load_trial(t) for t in trials], ignore_index=True)
