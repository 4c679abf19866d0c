"""Users' RLlib 1.x scripts from public repositories, migrated by ``rlstack migrate`` and run on rlstack.

    python tests/realcode/run_projects.py [--only NAME,...] [--timeout 300] [--write FILE]

The entries are listed in ``tests/realcode/projects.json`` (repository, commit, script, the
repository's own modules the script imports, arguments, and the edits that only make the run
shorter). The files themselves are third-party code and are never committed: they are read
from ``.realcode-cache/src/<owner>__<repo>/<path>`` (git-ignored), filled from the listed
commits with the search tool. What it does, for each entry in turn:

1. copies the cached script and helpers into a fresh ``.realcode-cache/run/<name>/``,
   keeping the repository's layout;
2. applies the entry's ``shorten`` edits to the script (fewer iterations, workers or
   timesteps, no GPU): nothing else, so that whatever fails is rlstack's or migrate's to fix;
3. runs ``python -m rlstack.cli migrate <folder>`` as a user would (exit 1 means it listed
   places for a person, not that it failed);
4. runs the script with this interpreter in a fresh process, cwd at the copy's root, under
   ``--timeout`` seconds, one script at a time;
5. prints a table (name | repo | migrate exit | run verdict | first error) and, with
   ``--write``, writes it as markdown. Each run's whole output is kept in
   ``.realcode-cache/run/<name>.log``.

A script passes when it exits 0.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.compat.run_examples import HIDE_RLLIB, LOGICAL_CPUS, first_error  # noqa: E402

PROJECTS = Path(__file__).with_name("projects.json")
CACHE = ROOT / ".realcode-cache"
SOURCES = CACHE / "src"
RUNS = CACHE / "run"


@dataclass
class Outcome:
    """What became of one entry."""

    name: str
    repo: str
    migrate_exit: str
    migrate_summary: str
    verdict: str
    error: str


def cached_file(entry: dict, path: str) -> Path:
    """Where the cache keeps ``path`` of the entry's repository."""
    return SOURCES / entry["repo"].replace("/", "__") / path


def missing_files(entry: dict) -> list[str]:
    """The entry's files (script and helpers) that the cache lacks."""
    return [path for path in [entry["path"], *entry["helpers"]] if not cached_file(entry, path).is_file()]


def prepare(entry: dict) -> tuple[Path, list[str]]:
    """A fresh copy of the entry's files under ``RUNS/<name>``, the script shortened;
    returns the copy's root and the ``shorten`` patterns that matched nothing."""
    root = RUNS / entry["name"]
    if root.exists():
        shutil.rmtree(root)
    for path in [entry["path"], *entry["helpers"]]:
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(cached_file(entry, path), target)
    script = root / entry["path"]
    text = script.read_text(encoding="utf-8")
    unmatched = []
    for pattern, replacement, _why in entry["shorten"]:
        text, count = re.subn(pattern, replacement, text)
        if not count:
            unmatched.append(pattern)
    script.write_text(text, encoding="utf-8")
    return root, unmatched


def migrate(root: Path) -> tuple[int, str]:
    """Runs ``rlstack migrate`` on the copy as a user would; returns its exit code and
    summary line."""
    done = subprocess.run([sys.executable, "-m", "rlstack.cli", "migrate", str(root)],
                          capture_output=True, text=True, cwd=ROOT)
    lines = [line for line in done.stderr.splitlines() if line.startswith("rlstack migrate:")]
    summary = lines[-1] if lines else (done.stderr.strip().splitlines() or [""])[-1]
    (root.parent / f"{root.name}.migrate.log").write_text(done.stdout + done.stderr, encoding="utf-8")
    return done.returncode, summary


