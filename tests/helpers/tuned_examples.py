"""The tuned examples in ``tune_configs/`` as the tests see them: which experiments each
file holds, and which of them the learning tests (tests/learning) train to their bar."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rlstack.experiments import load_experiments

ROOT = Path(__file__).resolve().parents[2]
CONFIG_DIR = ROOT / "tune_configs"


def tuned_examples(config_dir: Path = CONFIG_DIR) -> list[tuple[Path, str, dict[str, Any]]]:
    """Every experiment of every ``*.yaml`` file: ``(path, experiment name, spec)``, by path."""
    return [(path, name, spec) for path in sorted(config_dir.glob("*.yaml"))
            for name, spec in load_experiments(str(path)).items()]


def frameworks(spec: dict[str, Any]) -> list[str]:
    """The frameworks an example trains in: the one its config fixes, else both."""
    fixed = (spec.get("config") or {}).get("framework")
    return [fixed] if fixed else ["torch", "tf"]


def fits_this_machine(spec: dict[str, Any]) -> bool:
    """Whether CI's 2 CPU cores train the example to its bar (no GPU asked for) from its
    own envs (an example that learns from recorded experience, ``input`` other than
    "sampler", needs that experience recorded first: tests/learning/test_offline_learning.py)."""
    # Examples sized for a GPU machine (pong-impala.yaml) are smoke-tested elsewhere
    # (tests/integration/test_atari.py), not trained to their bar on CI's 2 cores.
    config = spec.get("config") or {}
    return not config.get("num_gpus") and config.get("input", "sampler") == "sampler"


def learning_cases(config_dir: Path = CONFIG_DIR) -> list[tuple[Path, str, str]]:
    """``(path, experiment name, framework)`` for each learning test tests/learning runs."""
    return [(path, name, framework) for path, name, spec in tuned_examples(config_dir)
            if fits_this_machine(spec) for framework in frameworks(spec)]
