"""IMPALA with recurrent models: fragments stay in row order for the time-major V-trace;
the model runs over each fragment's sequences (cut at episode ends, fragment starts and
max_seq_len) from the state recorded at their first row."""

from __future__ import annotations

import numpy as np
import pytest

from rlstack.policies.rnn_sequencing import SEQ_START, mark_sequence_starts
from rlstack.sample_batch import SampleBatch
from rlstack.trainers.common.config import merge_config
from tests.helpers.tensors import as_tensors, to_numpy
from tests.unit.test_lstm_models import ACTION_SPACE, MODEL, OBS_SPACE, stepped  # noqa: F401

B = SampleBatch


def _impala(framework, **overrides):
    from rlstack.trainers.impala import DEFAULT_CONFIG

    config = merge_config(DEFAULT_CONFIG, {"seed": 0, "rollout_fragment_length": 7, "model": MODEL, **overrides},
                          "IMPALA")
    if framework == "torch":
        pytest.importorskip("torch")
        from rlstack.trainers.impala.impala_torch_policy import ImpalaTorchPolicy

        return ImpalaTorchPolicy(OBS_SPACE, ACTION_SPACE, config)
    pytest.importorskip("tensorflow")
    from rlstack.trainers.impala.impala_tf_policy import ImpalaTFPolicy

    return ImpalaTFPolicy(OBS_SPACE, ACTION_SPACE, config)


def test_sequences_start_at_episode_changes_fragment_starts_and_max_seq_len():
    # Two fragments of 6 rows; the episode 1 runs across the fragment boundary.
    batch = SampleBatch({B.EPS_ID: np.array([0, 0, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2])})
    starts = mark_sequence_starts(batch, max_seq_len=3, fragment_length=6)[SEQ_START]
    assert np.flatnonzero(starts).tolist() == [0, 2, 5, 6, 9]
    # Without fragments only episode changes and max_seq_len cut.
    assert np.flatnonzero(mark_sequence_starts(batch, max_seq_len=10)[SEQ_START]).tolist() == [0, 2, 9]


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_row_order_outputs_match_acting_step_by_step(framework, stepped):  # noqa: F811
    weights, batch, dist_inputs, values = stepped
    policy = _impala(framework)
    policy.set_weights(weights)
    marked = policy.learner_batch(batch)
    assert marked.count == batch.count and SEQ_START in marked
    out, out_values = (to_numpy(x) for x in policy.model_outputs(as_tensors(framework, marked)))
    np.testing.assert_allclose(out, dist_inputs, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(out_values, values, rtol=1e-4, atol=1e-5)


def test_torch_and_tf_vtrace_losses_agree_with_an_lstm(stepped):  # noqa: F811
    weights, batch, _, _ = stepped
    batch = SampleBatch(dict(batch))
    rng = np.random.default_rng(3)
    batch[B.REWARDS] = rng.normal(0, 1, batch.count).astype(np.float32)
    batch[B.TERMINATEDS] = np.zeros(batch.count, bool)
    batch[B.TRUNCATEDS] = np.zeros(batch.count, bool)
    batch[B.BOOTSTRAP_VALUE] = np.zeros(batch.count, np.float32)
    losses = {}
    for framework in ("torch", "tf"):
        policy = _impala(framework)
        policy.set_weights(weights)
        loss, stats = policy.loss(as_tensors(framework, policy.learner_batch(batch)))
        losses[framework] = (float(to_numpy(loss)), float(to_numpy(stats["entropy"])))
    np.testing.assert_allclose(losses["torch"], losses["tf"], rtol=1e-4)