def run(entry: dict, root: Path, timeout: float) -> tuple[str, str]:
    """``(verdict, first error)`` of the migrated script."""
    hide = RUNS / "hide_rllib"
    hide.mkdir(parents=True, exist_ok=True)
    (hide / "sitecustomize.py").write_text(HIDE_RLLIB, encoding="utf-8")
    home = root / ".home"
    home.mkdir()
    paths = [str(hide), str(root)] + [str(root / extra) for extra in entry.get("pythonpath", [])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "PYTHONWARNINGS": "ignore",
           "RLSTACK_RESULTS_DIR": str(root / "results"),
           # As in run_examples: the scripts ask for more CPUs than this 2-core machine has.
           "RAY_OVERRIDE_RESOURCES": json.dumps({"CPU": LOGICAL_CPUS}),
           # Some scripts delete or write ~/ray_results (DerwenAI's train.py removes it), so
           # each gets a home of its own; headless backends for the ones that plot or render.
           "HOME": str(home), "MPLBACKEND": "Agg", "SDL_VIDEODRIVER": "dummy"}
    env.pop("RAY_ADDRESS", None)
    log = root.parent / f"{root.name}.log"
    command = [sys.executable, str(root / entry["path"]), *entry["args"]]
    with log.open("w", encoding="utf-8") as out:
        # A session of its own, so that a timeout also ends the Ray processes the script started.
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=root,
                                   start_new_session=True)
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait()
    if code is None:
        return "timeout", f"still running after {timeout:.0f} s"
    if code == 0:
        return "ok", ""
    return f"exit {code}", first_error(log.read_text(encoding="utf-8", errors="replace"))


def run_entry(entry: dict, timeout: float) -> Outcome:
    """Prepares, migrates and runs one entry."""
    missing = missing_files(entry)
    if missing:
        where = ", ".join(str(cached_file(entry, path).relative_to(ROOT)) for path in missing)
        error = (f"cache lacks {where}: fill it with the search tool from repo {entry['repo']}, commit "
                 f"{entry['commit']}, path(s) {', '.join(missing)} (read_file, or fetch and git show COMMIT:PATH)")
        return Outcome(entry["name"], entry["repo"], "-", "", "missing", error)
    root, unmatched = prepare(entry)
    code, summary = migrate(root)
    verdict, error = run(entry, root, timeout)
    if unmatched:
        error = f"shorten pattern(s) not found: {unmatched}; " + error
    return Outcome(entry["name"], entry["repo"], str(code), summary, verdict, error)


def table(outcomes: list[Outcome]) -> str:
    """The markdown table of the outcomes."""
    lines = ["| name | repo | migrate exit | run verdict | first error |", "|---|---|---|---|---|"]
    for o in outcomes:
        lines.append(f"| {o.name} | {o.repo} | {o.migrate_exit} | {o.verdict} | {o.error.replace('|', '/')} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="comma-separated entry names (default: every entry)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per script (default 300)")
    parser.add_argument("--write", help="write the table to this markdown file")
    args = parser.parse_args()
    entries = json.loads(PROJECTS.read_text(encoding="utf-8"))
    if args.only:
        wanted = set(args.only.split(","))
        unknown = wanted - {entry["name"] for entry in entries}
        if unknown:
            parser.error(f"unknown entries {sorted(unknown)}; available: {', '.join(e['name'] for e in entries)}")
        entries = [entry for entry in entries if entry["name"] in wanted]
    RUNS.mkdir(parents=True, exist_ok=True)
    outcomes = []
    for entry in entries:
        outcome = run_entry(entry, args.timeout)
        print(f"{outcome.name}: migrate {outcome.migrate_exit} ({outcome.migrate_summary}); "
              f"{outcome.verdict} {outcome.error}", file=sys.stderr, flush=True)
        outcomes.append(outcome)
    text = table(outcomes)
    passed = sum(1 for o in outcomes if o.verdict == "ok")
    counts = f"{passed} of {len(outcomes)} ran to the end"
    print(text)
    print(counts)
    if args.write:
        command = "python tests/realcode/run_projects.py " + " ".join(sys.argv[1:])
        summaries = "\n".join(f"- `{o.name}`: {o.migrate_summary}" for o in outcomes if o.migrate_summary)
        Path(args.write).write_text(
            f"# Users' RLlib 1.x scripts on rlstack\n\n`{command}`, {datetime.date.today().isoformat()}: each "
            f"script of tests/realcode/projects.json, after `rlstack migrate` and its run-shortening edits, run "
            f"with Ray given {LOGICAL_CPUS} logical CPUs on a 2-core machine and Ray's own RLlib hidden. "
            f"{counts}.\n\n{text}\n\nWhat `rlstack migrate` said:\n\n{summaries}\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
