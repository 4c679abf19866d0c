"""The learning tests' fixture: the outcomes of the pool's runs (tests/learning/session.py
starts the pool as soon as the session knows its tests, so the one-core learning cases
train beside the unit and integration tests)."""

from __future__ import annotations

import pytest

from tests.learning.session import PLUGIN_NAME, LearningSession


@pytest.fixture(scope="module")
def learning_runs(request) -> LearningSession:
    """Where each learning test waits for its case's run (``.wait(case_id)``)."""
    return request.config.pluginmanager.get_plugin(PLUGIN_NAME)
