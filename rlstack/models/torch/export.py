"""Exporting a torch policy's model: TorchScript and ONNX files that run without rlstack.

Both files map a batch of flat observations ``obs [B, obs_size]`` (what the policy's
preprocessor writes) to the action distribution's inputs ``output [B, num_outputs]``.
The ONNX file has classic RLlib 1.13's inputs and outputs: beside ``obs`` it takes
``state_ins``, the state of a model without one (1.13's scripts pass ``np.zeros(1,
np.float32)``), and gives it back as ``state_outs``.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from rlstack.errors import pip_install


class _DistInputs(nn.Module):
    """``obs -> dist_inputs`` of a ModelV2 (what the exported files compute)."""

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.model = model

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.model.policy_and_value(obs)[0]


class _DistInputsWithState(_DistInputs):
    """The same with 1.13's ONNX signature: ``(obs, state_ins) -> (output, state_outs)``;
    a model without state passes ``state_ins`` through."""

    def forward(self, obs: torch.Tensor, state_ins: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return super().forward(obs), state_ins.clone()


def export_torch_model(model: Any, obs_size: int, export_dir: str, onnx: int | None = None) -> str:
    """Writes ``model`` to ``export_dir`` and returns the file's path.

    Args:
        model: The policy's ModelV2 (a ``torch.nn.Module``).
        obs_size: Columns of a flat observation.
        export_dir: Directory to write into (created if missing).
        onnx: An ONNX opset version: writes ``model.onnx`` (inputs ``obs`` and
            ``state_ins``, outputs ``output`` and ``state_outs``, batch axis dynamic).
            None: writes ``model.pt``, a TorchScript archive (``obs -> output``;
            ``torch.jit.load`` reads it without rlstack).

    Raises:
        ImportError: For ``onnx`` without the ``onnx`` package (the ``export`` extra).
    """
    os.makedirs(export_dir, exist_ok=True)
    device = next(iter(model.parameters()), torch.zeros(0)).device
    wrapper = _DistInputs(model).eval()
    example = torch.zeros(2, obs_size, device=device)
    if onnx:
        try:
            import onnx as _onnx  # noqa: F401 - torch's exporter needs it to write the file
        except ImportError as exc:
            raise ImportError(f"Exporting to ONNX needs the onnx package: {pip_install('export')}.") from exc
        path = os.path.join(export_dir, "model.onnx")
        state = torch.zeros(1, device=device)
        with torch.no_grad(), _quiet_tracing():
            # The TorchScript-based exporter: the graph of a ModelV2 is a plain feed-forward trace.
            torch.onnx.export(_DistInputsWithState(model).eval(), (example, state), path,
                              input_names=["obs", "state_ins"], output_names=["output", "state_outs"],
                              dynamic_axes={"obs": {0: "batch_size"}, "output": {0: "batch_size"},
                                            "state_ins": {0: "state_size"}, "state_outs": {0: "state_size"}},
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
