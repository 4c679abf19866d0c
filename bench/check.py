"""Checks the working tree against a commit REF on README's headline speed figures.

Both builds are measured in one invocation, alternately, and each figure gets a verdict.

    make bench-check REF=main [CHECK_ARGS="--only ppo --rounds 5"]
    python bench/check.py --ref HEAD [--rounds 3] [--only ppo,sac] [--ref-python PATH]
    python bench/check.py --list                      # the figures and their commands

The two builds:

* the working tree, uncommitted changes included, run with the repository's ``.venv``
  (``--tree-python`` names another interpreter);
* REF, checked out with ``git worktree add --detach`` into a temporary folder (removed at
  the end) and run with a virtual environment of its own, built on first use from REF's
  ``constraints.txt`` (``pip install -c constraints.txt -e '<tree>[all,test]'``) and kept
  under ``.bench-venvs/<sha>`` for the next invocation (``--ref-python`` skips building it).

Each measurement runs one of the working tree's bench scripts with the build's
interpreter, the build's tree as working directory and as ``PYTHONPATH``, so ``import
rlstack`` finds that build's sources in the script and in its Ray workers, while the
measuring code and its settings (bench/, tune_configs/) are the same for both builds.
The script's JSON line gives the figure, converted so that higher is better (a wall time
becomes runs per hour). In round *i* every figure runs once per build, REF first in even
rounds and the working tree first in odd ones (REF tree REF tree ..., then tree REF tree
REF ...), so a machine that drifts during the check hits both builds alike.

The rule, per figure, on the ratios working tree / REF of the rounds (one ratio per
round, each from the two measurements of that round):

* ``WORSE``, the check fails: the median ratio is below 0.95 and every ratio is below
  1.0 (worse by more than 5%, and no round says otherwise);
* ``noisy``: the median ratio is below 0.95 but at least one ratio is 1.0 or more (rerun
  with more ``--rounds``);
* ``better``: the median ratio is above 1.05 and every ratio is above 1.0;
* ``ok``: anything else.

Progress goes to stderr; stdout gets a markdown table and then one JSON line with every
measurement. Exit status: 1 when a figure is WORSE; otherwise 2 when the check could not
be made (REF is not a commit, an interpreter is missing, REF's environment failed to
build, or a figure could not be measured: its row says so); otherwise 0.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
VENV_CACHE = REPO / ".bench-venvs"

REF, TREE = "ref", "tree"  # the two builds, as the JSON line names them
WORSE_BELOW = 0.95  # a median ratio under this is a regression if the rounds agree
BETTER_ABOVE = 1.05
CHILD_TIMEOUT_S = 900  # one measurement takes 30-120 s; this only ends a hung script
RULE = (f"WORSE when the median of the per-round ratios tree / REF is below {WORSE_BELOW} and every ratio is "
        f"below 1.0; noisy when the median is below {WORSE_BELOW} but some ratio is 1.0 or more; better when the "
        f"median is above {BETTER_ABOVE} and every ratio is above 1.0; ok otherwise")


class SetupError(RuntimeError):
    """The check cannot be made: a bad argument, REF not a commit, a missing interpreter."""


class MeasurementError(RuntimeError):
    """A bench script failed, timed out, or printed no usable figure."""


@dataclass(frozen=True)
class Figure:
    """One headline figure of README's benchmark tables and the bench script run that
    measures it."""

    name: str  # what --only matches
    title: str  # the README row it stands for
    unit: str  # of the reported value (after conversion)
    command: tuple[str, ...]  # the script under bench/ and its arguments
    key: tuple[str, ...]  # path to the value in the script's JSON line
    expected_s: int  # one measurement's wall seconds on the 2-core machine, roughly
    per_hour: bool = False  # the value is a run's wall seconds: report 3600 / value

    def value(self, record: dict[str, Any]) -> float:
        """The figure in ``record`` (the script's JSON line), higher is better.

        Raises:
            MeasurementError: the key is missing or its value is not a positive number.
        """
        value: Any = record
        for part in self.key:
            if not isinstance(value, dict) or part not in value:
                raise MeasurementError(f"the JSON line of bench/{self.command[0]} has no {'.'.join(self.key)}")
            value = value[part]
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
            raise MeasurementError(f"{'.'.join(self.key)} of bench/{self.command[0]} is {value!r}, "
                                   "not a positive number")
        return 3600.0 / value if self.per_hour else float(value)


# One measurement each; the durations are BENCHMARKS.md's figures for these settings.
FIGURES = (
    # A fixed 80,000 env steps (about what a run to 450 takes, 20 iterations of 4,000), so
    # both builds do the same work: ~28 s of training after a ~6 s start.
    Figure("ppo-defaults-torch", "PPO CartPole-v1, RLlib's defaults, 2 workers, torch", "env steps/s",
           ("ppo_cartpole.py", "--runs", "1", "--framework", "torch", "--workers", "2",
            "--preset", "rllib-defaults", "--target", "inf", "--max-steps", "80000"),
           ("summary", "env_steps_per_s", "median"), 35),
    Figure("ppo-defaults-tf", "PPO CartPole-v1, RLlib's defaults, 2 workers, tf", "env steps/s",
           ("ppo_cartpole.py", "--runs", "1", "--framework", "tf", "--workers", "2",
            "--preset", "rllib-defaults", "--target", "inf", "--max-steps", "80000"),
           ("summary", "env_steps_per_s", "median"), 35),
    # README's figure is the wall time from process start to a mean return of 450: the
    # median of seeds 0-2, 9-17 s each.
    Figure("ppo-rl-zoo-torch", "PPO CartPole-v1, RL-Zoo's hyper-parameters, torch, to a return of 450",
           "runs/h", ("ppo_cartpole.py", "--runs", "3", "--framework", "torch", "--workers", "0",
                      "--preset", "rl-zoo"),
           ("summary", "wall_s", "median"), 45, per_hour=True),
    # 50,000 env steps at ~1,400/s (RL-Zoo's settings never reach 450, so every run does
    # the same work).
    Figure("dqn-rl-zoo-torch", "DQN CartPole-v1, RL-Zoo's hyper-parameters, torch", "env steps/s",
           ("dqn_cartpole.py", "--runs", "1", "--only", "rlstack-torch/rl-zoo", "--max-steps", "50000",
            "--max-wall", "120"),
           ("summary", "rlstack-torch/rl-zoo", "env_steps_per_s", "median"), 40),
    # A run to -200 takes 4,200-6,000 env steps, one gradient step each at ~100/s; capped
    # at 5,000.
    Figure("sac-pendulum-torch", "SAC Pendulum-v1, RL-Zoo's hyper-parameters, torch", "gradient steps/s",
           ("pendulum_offpolicy.py", "--runs", "1", "--only", "sac", "--frameworks", "torch", "--no-sb3",
            "--max-steps", "5000", "--max-wall", "120"),
           ("summary", "rlstack-torch/SAC", "gradient_steps_per_s", "median"), 55),
    # README's protocol: three runs to a mean return of 150 (seeds 0-2), ~12 s each.
    Figure("impala-cartpole-torch", "IMPALA CartPole-v1, 2 workers, torch, env steps sampled", "env steps/s",
           ("impala_cartpole.py", "--runs", "3", "--workers", "2", "--systems", "rlstack-torch",
            "--max-wall", "60"),
           ("summary", "rlstack-torch/2", "sample_throughput", "median"), 40),
    # PPO's learner alone on RLlib's default settings (4,000 rows x 30 epochs of 128, 256x256):
    # five timed learn_on_batch calls of ~2 s after a warm-up.
    Figure("learner-ppo-torch", "PPO learner, RLlib's defaults, torch", "samples x epochs/s",
           ("learner.py", "--repeats", "5", "--only", "torch/rllib-defaults"),
           ("summary", "torch/rllib-defaults", "median"), 20),
    Figure("learner-ppo-tf", "PPO learner, RLlib's defaults, tf", "samples x epochs/s",
           ("learner.py", "--repeats", "5", "--only", "tf/rllib-defaults"),
           ("summary", "tf/rllib-defaults", "median"), 25),
    # Five repeats of 400,000 steps at ~67,000/s, in one process.
    Figure("sampling-32-envs", "sampling, one rollout worker, 32 CartPole envs, numpy acting", "env steps/s",
           ("sampling.py", "--repeats", "5", "--steps", "400000",
            "--only", "rlstack RolloutWorker 32 envs, numpy acting"),
           ("summary", "rlstack RolloutWorker 32 envs, numpy acting", "median"), 35),
)


@dataclass(frozen=True)
class Build:
    """What one side of the check runs: an interpreter and the tree it imports rlstack from."""

    label: str  # for people: "working tree" or REF's name and commit
    python: Path
    tree: Path


@dataclass(frozen=True)
class Comparison:
    """One figure's measurements over the rounds, and the verdict on them."""

    ref_median: float
    tree_median: float
    ratios: tuple[float, ...]  # tree / REF, round by round
    ratio_median: float
    ratio_min: float
    ratio_max: float
    verdict: str


def verdict(ratios: Sequence[float]) -> str:
    """``WORSE``, ``noisy``, ``better`` or ``ok`` for the per-round ratios tree / REF (the
    rule of the module docstring)."""
    median = statistics.median(ratios)
    if median < WORSE_BELOW:
        return "WORSE" if max(ratios) < 1.0 else "noisy"
    if median > BETTER_ABOVE and min(ratios) > 1.0:
        return "better"
    return "ok"


def compare(ref: Sequence[float], tree: Sequence[float]) -> Comparison:
    """Pairs the two builds' values round by round (higher is better) and judges the ratios.

    Raises:
        ValueError: the builds have different numbers of rounds, none, or a value that is
            not positive.
    """
    if len(ref) != len(tree) or not ref:
        raise ValueError(f"need the same number (at least one) of REF and tree values, got {len(ref)} and {len(tree)}")
    if min(*ref, *tree) <= 0:
        raise ValueError(f"values must be positive (higher is better), got REF {list(ref)} and tree {list(tree)}")
    ratios = tuple(after / before for before, after in zip(ref, tree))
    return Comparison(statistics.median(ref), statistics.median(tree), ratios, statistics.median(ratios),
                      min(ratios), max(ratios), verdict(ratios))


def build_order(rounds: int) -> list[tuple[str, str]]:
    """Which build runs first in each round: REF in even rounds, the working tree in odd ones."""
    return [(REF, TREE) if i % 2 == 0 else (TREE, REF) for i in range(rounds)]


def measure(figures: Sequence[Figure], builds: dict[str, Build], rounds: int,
            run: Callable[[Figure, Build], float]) -> tuple[dict[str, dict[str, list[float]]], dict[str, str]]:
    """Runs every figure once per build and round, in :func:`build_order`.

    A figure that fails once is not measured again (its error is kept, and so are the
    values measured before it).

    Args:
        figures: what to measure.
        builds: the two builds, keyed by ``REF`` and ``TREE``.
        rounds: how many times each figure runs per build.
        run: measures one figure on one build (:func:`run_figure`).

    Returns:
        ``values[figure][build]``, one value per round, and the error of each figure that failed.
    """
    values = {figure.name: {REF: [], TREE: []} for figure in figures}
    errors: dict[str, str] = {}
    for round_index, order in enumerate(build_order(rounds)):
        for figure in figures:
            for side in order:
                if figure.name in errors:
                    break
                start = time.monotonic()
                try:
                    value = run(figure, builds[side])
                except MeasurementError as error:
                    errors[figure.name] = f"{builds[side].label}: {error}"
                    _progress(f"round {round_index + 1}/{rounds} {figure.name} on {builds[side].label}: "
                              f"FAILED, not measured again\n{error}")
                    break
                values[figure.name][side].append(value)
                _progress(f"round {round_index + 1}/{rounds} {figure.name} on {builds[side].label}: "
                          f"{value:,.1f} {figure.unit} ({time.monotonic() - start:.0f} s)")
    return values, errors


def last_json_line(stdout: str) -> dict[str, Any]:
    """The last line of ``stdout`` that is a JSON object (what every bench script prints last).

    Raises:
        MeasurementError: there is none.
    """
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                continue
    raise MeasurementError("the script printed no JSON line")


def child_env(build: Build) -> dict[str, str]:
    """This process's environment with the build's tree first on ``PYTHONPATH``."""
    return {**os.environ, "PYTHONPATH": str(build.tree)}


def run_figure(figure: Figure, build: Build) -> float:
    """Runs the figure's bench script (the working tree's) on ``build`` and reads the figure.

    Raises:
        MeasurementError: the script failed, ran past ``CHILD_TIMEOUT_S`` or printed no figure.
    """
    script, *arguments = figure.command
    command = [str(build.python), str(BENCH_DIR / script), *arguments]
    try:
        completed = subprocess.run(command, cwd=build.tree, env=child_env(build), capture_output=True, text=True,
                                   timeout=CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired as error:
        raise MeasurementError(f"{_shell(command)} ran past {CHILD_TIMEOUT_S} s") from error
    if completed.returncode != 0:
        raise MeasurementError(f"{_shell(command)} exited with status {completed.returncode}; "
                               f"the end of its stderr:\n{completed.stderr[-2000:]}")
    return figure.value(last_json_line(completed.stdout))


def _format_value(value: float) -> str:
    return f"{value:,.1f}"


def format_table(figures: Sequence[Figure], comparisons: dict[str, Comparison], errors: dict[str, str]) -> str:
    """The markdown table of the check: one row per figure, its error (first line) under it."""
    lines = ["| figure | REF median | tree median | ratio median | ratio min–max | verdict |",
             "|---|---|---|---|---|---|"]
    for figure in figures:
        label = f"{figure.name}: {figure.title} ({figure.unit})"
        result = comparisons.get(figure.name)
        if figure.name in errors or result is None:
            lines.append(f"| {label} | | | | | error |")
            continue
        spread = f"{result.ratio_min:.3f}–{result.ratio_max:.3f}"
        lines.append(f"| {label} | {_format_value(result.ref_median)} | {_format_value(result.tree_median)} | "
                     f"{result.ratio_median:.3f} | {spread} | {result.verdict} |")
    for name, error in errors.items():
        lines.append(f"\n{name} could not be measured: {error.splitlines()[0] if error else ''}")
    return "\n".join(lines)


def exit_status(comparisons: dict[str, Comparison], errors: dict[str, str]) -> int:
    """1 when a figure is WORSE, else 2 when one could not be measured, else 0."""
    if any(result.verdict == "WORSE" for result in comparisons.values()):
        return 1
    return 2 if errors else 0


def select_figures(only: str | None) -> tuple[Figure, ...]:
    """The figures whose name contains one of the comma-separated texts of ``only`` (all
    when it is empty).

    Raises:
        SetupError: none matches.
    """
    wanted = [text.strip() for text in (only or "").split(",") if text.strip()]
    if not wanted:
        return FIGURES
    chosen = tuple(figure for figure in FIGURES if any(text in figure.name for text in wanted))
    if not chosen:
        raise SetupError(f"--only {only!r} matches no figure; the figures are "
                         f"{', '.join(figure.name for figure in FIGURES)}")
    return chosen


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line; argparse exits with status 2 on a bad one."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     epilog="Exit status: 1 when a figure is WORSE, 2 when the check could "
                                            "not be made, 0 otherwise.")
    parser.add_argument("--ref", help="the commit to compare against (a sha, branch or tag; required)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="measurements per figure and build, alternating (default 3: medians of 3)")
    parser.add_argument("--only", help="comma-separated parts of figure names, e.g. 'ppo,sac' (default: all)")
    parser.add_argument("--ref-python", type=Path,
                        help="an interpreter with REF's dependencies: skips building .bench-venvs/<sha>")
    parser.add_argument("--tree-python", type=Path, default=REPO / ".venv" / "bin" / "python",
                        help="the working tree's interpreter (default: the repository's .venv)")
    parser.add_argument("--list", action="store_true", help="print the figures and their commands, measure nothing")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds must be 1 or more (3 or more for a median that means something), got {args.rounds}")
    if args.ref is None and not args.list:
        parser.error("--ref is required: the commit to compare the working tree against, e.g. --ref main")
    return args


def _git(*arguments: str) -> str:
    completed = subprocess.run(["git", "-C", str(REPO), *arguments], capture_output=True, text=True)
    if completed.returncode != 0:
        raise SetupError(f"git {' '.join(arguments)} failed: {completed.stderr.strip()}")
    return completed.stdout.strip()


def resolve_commit(ref: str) -> str:
    """The full sha of ``ref``.

    Raises:
        SetupError: ``ref`` names no commit of this repository.
    """
    completed = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
                               capture_output=True, text=True)
    if completed.returncode != 0:
        raise SetupError(f"REF {ref!r} is not a commit of {REPO}; give a sha, branch or tag, e.g. REF=main "
                         "(git fetch first if it is a remote's)")
    return completed.stdout.strip()


@contextlib.contextmanager
def ref_checkout(sha: str) -> Iterator[Path]:
    """A detached git worktree of ``sha`` in a temporary folder, removed on exit."""
    folder = Path(tempfile.mkdtemp(prefix="rlstack-bench-check-"))
    tree = folder / "tree"
    try:
        _git("worktree", "add", "--quiet", "--detach", str(tree), sha)
    except SetupError:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    try:
        yield tree
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)
        subprocess.run(["git", "-C", str(REPO), "worktree", "prune"], capture_output=True)


