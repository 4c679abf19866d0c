"""Classic RLlib's ``models/utils.py``: an activation or initializer by name, for a
framework, and the default conv filters for an image size. Custom models of 1.x import
these; the framework is imported inside the call that names it."""

from __future__ import annotations

from typing import Any

from rlstack.models.specs import default_conv_filters

_ACTIVATIONS = ("relu", "tanh", "elu", "swish", "silu", "sigmoid", "linear")


def get_activation_fn(name: str | None = None, framework: str = "tf") -> Any:
    """The activation called ``name`` in ``framework``: for torch an ``nn.Module`` class
    (``nn.ReLU``), for TF a function (``tf.nn.relu``); None for ``None`` / ``"linear"``.

    Raises:
        ValueError: For a name or framework it does not know.
    """
    if name in (None, "linear"):
        return None
    if name not in _ACTIVATIONS:
        raise ValueError(f"Unknown activation {name!r} for framework={framework!r}; allowed: "
                         f"{', '.join(_ACTIVATIONS)} or None.")
    if framework == "torch":
        from torch import nn

        return {"relu": nn.ReLU, "tanh": nn.Tanh, "elu": nn.ELU, "swish": nn.SiLU, "silu": nn.SiLU,
                "sigmoid": nn.Sigmoid}[name]
    if framework in ("tf", "tf2", "tfe"):
        import tensorflow as tf

        return {"relu": tf.nn.relu, "tanh": tf.nn.tanh, "elu": tf.nn.elu, "swish": tf.nn.silu, "silu": tf.nn.silu,
                "sigmoid": tf.nn.sigmoid}[name]
    raise ValueError(f"Unknown framework {framework!r} for get_activation_fn; use 'torch' or 'tf'.")


def get_filter_config(shape: Any) -> list:
    """The default ``conv_filters`` for an image of ``shape`` (``[height, width, channels]``,
    or channels first): classic RLlib's for 96x96, 84x84, 42x42 and 10x10 images.

    Raises:
        ValueError: For another size, saying to give ``conv_filters`` in the model config.
    """
    shape = [int(size) for size in shape]
    filters = None
    if len(shape) in (2, 3):
        filters = default_conv_filters(shape[0], shape[1]) or (default_conv_filters(shape[1], shape[2])
                                                               if len(shape) == 3 else None)
    if filters is None:
        raise ValueError(f"No default conv_filters for an observation of shape {shape}: give model.conv_filters "
                         "([[out_channels, [kernel_h, kernel_w], stride], ...]) in the model config.")
    return [list(layer) for layer in filters]


def get_initializer(name: str | None, framework: str = "tf") -> Any:
    """The weight initializer called ``name`` (``"xavier_uniform"``, ``"xavier_normal"``,
    ...): for torch an ``nn.init`` function, for TF a Keras initializer; None for None.

    Raises:
        ValueError: For a name the framework does not have.
    """
    if name is None:
        return None
    if framework == "torch":
        from torch import nn

        found = getattr(nn.init, f"{name}_", None) or getattr(nn.init, name, None)
        if found is None:
            raise ValueError(f"Unknown initializer {name!r} for torch (torch.nn.init has none of that name).")
        return found
    import tensorflow as tf

    aliases = {"xavier_uniform": "glorot_uniform", "xavier_normal": "glorot_normal"}
    try:
        return tf.keras.initializers.get(aliases.get(name, name))
    except ValueError as exc:
        raise ValueError(f"Unknown initializer {name!r} for TensorFlow ({exc}).") from exc
