"""Small torch layers and helpers of classic RLlib's ``models/torch/misc.py``, for
custom models: ``SlimFC``, ``SlimConv2d``, ``normc_initializer``, ``same_padding``, ``valid_padding``."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

_ACTIVATION_MODULES: dict[str, type[nn.Module]] = {
    "relu": nn.ReLU, "tanh": nn.Tanh, "elu": nn.ELU, "swish": nn.SiLU, "silu": nn.SiLU, "sigmoid": nn.Sigmoid,
}


def normc_initializer(std: float = 1.0) -> Callable[[torch.Tensor], None]:
    """An initializer drawing each output unit's weights from a normal distribution and
    scaling them to norm ``std`` (classic RLlib's default dense init).

    Args:
        std: The norm of each output unit's weight vector.

    Returns:
        ``init(weight)``, which fills a ``[out, in]`` weight in place.
    """
    def initializer(tensor: torch.Tensor) -> None:
        with torch.no_grad():
            tensor.normal_(0.0, 1.0)
            tensor.mul_(std / torch.sqrt(tensor.pow(2).sum(1, keepdim=True)))

    return initializer


def _pair(value: int | tuple[int, int] | list[int]) -> tuple[int, int]:
    return (int(value), int(value)) if isinstance(value, int) else (int(value[0]), int(value[1]))


def same_padding_1d(size: int, kernel: int, stride: int) -> tuple[int, int]:
    """TF's "same" padding along one axis: ``(before, after)``, the extra pixel after."""
    total = max((math.ceil(size / stride) - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


def same_padding(in_size: tuple[int, int], filter_size: int | tuple[int, int],
                 stride_size: int | tuple[int, int]) -> tuple[tuple[int, int, int, int], tuple[int, int]]:
    """The padding that keeps ``ceil(size / stride)`` outputs (TF's "same").

    Args:
        in_size: ``(height, width)`` of the input.
        filter_size: The kernel size (an int or ``(h, w)``).
        stride_size: The stride (an int or ``(h, w)``).

    Returns:
        ``((left, right, top, bottom), (out_height, out_width))``; the padding is in
        ``torch.nn.functional.pad``'s order (``nn.ZeroPad2d`` takes it as is).
    """
    (height, width), (kh, kw), (sh, sw) = _pair(in_size), _pair(filter_size), _pair(stride_size)
    top, bottom = same_padding_1d(height, kh, sh)
    left, right = same_padding_1d(width, kw, sw)
    return (left, right, top, bottom), (math.ceil(height / sh), math.ceil(width / sw))


def valid_padding(in_size: tuple[int, int], filter_size: int | tuple[int, int],
                  stride_size: int | tuple[int, int]) -> tuple[tuple[int, int, int, int], tuple[int, int]]:
    """No padding ("valid"): returns ``((0, 0, 0, 0), (out_height, out_width))``."""
    (height, width), (kh, kw), (sh, sw) = _pair(in_size), _pair(filter_size), _pair(stride_size)
    return (0, 0, 0, 0), ((height - kh) // sh + 1, (width - kw) // sw + 1)


def _activation(activation_fn: str | type[nn.Module] | None) -> list[nn.Module]:
    # The activation layer a name or class asks for ([] for "linear" / None).
    if isinstance(activation_fn, str) and activation_fn != "linear":
        if activation_fn not in _ACTIVATION_MODULES:
            raise ValueError(f"Unknown activation_fn {activation_fn!r}; allowed: "
                             f"{', '.join(sorted(_ACTIVATION_MODULES))}, linear, None, or an nn.Module class.")
        return [_ACTIVATION_MODULES[activation_fn]()]
    return [activation_fn()] if isinstance(activation_fn, type) else []


class SlimFC(nn.Module):
    """A dense layer with an initializer and an optional activation.

    Args:
        in_size: Input features.
        out_size: Output features.
        initializer: ``init(weight)`` filling the ``[out, in]`` weight in place (e.g.
            :func:`normc_initializer`); None uses Xavier-uniform.
        activation_fn: ``"relu"``, ``"tanh"``, ``"elu"``, ``"swish"``, ``"sigmoid"``,
            ``"linear"``/None, or an ``nn.Module`` class.
        use_bias: Whether the layer has a bias.
        bias_init: The bias's initial value.

    Raises:
        ValueError: For an unknown activation name.
    """

    def __init__(self, in_size: int, out_size: int, initializer: Callable[[torch.Tensor], None] | None = None,
                 activation_fn: str | type[nn.Module] | None = None, use_bias: bool = True,
                 bias_init: float = 0.0) -> None:
        super().__init__()
        linear = nn.Linear(in_size, out_size, bias=use_bias)
        (initializer or nn.init.xavier_uniform_)(linear.weight)
        if use_bias:
            nn.init.constant_(linear.bias, bias_init)
        layers: list[nn.Module] = [linear]
        layers += _activation(activation_fn)
        self._model = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Applies the layer (and activation) to ``x [B, in_size]``."""
        return self._model(x)


class SlimConv2d(nn.Module):
    """A 2-D convolution with optional zero padding, an initializer and an activation
    (classic RLlib's ``SlimConv2d``; inputs are ``[B, C, H, W]``).

    Args:
        in_channels: Input channels.
        out_channels: Output channels (filters).
        kernel: The kernel size, an int or ``(height, width)``.
        stride: The stride, an int or ``(height, width)``.
        padding: ``(left, right, top, bottom)`` zero padding (as :func:`same_padding`
            returns), an int for all four sides, or None for none.
        initializer: ``init(weight)`` filling the weight in place; ``"default"`` or None
            uses Xavier-uniform.
        activation_fn: As :class:`SlimFC`'s; ``"default"`` is ReLU, as classic RLlib's.
        bias_init: The bias's initial value.

    Raises:
        ValueError: For an unknown activation name.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel: int | tuple[int, int],
                 stride: int | tuple[int, int], padding: int | tuple[int, int, int, int] | None,
                 initializer: Callable[[torch.Tensor], None] | str | None = "default",
                 activation_fn: str | type[nn.Module] | None = "default", bias_init: float = 0.0) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        if padding:
            layers.append(nn.ZeroPad2d(padding))
        conv = nn.Conv2d(in_channels, out_channels, kernel, stride)
        init = nn.init.xavier_uniform_ if initializer in ("default", None) else initializer
        init(conv.weight)
        nn.init.constant_(conv.bias, bias_init)
        layers.append(conv)
        if activation_fn == "default":
            activation_fn = "relu"
        layers += _activation(activation_fn)
        self._model = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Applies padding, convolution and activation to ``x [B, C, H, W]``."""
        return self._model(x)
