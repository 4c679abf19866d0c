"""Every Python block of README.md and of the documentation site runs, as written, on 2 CPUs,
with only the extras it names installed.

A block's first line names the extras a reader installs for it (``# extras: torch`` or
``# extras: torch, offline``). Each block runs in a fresh interpreter in an empty temporary
directory, with every module that those extras do not install made unimportable
(tests/helpers/extras_env.py) and Ray held to 2 CPUs (``RAY_OVERRIDE_RESOURCES``, which
also covers a block that calls ``ray.init()`` without arguments or lets a trainer or
Tune start Ray), the size of a small laptop or a Colab machine. A block that cannot run
here (it needs a cluster, or is one part of a longer program) is marked on the line before
it with ``<!-- not run: REASON -->``. Blocks added later are picked up by themselves.
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
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
# Seconds one block may take on a busy 2-core machine.
BLOCK_TIMEOUT_S = 600
EXTRAS = re.compile(r"\A# extras: ([a-z0-9_, -]+)\n")
NOT_RUN = re.compile(r"<!-- not run: (.+?) -->[ \t]*\n\Z")


def python_blocks(text: str) -> list[tuple[int, str, str | None]]:
    """``(line number, code, reason it is not run or None)`` of every ```python block."""
    blocks = []
    for match in re.finditer(r"^```python[ \t]*\n(.*?)^```[ \t]*$", text, re.M | re.S):
        before = text[:match.start()]
        not_run = NOT_RUN.search(before)
        blocks.append((before.count("\n") + 1, match.group(1), not_run.group(1).strip() if not_run else None))
    return blocks


BLOCKS = [(page, line, code, reason) for page in PAGES for line, code, reason in python_blocks(page.read_text())]
RUNNABLE = [(page, line, code) for page, line, code, reason in BLOCKS if reason is None]


def _id(page: Path, line: int) -> str:
    return f"{page.relative_to(ROOT)}:{line}"


def test_blocks_are_found_and_each_names_its_extras():
    assert sum(1 for page, *_ in RUNNABLE if page.name == "README.md") >= 1
    assert python_blocks("x\n```python\nprint(1)\n```\n```bash\nls\n```\n") == [(2, "print(1)\n", None)]
    assert python_blocks("<!-- not run: needs a cluster -->\n```python\nx\n```\n") == [(2, "x\n", "needs a cluster")]
    missing = [_id(page, line) for page, line, code, _ in BLOCKS if not EXTRAS.match(code)]
    assert not missing, f"blocks whose first line does not say '# extras: ...': {missing}"
    known = set(__import__("tomllib").loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    unknown = {(_id(page, line), extra) for page, line, code, _ in BLOCKS if EXTRAS.match(code)
               for extra in (e.strip() for e in EXTRAS.match(code).group(1).split(",")) if extra not in known}
    assert not unknown, f"extras that pyproject.toml does not define: {sorted(unknown)}"


@pytest.mark.parametrize("page, line, code", RUNNABLE, ids=[_id(page, line) for page, line, _ in RUNNABLE])
def test_block_runs_as_written_with_only_its_extras(page, line, code, tmp_path):
    extras = EXTRAS.match(code).group(1)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_AUTH_MODE": "disabled",
           "RAY_OVERRIDE_RESOURCES": json.dumps({"CPU": 2}), "RLSTACK_RESULTS_DIR": str(tmp_path / "ray_results"),
           "HOME": str(tmp_path), "TF_CPP_MIN_LOG_LEVEL": "2",
           # A block's own ray.init() starts a single-node Ray that listens on 127.0.0.1 only
           # (what rlstack's init_local_ray does for the Rays it starts).
           "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    script = tmp_path / f"block_{line}.py"
    script.write_text(code)
    where = _id(page, line)
    start = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-m", "tests.helpers.extras_env", extras, str(script)], cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{where} ran past {BLOCK_TIMEOUT_S} s; output:\n"
                    f"{(exc.stdout or b'')[-3000:]!r}\n{(exc.stderr or b'')[-3000:]!r}")
    print(f"{where} took {time.monotonic() - start:.1f} s")
    assert proc.returncode == 0, f"{where} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
