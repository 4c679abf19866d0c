"""Every Python block in README.md runs, as written, on 2 CPUs.

Each ```python block runs in a fresh interpreter in an empty temporary directory, with
Ray held to 2 CPUs (Ray's ``RAY_OVERRIDE_RESOURCES``, which also covers a block that
calls ``ray.init()`` without arguments or lets a trainer or Tune start Ray), the size
of a small laptop or a Colab machine. Blocks added later are picked up by themselves.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
# Seconds one block may take on a busy 2-core machine.
BLOCK_TIMEOUT_S = 600


def python_blocks(text: str) -> list[tuple[int, str]]:
    """``(line number, code)`` of every fenced ```python block of a Markdown text."""
    blocks = []
    for match in re.finditer(r"^```python[ \t]*\n(.*?)^```[ \t]*$", text, re.M | re.S):
        blocks.append((text.count("\n", 0, match.start()) + 1, match.group(1)))
    return blocks


BLOCKS = python_blocks(README.read_text())


def test_the_readme_has_python_blocks():
    assert len(BLOCKS) >= 3
    assert python_blocks("x\n```python\nprint(1)\n```\n```bash\nls\n```\n") == [(2, "print(1)\n")]


@pytest.mark.parametrize("line, code", BLOCKS, ids=[f"README.md:{line}" for line, _ in BLOCKS])
def test_readme_block_runs_as_written(line, code, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_AUTH_MODE": "disabled",
           "RAY_OVERRIDE_RESOURCES": json.dumps({"CPU": 2}), "RLSTACK_RESULTS_DIR": str(tmp_path / "ray_results"),
           "HOME": str(tmp_path), "TF_CPP_MIN_LOG_LEVEL": "2",
           # A block's own ray.init() starts a single-node Ray that listens on 127.0.0.1 only
           # (what rlstack's init_local_ray does for the Rays it starts).
           "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    script = tmp_path / f"readme_{line}.py"
    script.write_text(code)
    start = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=BLOCK_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"README.md block at line {line} ran past {BLOCK_TIMEOUT_S} s; output:\n"
                    f"{(exc.stdout or b'')[-3000:]!r}\n{(exc.stderr or b'')[-3000:]!r}")
    print(f"README.md:{line} took {time.monotonic() - start:.1f} s")
    assert proc.returncode == 0, (f"README.md block at line {line} failed:\n{proc.stdout[-3000:]}\n"
                                  f"{proc.stderr[-6000:]}")
