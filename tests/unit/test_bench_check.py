"""bench/check.py's pure parts (``make bench-check REF=...``): the verdict rule, the order
of the builds, reading a figure from a script's JSON line, the table, and the errors of a
bad command line. Nothing here runs a benchmark."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _load_check():
    spec = importlib.util.spec_from_file_location("bench_check", BENCH / "check.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


check = _load_check()


@pytest.mark.parametrize("ratios, expected", [
    ((0.90, 0.92, 0.93), "WORSE"),    # 7% worse and every round agrees
    ((0.80, 0.93, 0.999), "WORSE"),
    ((0.90, 0.93, 1.00), "noisy"),    # a round at 1.0: not worse beyond the spread
    ((0.95, 0.90, 0.96), "ok"),       # a median of exactly 0.95 is not below it
    ((0.97, 0.99, 1.02), "ok"),
    ((1.10, 1.06, 1.20), "better"),
    ((1.10, 0.99, 1.20), "ok"),       # better by the median, but one round says otherwise
    ((0.90,), "WORSE"),
])
def test_verdict_fails_a_figure_only_when_the_median_and_every_round_say_worse(ratios, expected):
    assert check.verdict(ratios) == expected


def test_compare_pairs_the_builds_round_by_round():
    result = check.compare(ref=[100.0, 200.0, 100.0], tree=[90.0, 180.0, 95.0])
    assert result.ratios == pytest.approx((0.9, 0.9, 0.95))
    assert (result.ref_median, result.tree_median) == (100.0, 95.0)
    assert (result.ratio_median, result.ratio_min, result.ratio_max) == pytest.approx((0.9, 0.9, 0.95))
    assert result.verdict == "WORSE"
    with pytest.raises(ValueError, match="same number"):
        check.compare([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="positive"):
        check.compare([0.0], [1.0])


def test_build_order_alternates_which_build_runs_first():
    assert check.build_order(4) == [("ref", "tree"), ("tree", "ref"), ("ref", "tree"), ("tree", "ref")]


def _figure(name="fig", key=("summary", "rate", "median"), per_hour=False):
    return check.Figure(name, f"{name} title", "steps/s", ("sampling.py", "--repeats", "1"), key, 30, per_hour)


def test_measure_runs_every_figure_on_both_builds_each_round_and_drops_a_failing_one(capsys):
    builds = {"ref": check.Build("REF x", Path("/py-ref"), Path("/ref")),
              "tree": check.Build("working tree", Path("/py-tree"), Path("/tree"))}
    calls = []

    def run(figure, build):
        calls.append((figure.name, build.label))
        if figure.name == "breaks" and build.label == "working tree" and len(calls) > 4:
            raise check.MeasurementError("exited with status 1")
        return 10.0 if build.label == "REF x" else 9.0

    values, errors = check.measure([_figure("a"), _figure("breaks")], builds, 3, run)
    assert calls == [("a", "REF x"), ("a", "working tree"), ("breaks", "REF x"), ("breaks", "working tree"),
                     ("a", "working tree"), ("a", "REF x"), ("breaks", "working tree"),
                     ("a", "REF x"), ("a", "working tree")]
    assert values["a"] == {"ref": [10.0] * 3, "tree": [9.0] * 3}
    assert values["breaks"] == {"ref": [10.0], "tree": [9.0]}
    assert errors == {"breaks": "working tree: exited with status 1"}
    assert "breaks on working tree: FAILED" in capsys.readouterr().err


def test_a_figure_is_read_from_the_json_line_and_wall_seconds_become_runs_per_hour():
    record = check.last_json_line('progress\n{"not": "this one"}\nwarning: {oops\n'
                                  '{"target": Infinity, "summary": {"rate": {"median": 120.0}}}\n')
    assert _figure().value(record) == 120.0
    assert _figure(per_hour=True).value(record) == 30.0
    with pytest.raises(check.MeasurementError, match="has no summary.missing.median"):
        _figure(key=("summary", "missing", "median")).value(record)
    with pytest.raises(check.MeasurementError, match="not a positive number"):
        _figure().value({"summary": {"rate": {"median": None}}})
    with pytest.raises(check.MeasurementError, match="no JSON line"):
        check.last_json_line("Traceback (most recent call last):\n")


def test_table_has_a_row_per_figure_and_names_what_could_not_be_measured():
    comparisons = {"a": check.compare([1000.0, 1200.0, 1100.0], [1050.0, 1300.0, 1100.0])}
    table = check.format_table([_figure("a"), _figure("b")], comparisons,
                               {"b": "REF x: bench/sampling.py exited with status 1\nTraceback ..."})
    lines = table.splitlines()
    assert lines[0] == "| figure | REF median | tree median | ratio median | ratio min–max | verdict |"
    assert lines[2] == "| a: a title (steps/s) | 1,100.0 | 1,100.0 | 1.050 | 1.000–1.083 | ok |"
    assert lines[3] == "| b: b title (steps/s) | | | | | error |"
    assert lines[-1] == "b could not be measured: REF x: bench/sampling.py exited with status 1"
    assert check.exit_status(comparisons, {}) == 0
    assert check.exit_status(comparisons, {"b": "..."}) == 2
    worse = {"c": check.compare([100.0], [80.0])}
    assert check.exit_status({**comparisons, **worse}, {"b": "..."}) == 1


def test_every_figure_runs_an_existing_script_with_options_it_has():
    assert len({figure.name for figure in check.FIGURES}) == len(check.FIGURES)
    for figure in check.FIGURES:
        source = (BENCH / figure.command[0]).read_text()
        for option in (part for part in figure.command[1:] if part.startswith("--")):
            assert re.search(rf"add_argument\(\"{option}\"", source), f"{figure.command[0]} has no {option}"


def test_bad_command_lines_exit_with_status_2_and_say_why(capsys):
    for argv, message in ((["--rounds", "3"], "--ref is required"),
                          (["--ref", "HEAD", "--rounds", "0"], "--rounds must be 1 or more")):
        with pytest.raises(SystemExit) as exit_info:
            check.parse_args(argv)
        assert exit_info.value.code == 2 and message in capsys.readouterr().err
    assert check.main(["--ref", "HEAD", "--only", "pp0"]) == 2
    err = capsys.readouterr().err
    assert "--only 'pp0' matches no figure" in err and "ppo-defaults-torch" in err
    assert check.main(["--ref", "no-such-commit-xyz"]) == 2
    assert "REF 'no-such-commit-xyz' is not a commit" in capsys.readouterr().err
    assert [f.name for f in check.select_figures("ppo,sac")] == [
        "ppo-defaults-torch", "ppo-defaults-tf", "ppo-rl-zoo-torch", "sac-pendulum-torch", "learner-ppo-torch",
        "learner-ppo-tf"]
