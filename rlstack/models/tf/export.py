"""Exporting a TF policy's model: a SavedModel and an ONNX file that run without rlstack.

Both map a batch of flat observations ``obs [B, obs_size]`` (what the policy's
preprocessor writes) to the action distribution's inputs ``output [B, num_outputs]``,
the names classic RLlib's ONNX export used. The SavedModel's ``serving_default``
signature takes ``obs`` and returns ``{"output": ...}``.
"""

from __future__ import annotations

import os
from typing import Any

from rlstack.errors import pip_install
from rlstack.models.tf.framework import tf


class _Exported(tf.Module):
    """A tf.Module that tracks the model's variables and serves its distribution inputs."""

    def __init__(self, model: Any, variables: list, obs_size: int) -> None:
        super().__init__(name="exported_policy_model")
        # Tracked here so that the SavedModel holds them; the function reads them through the model.
        self.model_variables = list(variables)

        @tf.function(input_signature=[tf.TensorSpec([None, obs_size], tf.float32, name="obs")])
        def serve(obs: tf.Tensor) -> dict[str, tf.Tensor]:
            return {"output": tf.identity(model.policy_and_value(obs)[0], name="output")}

        self.serve = serve


def export_tf_model(model: Any, variables: list, obs_size: int, export_dir: str, onnx: int | None = None) -> str:
    """Writes ``model`` to ``export_dir`` and returns what was written.

    Args:
        model: The policy's ModelV2.
        variables: Every ``tf.Variable`` the model reads (so the SavedModel holds them).
        obs_size: Columns of a flat observation.
        export_dir: Directory to write into.
        onnx: An ONNX opset version: writes ``model.onnx`` (input ``obs``, output
            ``output``, batch axis dynamic) with tf2onnx. None: writes a SavedModel into
            ``export_dir`` (``tf.saved_model.load`` reads it without rlstack).

    Raises:
        ImportError: For ``onnx`` without tf2onnx (the ``export`` extra).
    """
    module = _Exported(model, variables, obs_size)
    if not onnx:
        tf.saved_model.save(module, export_dir, signatures={"serving_default": module.serve})
        return export_dir
    try:
        import tf2onnx
    except ImportError as exc:
        raise ImportError(f"Exporting a TF model to ONNX needs tf2onnx: {pip_install('export')}.") from exc
    os.makedirs(export_dir, exist_ok=True)
    path = os.path.join(export_dir, "model.onnx")
    proto, _ = tf2onnx.convert.from_function(
        module.serve, input_signature=[tf.TensorSpec([None, obs_size], tf.float32, name="obs")], opset=int(onnx))
    _rename_output(proto, "output")
    with open(path, "wb") as f:
        f.write(proto.SerializeToString())
    return path


def _rename_output(proto: Any, name: str) -> None:
    # tf2onnx names the graph output after the TF tensor ("Identity:0"); classic RLlib's
    # export, and scripts reading it, use "output".
    old = proto.graph.output[0].name
    if old == name:
        return
    for node in proto.graph.node:
        node.output[:] = [name if out == old else out for out in node.output]
        node.input[:] = [name if inp == old else inp for inp in node.input]
    proto.graph.output[0].name = name
