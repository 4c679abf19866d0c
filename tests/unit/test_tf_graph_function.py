"""GraphFunction (rlstack/models/tf/graph_function.py): a fixed-signature tf.function called
through its concrete function's flat entry point gives tf.function's results, traces once,
and refuses arguments that do not fit its signature with an error naming the argument."""

from __future__ import annotations

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from rlstack.models.tf.graph_function import GraphFunction  # noqa: E402

SIGNATURE = [{"b": tf.TensorSpec([None, 4], tf.float32), "a": tf.TensorSpec([None], tf.int64)},
             tf.TensorSpec([], tf.float32)]


def _fn(kernel: tf.Variable):
    def fn(batch, scale):
        # Different results per key, so that feeding the dict's tensors in the wrong
        # order could not go unnoticed.
        return {"y": tf.matmul(batch["b"], kernel) * scale, "n": tf.reduce_sum(batch["a"]) + 1}
    return fn


def test_matches_tf_function_and_traces_once():
    kernel = tf.Variable(np.arange(12, dtype=np.float32).reshape(4, 3))
    fast = GraphFunction(_fn(kernel), SIGNATURE)
    reference = tf.function(_fn(kernel), input_signature=SIGNATURE, autograph=False)
    rng = np.random.default_rng(0)
    for rows in (1, 5, 9):
        batch = {"a": tf.constant(rng.integers(0, 10, rows)), "b": tf.constant(rng.normal(size=(rows, 4)), tf.float32)}
        got, expected = fast(batch, tf.constant(0.5)), reference(batch, tf.constant(0.5))
        np.testing.assert_allclose(got["y"].numpy(), expected["y"].numpy(), rtol=1e-6)
        assert int(got["n"]) == int(expected["n"])
    kernel.assign(tf.zeros([4, 3]))  # captured variables are read at call time, not traced in
    assert not fast(batch, tf.constant(2.0))["y"].numpy().any()
    assert fast.function.experimental_get_tracing_count() == 1
    # A Python number is converted to the signature's dtype, as tf.function would.
    np.testing.assert_allclose(fast(batch, 3)["y"].numpy(), 0.0)


def test_a_function_of_no_arguments():
    variable = tf.Variable([1.0, 2.0])
    read = GraphFunction(lambda: tf.identity(variable) * 2, [])
    np.testing.assert_allclose(read().numpy(), [2.0, 4.0])
    variable.assign([3.0, 4.0])
    np.testing.assert_allclose(read().numpy(), [6.0, 8.0])


def test_arguments_that_do_not_fit_the_signature_are_refused():
    fast = GraphFunction(_fn(tf.Variable(tf.ones([4, 3]))), SIGNATURE)
    good = {"a": tf.constant([1, 2], tf.int64), "b": tf.ones([2, 4])}
    fast(good, tf.constant(1.0))
    with pytest.raises(TypeError, match=r"argument 1 has shape \(2, 5\).*\(None, 4\)"):
        fast({"a": good["a"], "b": tf.ones([2, 5])}, tf.constant(1.0))
    with pytest.raises(TypeError, match="takes 3 tensors.*got 2"):
        fast({"b": good["b"]}, tf.constant(1.0))
    with pytest.raises((TypeError, ValueError)):
        fast({"a": tf.constant([1.5, 2.5]), "b": good["b"]}, tf.constant(1.0))  # float where int64 is due
