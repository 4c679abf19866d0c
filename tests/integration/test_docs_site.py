"""The documentation site builds with ``mkdocs build --strict``: no broken link or anchor,
no missing API reference, no page left out of the navigation, every generated part
generated."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_site_builds_strictly(tmp_path):
    site = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], cwd=ROOT,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    home = (site / "index.html").read_text()
    assert "rlstack" in home
    ppo = (site / "algorithms" / "ppo" / "index.html").read_text()
    assert "<code>clip_param</code>" in ppo and "rlstack:config-table" not in ppo
    cli = (site / "reference" / "cli" / "index.html").read_text()
    assert "rlstack migrate" in cli and "--stop" in cli
    api = (site / "reference" / "api" / "index.html").read_text()
    assert "PPOTrainer" in api and "compute_single_action" in api
    assert (site / "search" / "search_index.json").stat().st_size > 10_000
