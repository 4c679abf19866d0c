"""``tf.function`` with a fixed signature, called without its per-call Python dispatch.

Calling a ``tf.function`` binds the arguments to its signature, builds their trace type,
looks the concrete function up in its cache and casts every argument on the way, before
any op runs. rlstack's graphs all have a fixed input signature (one concrete function
each), and an off-policy training step calls three or four of them (the SGD loop, the
target update, the weights read for the acting copy, the acting itself), so that dispatch
was a large share of a TF DDPG step on Pendulum (BENCHMARKS.md).

:class:`GraphFunction` traces once, keeps the concrete function, and calls its flat entry
point with the arguments flattened the way TensorFlow flattens them (dicts by sorted key).
Arguments are checked against the traced inputs (count and dtype, a cheap Python loop)
so that a wrong call fails with a clear error rather than inside a kernel.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rlstack.models.tf.framework import tf


class GraphFunction:
    """A ``tf.function`` of ``fn`` with a fixed ``input_signature``, traced on first call
    and then called through its concrete function.

    Args:
        fn: The Python function.
        input_signature: ``tf.TensorSpec`` structures, one per argument (``[]``: no arguments).
        autograph: Whether TensorFlow rewrites Python control flow on tensors.
    """

    def __init__(self, fn: Callable, input_signature: list | tuple, autograph: bool = False) -> None:
        self.function = tf.function(fn, input_signature=input_signature, autograph=autograph)
        self._concrete = None
        self._specs: list[tf.TensorSpec] = []

    def get_concrete_function(self):  # noqa: ANN201 - a tf ConcreteFunction
        """The traced graph (traced on first use)."""
        if self._concrete is None:
            self._concrete = self.function.get_concrete_function()
            self._specs = tf.nest.flatten(self._concrete.structured_input_signature, expand_composites=True)
        return self._concrete

    def __call__(self, *args: Any) -> Any:
        concrete = self.get_concrete_function()
        flat = tf.nest.flatten(args, expand_composites=True)
        if len(flat) != len(self._specs):
            raise TypeError(f"{self.function.__name__} takes {len(self._specs)} tensors (its signature "
                            f"{concrete.structured_input_signature}), got {len(flat)}")
        for i, (value, spec) in enumerate(zip(flat, self._specs)):
            if not isinstance(value, tf.Tensor) or value.dtype != spec.dtype:
                flat[i] = value = tf.convert_to_tensor(value, dtype=spec.dtype)
            if not spec.shape.is_compatible_with(value.shape):
                raise TypeError(f"{self.function.__name__}: argument {i} has shape {value.shape}, its "
                                f"signature says {spec.shape} ({concrete.structured_input_signature})")
        return concrete._call_flat(flat, concrete.captured_inputs)  # noqa: SLF001 - see the module doc
