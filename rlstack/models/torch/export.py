"""Exporting a torch policy's model: TorchScript and ONNX files that run without rlstack.

Both files map a batch of flat observations ``obs [B, obs_size]`` (what the policy's
preprocessor writes) to the action distribution's inputs ``output [B, num_outputs]``,
the names classic RLlib's ONNX export used.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn


class _DistInputs(nn.Module):
    """``obs -> dist_inputs`` of a ModelV2 (what the exported files compute)."""

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.model = model

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.model.policy_and_value(obs)[0]


def export_torch_model(model: Any, obs_size: int, export_dir: str, onnx: int | None = None) -> str:
    """Writes ``model`` to ``export_dir`` and returns the file's path.

    Args:
        model: The policy's ModelV2 (a ``torch.nn.Module``).
        obs_size: Columns of a flat observation.
        export_dir: Directory to write into (created if missing).
        onnx: An ONNX opset version: writes ``model.onnx`` (input ``obs``, output
            ``output``, batch axis dynamic). None: writes ``model.pt``, a TorchScript
            archive (``torch.jit.load`` reads it without rlstack).

    Raises:
        ImportError: For ``onnx`` without the ``onnx`` package (``pip install 'rlstack-ray[export] @ git+https://github.com/rlstack-dev/rlstack'``).
    """
    os.makedirs(export_dir, exist_ok=True)
    device = next(iter(model.parameters()), torch.zeros(0)).device
    wrapper = _DistInputs(model).eval()
    example = torch.zeros(2, obs_size, device=device)
    if onnx:
        try:
            import onnx as _onnx  # noqa: F401 - torch's exporter needs it to write the file
        except ImportError as exc:
            raise ImportError("Exporting to ONNX needs the onnx package: pip install 'rlstack-ray[export] @ git+https://github.com/rlstack-dev/rlstack'.") from exc
        path = os.path.join(export_dir, "model.onnx")
        with torch.no_grad(), _quiet_tracing():
            # The TorchScript-based exporter: the graph of a ModelV2 is a plain feed-forward trace.
            torch.onnx.export(wrapper, (example,), path, input_names=["obs"], output_names=["output"],
                              dynamic_axes={"obs": {0: "batch_size"}, "output": {0: "batch_size"}},
                              opset_version=int(onnx), dynamo=False)
        return path
    path = os.path.join(export_dir, "model.pt")
    with torch.no_grad(), _quiet_tracing():
        traced = torch.jit.trace(wrapper, (example,), check_trace=False)
    traced.save(path)
    return path


@contextlib.contextmanager
def _quiet_tracing() -> Iterator[None]:
    # torch 2.13 marks tracing deprecated (its replacements need a compiler stack), and
    # warns about Python-side shape checks in restore_original_dimensions, which are
    # constant for a given observation space and so trace correctly.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        yield