def ref_python(sha: str, tree: Path) -> Path:
    """REF's interpreter from ``.bench-venvs/<sha>``, building that environment first if no
    earlier invocation finished it.

    Raises:
        SetupError: REF has no constraints.txt, or building the environment failed.
    """
    venv = VENV_CACHE / sha
    python = venv / "bin" / "python"
    finished = venv / ".installed"
    if finished.exists():
        return python
    constraints = tree / "constraints.txt"
    if not constraints.exists():
        raise SetupError(f"REF {sha[:12]} has no constraints.txt to build its environment from; "
                         "pass --ref-python with an interpreter that has its dependencies")
    shutil.rmtree(venv, ignore_errors=True)  # a half-built one from an interrupted invocation
    _progress(f"building REF's virtual environment in {venv} (once per commit; several minutes)")
    for command in (["python3", "-m", "venv", str(venv)],
                    [str(venv / "bin" / "pip"), "install", "-q", "-c", str(constraints), "-e", f"{tree}[all,test]"]):
        status = subprocess.run(command, stdout=sys.stderr).returncode
        if status != 0:
            shutil.rmtree(venv, ignore_errors=True)
            raise SetupError(f"building REF's environment failed: {_shell(command)} exited with status {status} "
                             "(its output is above); or pass --ref-python with an interpreter that has REF's "
                             "dependencies")
    finished.touch()
    return python


