"""RLlib 1.13's own example scripts, migrated by ``rlstack migrate`` and run on rlstack.

    python tests/compat/run_examples.py [--frameworks torch,tf] [--only NAME,...] [--timeout 240]
                                        [--write COMPAT.md]

What it does, in order:

1. fetches the ``ray==1.13.0`` wheel (``pip download --no-deps``, Python 3.9 / manylinux2014
   tags: there is none for 3.11) into ``.compat-cache/`` once, and extracts
   ``ray/rllib/examples/`` from it into ``.compat-cache/run/rllib_examples_113/`` (afresh
   each run; nothing of it is committed: the files are Apache-2.0 third-party test inputs);
2. runs ``rlstack migrate`` on that folder, as a user would;
   (before it, the examples' imports of their own helper modules, ``ray.rllib.examples.env...``,
   are pointed at the extracted 1.13 files, so that the helpers under test are 1.13's, a
   package of the project's own, not rlstack's re-creations);
3. applies :data:`FIXTURE_PATCHES`, the changes a person makes where migrate lists a place
   (one: which Tune callback to log with);
4. runs every top-level script once per framework in a fresh process, with
   ``--framework F --stop-iters 2 --stop-timesteps 1000`` where the script takes them
   (found in its argparse source), else as it is, each under ``--timeout`` seconds;
5. prints a table (example | torch | tf | first error) and, with ``--write``, writes it to
   that file with the command, the date and the counts.

A script passes when it exits 0. Scripts that need what this machine does not have (a GPU,
an outside simulator) are listed in :data:`SKIPPED` with the reason, and counted apart.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".compat-cache"
WHEEL_GLOB = "ray-1.13.0-*.whl"
PACKAGE = "rllib_examples_113"
EXAMPLES_IN_WHEEL = "ray-1.13.0.data/purelib/ray/rllib/examples/"

# (pattern, replacement, why): applied to every migrated file, after `rlstack migrate`.
# The examples' own helper modules (envs, models, policies) are 1.13's files under test, a
# package of the project's own beside the scripts (as a user's project holds its envs):
# their imports name it before `rlstack migrate` runs, so that migrate sees them as a
# user's modules, not as rlstack's re-creations of them.
OWN_HELPERS = (r"\bray\.rllib\.examples\b", PACKAGE)

FIXTURE_PATCHES: tuple[tuple[str, str, str], ...] = (
    (r"\bfrom ray\.tune\.logger import Logger, LegacyLoggerCallback\b",
     "from ray1_tune_logger import Logger, LegacyLoggerCallback",
     "Ray 2.x removed Tune's Logger and LegacyLoggerCallback (`rlstack migrate` lists the line: which callback "
     "to log with is a person's choice): tests/compat/ray1_tune_logger.py stands in, on Ray 2.x's LoggerCallback"),
)

# Ray's CPU count for the examples (see run_one).
LOGICAL_CPUS = 6

# Scripts that cannot run on a 2-core CPU machine without outside software.
SKIPPED: dict[str, str] = {
    "__init__.py": "not a script",
    "dmlab_watermaze.py": "DeepMind Lab is not installable from PyPI",
    "fractional_gpus.py": "needs a GPU",
    "partial_gpus.py": "needs a GPU",
    "mobilenet_v2_with_lstm.py": "downloads MobileNetV2 weights",
    "recommender_system_with_recsim_and_slateq.py": "RecSim is not installable with Python 3.11",
    "sumo_env_local.py": "needs the SUMO traffic simulator",
    "unity3d_env_local.py": "needs a Unity3D game binary",
    "vizdoom_with_attention_net.py": "needs ViZDoom",
    "sb2rllib_sb_example.py": "Stable-Baselines 2 (TensorFlow 1) is not installable",
    "multi_agent_independent_learning.py": "PettingZoo's Waterworld needs its sisl extra (pymunk), not installed here",
    "multi_agent_parameter_sharing.py": "PettingZoo's Waterworld needs its sisl extra (pymunk), not installed here",
    "self_play_with_open_spiel.py": "needs OpenSpiel (pyspiel)",
    "self_play_league_based_with_open_spiel.py": "needs OpenSpiel (pyspiel)",
    "offline_rl.py": "reads /path/to/my/json_file.json, a placeholder for experience the user recorded first",
    "custom_model_loss_and_metrics.py": "reads rllib/tests/data/cartpole/small.json, which the wheel does not ship",
    "custom_input_api.py": "reads rllib/tests/data/pendulum/small.json, which the wheel does not ship",
    "custom_loss.py": "1.13's placeholder that only raises: renamed to custom_model_loss_and_metrics.py",
    "attention_net_supervised.py": "broken in 1.13 itself: imports `rllib.models...` (no such package) and calls "
                                   "TF 1's `tf.enable_eager_execution()`",
}


def fetch_wheel() -> Path:
    """The cached ray 1.13.0 wheel, downloaded on first use."""
    CACHE.mkdir(exist_ok=True)
    found = sorted(CACHE.glob(WHEEL_GLOB))
    if found:
        return found[0]
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                    "--python-version", "3.9", "--platform", "manylinux2014_x86_64", "ray==1.13.0",
                    "-d", str(CACHE)], check=True)
    return sorted(CACHE.glob(WHEEL_GLOB))[0]


def extract(wheel: Path, run_dir: Path) -> Path:
    """``ray/rllib/examples`` of the wheel as the package ``rllib_examples_113`` in ``run_dir``."""
    if run_dir.exists():
        shutil.rmtree(run_dir)
    target = run_dir / PACKAGE
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            if name.startswith(EXAMPLES_IN_WHEEL) and not name.endswith("/"):
                path = target / name[len(EXAMPLES_IN_WHEEL):]
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(archive.read(name))
    return target


def migrate_and_patch(package: Path) -> str:
    """Runs ``rlstack migrate`` on the extracted examples, then the fixture patches; returns
    migrate's summary line."""
    for path in package.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        pointed = re.sub(*OWN_HELPERS, text)
        if pointed != text:
            path.write_text(pointed, encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "rlstack.cli", "migrate", "--no-check", str(package)],
                          capture_output=True, text=True, cwd=ROOT)
    if done.returncode not in (0, 1):  # 1: places listed for a person, which the table shows as they run
        raise SystemExit(f"rlstack migrate failed:\n{done.stderr}")
    for path in package.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        patched = text
        for pattern, replacement, _ in FIXTURE_PATCHES:
            patched = re.sub(pattern, replacement, patched)
        if patched != text:
            path.write_text(patched, encoding="utf-8")
    return done.stderr.strip().splitlines()[-1].replace(" (listed above)", "")


