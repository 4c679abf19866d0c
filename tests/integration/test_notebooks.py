"""The notebooks in examples/ run top to bottom in a fresh kernel, with small stop
criteria put in their parameter cell (the cell tagged "parameters", as papermill does)."""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("matplotlib")
pytest.importorskip("moviepy")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

PARAMETERS = {
    "quickstart.ipynb": 'STOP_REWARD = 30\nMAX_ITERATIONS = 3\nFRAMEWORK = "torch"',
    "tune_sweep.ipynb": 'LEARNING_RATES = [0.001, 0.0003]\nSTOP = {"timesteps_total": 1000}\nFRAMEWORK = "torch"',
    "compare.ipynb": ('ALGOS = ["PPO", "PG"]\nFRAMEWORKS = ("torch",)\nSEEDS = 2\nENV = "CartPole-v1"\n'
                      'STOP = {"timesteps_total": 400}\nCONFIG = {"num_workers": 0, "train_batch_size": 200}\n'
                      'OUT = "compare-results"'),
}


def run(name: str, workdir: Path):
    notebook = nbformat.read(EXAMPLES / name, as_version=4)
    cells = [c for c in notebook.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(cells) == 1, f"{name} needs exactly one cell tagged 'parameters'"
    cells[0].source = PARAMETERS[name]
    # The kernel inherits this environment: a notebook's own ray.init() then starts a
    # single-node Ray that listens on 127.0.0.1 only.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3",
                                resources={"metadata": {"path": str(workdir)}}).execute()
    return notebook


def outputs(notebook, kind: str) -> list:
    """Every output of the notebook's cells of one MIME type (``text/plain`` includes streams)."""
    found = []
    for cell in notebook.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream" and kind == "text/plain":
                found.append(out["text"])
            elif kind in out.get("data", {}):
                found.append(out["data"][kind])
    return found


def test_every_example_notebook_has_a_parameter_cell_a_colab_badge_and_a_colab_install_cell():
    assert sorted(p.name for p in EXAMPLES.glob("*.ipynb")) == sorted(PARAMETERS)
    for name in PARAMETERS:
        cells = nbformat.read(EXAMPLES / name, as_version=4).cells
        assert f"colab.research.google.com/github/rlstack-dev/rlstack/blob/main/examples/{name})" in cells[0].source
        first_code = next(c for c in cells if c.cell_type == "code")
        # This project's distribution from its repository, never the unrelated `rlstack` on PyPI.
        assert "google.colab" in first_code.source
        assert '%pip install -q "rlstack-ray[torch,plot,video] @ git+https://github.com/rlstack-dev/rlstack"' in \
            first_code.source


def test_quickstart_trains_plots_and_shows_an_episode(tmp_path):
    notebook = run("quickstart.ipynb", tmp_path)
    text = "".join(outputs(notebook, "text/plain"))
    assert "iteration   1: mean reward" in text and "episode return:" in text and "checkpoint_" in text
    assert len(outputs(notebook, "image/png")) == 1  # the learning curve
    assert any("<video" in html for html in outputs(notebook, "text/html"))
    assert (tmp_path / "cartpole_episode.mp4").stat().st_size > 0


def test_tune_sweep_runs_the_grid_and_watches_the_best_trial(tmp_path):
    notebook = run("tune_sweep.ipynb", tmp_path)
    text = "".join(outputs(notebook, "text/plain"))
    assert "best lr:" in text and "episode return:" in text
    assert len(outputs(notebook, "image/png")) == 1
    assert any("<video" in html for html in outputs(notebook, "text/html"))


def test_compare_tabulates_and_plots_inline(tmp_path):
    notebook = run("compare.ipynb", tmp_path)
    tables = outputs(notebook, "text/html")
    assert any("env steps to reward" in t and "PPO" in t and "PG" in t for t in tables)
    assert len(outputs(notebook, "image/png")) == 2
    assert (tmp_path / "compare-results" / "report.html").exists()
