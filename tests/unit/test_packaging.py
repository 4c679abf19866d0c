"""What a user installs (a wheel built from the repository, as `pip install "rlstack-ray @
git+..."` builds one) holds the whole package and its tuned examples, so that `rlstack ls`
and `rlstack compare --examples` work outside a checkout."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_wheel_holds_every_module_and_every_tuned_example(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
                           "--wheel-dir", str(tmp_path), str(ROOT)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    wheel, = tmp_path.glob("rlstack_ray-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    modules = {str(p.relative_to(ROOT)) for p in (ROOT / "rlstack").rglob("*.py")}
    assert modules - names == set()
    examples = {f"rlstack/tune_configs/{p.name}" for p in (ROOT / "rlstack" / "tune_configs").glob("*.yaml")}
    assert len(examples) >= 20 and examples <= names
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(wheel).read(metadata).decode()
    assert "Name: rlstack-ray\n" in text and "Project-URL: Repository, https://github.com/rlstack-dev/rlstack" in text