def prepare(build: Build) -> None:
    """Checks that ``build``'s interpreter imports rlstack from its tree, and byte-compiles
    that rlstack (rlstack is installed editable; users do not pay for compiling it).

    Raises:
        SetupError: the interpreter is missing, or finds rlstack elsewhere.
    """
    if not os.access(build.python, os.X_OK):
        raise SetupError(f"no interpreter at {build.python} for {build.label}; "
                         "make bench-check creates .venv (or pass --tree-python / --ref-python)")
    find_rlstack = "import importlib.util; print(importlib.util.find_spec('rlstack').origin)"
    where = subprocess.run([str(build.python), "-c", find_rlstack], cwd=build.tree, env=child_env(build),
                           capture_output=True, text=True)
    origin = Path(where.stdout.strip() or "?")
    if where.returncode != 0 or not origin.is_relative_to(build.tree):
        raise SetupError(f"{build.python} imports rlstack from {origin}, not from {build.tree} ({build.label}): "
                         f"{where.stderr.strip()[-500:]}")
    compiled = subprocess.run([str(build.python), "-m", "compileall", "-q", str(build.tree / "rlstack")],
                              capture_output=True, text=True)
    if compiled.returncode != 0:
        raise SetupError(f"byte-compiling {build.tree / 'rlstack'} failed:\n{compiled.stdout[-1000:]}")