def framework_choices(script: Path) -> list[str] | None:
    """The frameworks the script's ``--framework`` option accepts, where it lists them."""
    source = script.read_text(encoding="utf-8")
    found = re.search(r'"--framework",[^)]*?choices=\[([^\]]*)\]', source, re.S)
    return re.findall(r'"(\w+)"', found.group(1)) if found else None


def arguments_for(script: Path, framework: str) -> list[str]:
    """Short stop criteria and the framework, for the options the script's argparse has."""
    source = script.read_text(encoding="utf-8")
    args = []
    if '"--framework"' in source:
        args += ["--framework", framework]
    if '"--stop-iters"' in source:
        args += ["--stop-iters", "2"]
    if '"--stop-timesteps"' in source:
        args += ["--stop-timesteps", "1000"]
    if '"--stop", type=int' in source:
        args += ["--stop", "15"]  # a mean return (custom_keras_model's only stop): a random CartPole policy's
    return args


def first_error(output: str) -> str:
    """The line that names the error (the last ``...Error: ...`` line), else the last line;
    for a failed Tune trial, that line of the trial's ``error.txt``, which Tune's own
    message only points to."""
    trial_errors = re.findall(r"Error file: (\S+)", output)
    for path in trial_errors:
        error_file = Path(path)
        if error_file.is_file():
            output = error_file.read_text(encoding="utf-8", errors="replace")
            break
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if re.match(r"^[\w.]*(Error|Exception|Exit)\b.*", line)]
    text = (errors or lines or [""])[-1]
    return text if len(text) <= 160 else text[:157] + "..."


# Put first on the examples' PYTHONPATH: a sitecustomize that hides Ray's own RLlib
# (ray.rllib ships inside the ray wheel and imports where ray[rllib]'s dependencies are
# installed, as in the bench environment), so that the examples run as on a machine with
# rlstack and without ray[rllib], the case the suite is about.
HIDE_RLLIB = """import importlib.abc, sys

class _NoRLlib(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname == "ray.rllib" or fullname.startswith("ray.rllib."):
            raise ModuleNotFoundError(f"No module named {fullname!r} (hidden by make test-compat)", name=fullname)
        return None

sys.meta_path.insert(0, _NoRLlib())
"""


