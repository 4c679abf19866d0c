"""Shared fixtures: one local Ray for the whole session, started only when a test needs it."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Ray's token authentication prints a warning and writes to ~/.ray on every start; the
# tests start a private local instance only.
os.environ.setdefault("RAY_AUTH_MODE", "disabled")


@pytest.fixture(scope="session")
def ray_local():
    """A local Ray with 2 CPUs and no dashboard, shared by every test that asks for it."""
    import ray

    if not ray.is_initialized():
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture
def tmp_logdir(tmp_path, monkeypatch):
    """Runs the test with Ray Tune's default results dir under tmp_path."""
    monkeypatch.setenv("TUNE_RESULT_DIR", str(tmp_path / "ray_results"))
    return tmp_path