def report(args: argparse.Namespace, sha: str, figures: Sequence[Figure], values: dict[str, dict[str, list[float]]],
           comparisons: dict[str, Comparison], errors: dict[str, str], status: int) -> dict[str, Any]:
    """Everything the check measured, as the JSON line prints it."""
    entries = {}
    for figure in figures:
        entry: dict[str, Any] = {"title": figure.title, "unit": figure.unit,
                                 "command": ["bench/" + figure.command[0], *figure.command[1:]],
                                 "key": list(figure.key), "per_hour": figure.per_hour,
                                 REF: [round(v, 3) for v in values[figure.name][REF]],
                                 TREE: [round(v, 3) for v in values[figure.name][TREE]]}
        if figure.name in comparisons:
            result = comparisons[figure.name]
            entry |= {"ref_median": round(result.ref_median, 3), "tree_median": round(result.tree_median, 3),
                      "ratios": [round(r, 4) for r in result.ratios], "ratio_median": round(result.ratio_median, 4),
                      "ratio_min": round(result.ratio_min, 4), "ratio_max": round(result.ratio_max, 4),
                      "verdict": result.verdict}
        if figure.name in errors:
            entry |= {"verdict": "error", "error": errors[figure.name]}
        entries[figure.name] = entry
    return {"benchmark": "check", "ref": args.ref, "ref_commit": sha, "tree": str(REPO),
            "tree_commit": _git("rev-parse", "HEAD"), "tree_changed": bool(_git("status", "--porcelain")),
            "rounds": args.rounds, "order": "REF first in even rounds (0, 2, ...), the working tree first in odd",
            "rule": RULE, "figures": entries,
            "worse": [name for name, result in comparisons.items() if result.verdict == "WORSE"],
            "exit_status": status}