def run_one(script: Path, framework: str, timeout: float) -> tuple[str, str]:
    """``(verdict, first error)`` of one script in one framework."""
    choices = framework_choices(script)
    if choices is not None and framework not in choices and not (framework == "tf" and "tf2" in choices):
        return "n/a", ""  # the script does not offer this framework
    hide = script.parent.parent / "hide_rllib"
    hide.mkdir(exist_ok=True)
    (hide / "sitecustomize.py").write_text(HIDE_RLLIB, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(hide), str(script.parent.parent), str(ROOT)]),
           "RLSTACK_RESULTS_DIR": str(script.parent.parent / "results"), "PYTHONWARNINGS": "ignore",
           # The examples were written for bigger machines (PPO's default: a driver and 2
           # rollout workers, a CPU each; 2 evaluation workers more in the parallel
           # evaluation example); Ray gets LOGICAL_CPUS logical CPUs on this 2-core
           # machine instead of leaving their trials pending.
           "RAY_OVERRIDE_RESOURCES": json.dumps({"CPU": LOGICAL_CPUS})}
    env.pop("RAY_ADDRESS", None)
    command = [sys.executable, str(script), *arguments_for(script, framework)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env,
                              cwd=script.parent.parent)
    except subprocess.TimeoutExpired:
        return "timeout", f"still running after {timeout:.0f} s"
    if done.returncode == 0:
        return "ok", ""
    return f"exit {done.returncode}", first_error(done.stderr + "\n" + done.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frameworks", default="torch,tf")
    parser.add_argument("--only", help="comma-separated script names (default: every top-level script)")
    parser.add_argument("--timeout", type=float, default=240.0, help="seconds per script and framework")
    parser.add_argument("--write", help="write the table to this markdown file (COMPAT.md)")
    parser.add_argument("--installed", help="what the interpreter running this has installed, for the table's "
                                            "header (make test-compat: a fresh venv of rlstack-ray[all])")
    args = parser.parse_args()
    frameworks = args.frameworks.split(",")
    package = extract(fetch_wheel(), CACHE / "run")
    summary = migrate_and_patch(package)
    # The fixture modules the patches import, beside the examples' package.
    shutil.copy(Path(__file__).with_name("ray1_tune_logger.py"), package.parent)
    print(summary, file=sys.stderr)
    scripts = sorted(p for p in package.glob("*.py") if p.name not in SKIPPED)
    if args.only:
        wanted = {name if name.endswith(".py") else name + ".py" for name in args.only.split(",")}
        scripts = [p for p in scripts if p.name in wanted]
    rows = []
    for script in scripts:
        verdicts, errors = [], []
        for framework in frameworks:
            verdict, error = run_one(script, framework, args.timeout)
            print(f"{script.name} [{framework}]: {verdict} {error}", file=sys.stderr)
            verdicts.append(verdict)
            errors.append(f"{framework}: {error}" if error else "")
        rows.append((script.stem, verdicts, "; ".join(e for e in errors if e)))
    header = "| example | " + " | ".join(frameworks) + " | first error |\n|---|" + "---|" * (len(frameworks) + 1)
    lines = [header] + [f"| {name} | " + " | ".join(v) + f" | {error.replace('|', '/')} |" for name, v, error in rows]
    passed = {f: sum(1 for _, v, _ in rows if v[i] == "ok") for i, f in enumerate(frameworks)}
    offered = {f: sum(1 for _, v, _ in rows if v[i] != "n/a") for i, f in enumerate(frameworks)}
    counts = ", ".join(f"{f}: {n} of {offered[f]}" for f, n in passed.items())
    table = "\n".join(lines)
    print(table)
    print(f"ran to the end: {counts}")
    if args.write:
        command = "python tests/compat/run_examples.py " + " ".join(sys.argv[1:])
        skipped = "\n".join(f"- `{name}`: {why}" for name, why in sorted(SKIPPED.items()) if name != "__init__.py")
        patches = "\n".join(f"- `{pattern}` -> `{replacement}`: {why}" for pattern, replacement, why in FIXTURE_PATCHES)
        Path(args.write).write_text(
            f"# RLlib 1.13's examples on rlstack\n\n`{command}`, {datetime.date.today().isoformat()}: each top-level "
            f"script of `ray==1.13.0`'s `ray/rllib/examples/`, after `rlstack migrate` ({summary.removeprefix('rlstack migrate: ')}) "
            f"and the fixture patches below, run once per framework with short stop criteria where the script takes "
            f"them, Ray given {LOGICAL_CPUS} logical CPUs on a 2-core machine and Ray's own RLlib hidden"
            f"{', in a fresh virtualenv of ' + args.installed if args.installed else ''}. Ran to "
            f"the end: {counts} (`n/a`: the script's --framework does not offer it).\n\n{table}\n\nFixture patches (not rlstack's to make):\n\n{patches}\n\n"
            f"Not run here:\n\n{skipped}\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