def check(args: argparse.Namespace) -> int:
    """Sets up both builds, measures, prints the table and the JSON line; the exit status."""
    figures = select_figures(args.only)
    sha = resolve_commit(args.ref)
    tree_build = Build("working tree", args.tree_python.absolute(), REPO)
    if args.ref_python is not None and not os.access(args.ref_python, os.X_OK):
        raise SetupError(f"--ref-python {args.ref_python} is not an executable file")
    with ref_checkout(sha) as ref_tree:
        # absolute(), not resolve(): a venv's python is a symlink whose target is no venv.
        python = args.ref_python.absolute() if args.ref_python is not None else ref_python(sha, ref_tree)
        builds = {REF: Build(f"REF {args.ref} ({sha[:10]})", python, ref_tree), TREE: tree_build}
        for build in builds.values():
            prepare(build)
        expected_min = sum(figure.expected_s for figure in figures) * 2 * args.rounds / 60
        _progress(f"{len(figures)} figures x 2 builds x {args.rounds} rounds: about {expected_min:.0f} minutes")
        values, errors = measure(figures, builds, args.rounds, run_figure)
    comparisons = {name: compare(measured[REF], measured[TREE]) for name, measured in values.items()
                   if name not in errors}
    status = exit_status(comparisons, errors)
    print(format_table(figures, comparisons, errors))
    print(json.dumps(report(args, sha, figures, values, comparisons, errors, status)))
    return status


def list_figures(figures: Sequence[Figure]) -> str:
    """One line per figure: its name, title, unit, command and one measurement's duration."""
    return "\n".join(f"{figure.name}: {figure.title} ({figure.unit}{', 3600 / wall s' if figure.per_hour else ''}), "
                     f"~{figure.expected_s} s: python {_shell(['bench/' + figure.command[0], *figure.command[1:]])}"
                     for figure in figures)


def _shell(command: Sequence[str]) -> str:
    return " ".join(shlex.quote(part) for part in command)


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the check; the exit status (see the module docstring)."""
    args = parse_args(argv)
    try:
        if args.list:
            print(list_figures(select_figures(args.only)))
            return 0
        return check(args)
    except SetupError as error:
        print(f"bench/check.py: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
