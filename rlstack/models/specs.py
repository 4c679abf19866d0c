"""Model specs: the built-in networks as framework-free data, and their initial weights.

A :class:`ModelSpec` (or :class:`QModelSpec`) names every layer with its shape and
activation; the initial weights are drawn with numpy in one canonical layout (dense
kernels ``[in, out]``, conv kernels ``[kh, kw, in, out]``). ``models/torch``,
``models/tf`` and ``models/numpy`` build the same layers from a spec, so a torch and a
TF policy built with the same seed start from the same weights, and weights move
between frameworks unchanged. ``catalog.py`` decides which spec a pair of spaces gets.

Network shape (classic RLlib semantics):

* vector observations: an MLP of ``fcnet_hiddens`` with ``fcnet_activation``;
* images (rank-3 Box, HWC): a CNN of ``conv_filters`` (``[[out_channels, [kh, kw],
  stride], ...]``, "same" padding except the last layer) with ``conv_activation``; a
  default is chosen from the image size when ``conv_filters`` is None;
* Discrete / MultiDiscrete observations: one-hot vectors;
* Dict / Tuple observations: each image component through its own CNN, the other
  components concatenated through the ``fcnet_hiddens`` MLP, then everything concatenated
  through ``post_fcnet_hiddens``;
* heads: ``logits`` (the action distribution's inputs) and ``value_out``. With
  ``vf_share_layers`` False (the default) the value head has its own copy of the encoder
  (layer names prefixed ``vf_``);
* ``use_lstm`` (1.13's LSTM wrapper): the encoder, then one LSTM of ``lstm_cell_size``
  units (:class:`LSTMSpec`, weights ``lstm/kernel [in, 4 cell]``,
  ``lstm/recurrent_kernel [cell, 4 cell]``, ``lstm/bias [4 cell]``, gates in Keras's
  order input, forget, cell, output), then both heads on the LSTM's output; no separate
  value encoder. The state is ``[h, c]``, each ``[cell]`` per row, zeros at an
  episode's start. With ``lstm_use_prev_action`` / ``lstm_use_prev_reward`` the LSTM's
  input is the features followed by the previous action and reward, encoded
  (:class:`~rlstack.models.prev_inputs.PrevInputsSpec`, ``ModelSpec.prev``), and its
  kernel has that many more input rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from rlstack.errors import ConfigError
from rlstack.models.preprocessors import Component
from rlstack.models.prev_inputs import PrevInputsSpec


# Default CNN filters by (height, width), from classic RLlib's defaults for Atari sizes.
_DEFAULT_FILTERS = {
    (96, 96): [[16, [8, 8], 4], [32, [4, 4], 2], [256, [11, 11], 2]],
    (84, 84): [[16, [8, 8], 4], [32, [4, 4], 2], [256, [11, 11], 1]],
    (42, 42): [[16, [4, 4], 2], [32, [4, 4], 2], [256, [11, 11], 1]],
    (10, 10): [[16, [5, 5], 2], [32, [5, 5], 2]],
}


@dataclass(frozen=True)
class LayerSpec:
    """One dense or conv layer.

    Attributes:
        name: Canonical name; weights are ``"<name>/kernel"`` and ``"<name>/bias"``.
        kind: ``"dense"`` or ``"conv"``.
        kernel_shape: ``(in, out)`` for dense, ``(kh, kw, in, out)`` for conv.
        activation: One of catalog.ACTIVATIONS.
        stride: Conv stride.
        padding: ``"same"`` (TF semantics) or ``"valid"``.
        init_std: Scale of the normalised-column init for dense layers; for a noisy
            layer's sigma weights, ``sigma0``.
        init: ``"normc"`` (classic RLlib's normalised columns, zero bias), or for a
            factorised noisy layer (Fortunato et al. 2018, section 3.2) with ``p`` inputs:
            ``"noisy_mu"`` (kernel and bias from ``U(-1/sqrt(p), 1/sqrt(p))``) or
            ``"noisy_sigma"`` (kernel and bias ``init_std / sqrt(p)``).
    """

    name: str
    kind: str
    kernel_shape: tuple[int, ...]
    activation: str = "linear"
    stride: int = 1
    padding: str = "valid"
    init_std: float = 1.0
    init: str = "normc"


@dataclass(frozen=True)
class ImageBranch:
    """A CNN over one image component of the flat observation."""

    component: Component
    convs: tuple[LayerSpec, ...]
    out_size: int


@dataclass(frozen=True)
class EncoderSpec:
    """Turns a flat observation into features.

    Attributes:
        images: One CNN per image component.
        vector_columns: Flat-observation columns of the non-image components.
        fc: Dense layers over those columns.
        post_fc: Dense layers over the concatenation of CNN outputs and ``fc`` output.
        out_size: Size of the features.
    """

    images: tuple[ImageBranch, ...]
    vector_columns: tuple[int, ...]
    fc: tuple[LayerSpec, ...]
    post_fc: tuple[LayerSpec, ...]
    out_size: int

    @property
    def layers(self) -> list[LayerSpec]:
        """Every layer of the encoder, in build order."""
        convs = [conv for branch in self.images for conv in branch.convs]
        return [*convs, *self.fc, *self.post_fc]

    @property
    def column_index(self) -> slice | list[int]:
        """``vector_columns`` as an index into a flat observation's second axis: a
        slice when they are contiguous (a view, no copy), else the list."""
        columns = self.vector_columns
        if columns and columns == tuple(range(columns[0], columns[0] + len(columns))):
            return slice(columns[0], columns[0] + len(columns))
        return list(columns)


@dataclass(frozen=True)
class LSTMSpec:
    """The LSTM of a ``use_lstm`` model (1.13's LSTM wrapper around the encoder).

    Attributes:
        in_size: Size of its input (the encoder's features, then the encoded previous
            action and reward when the model reads them).
        cell_size: ``lstm_cell_size``: units, and the size of each state tensor.
        max_seq_len: ``max_seq_len``: the longest sequence a train batch holds.
    """

    in_size: int
    cell_size: int
    max_seq_len: int

    @property
    def weight_shapes(self) -> dict[str, tuple[int, ...]]:
        """The canonical weights: gates in the order input, forget, cell, output."""
        four = 4 * self.cell_size
        return {"lstm/kernel": (self.in_size, four), "lstm/recurrent_kernel": (self.cell_size, four),
                "lstm/bias": (four,)}


@dataclass(frozen=True)
class ModelSpec:
    """The complete built-in network: encoder(s) and heads."""

    obs_size: int
    encoder: EncoderSpec
    vf_encoder: EncoderSpec | None
    # None when the model was asked for no outputs (classic RLlib's num_outputs=None/0:
    # the outputs are the last hidden layer's features).
    logits: LayerSpec | None
    value_out: LayerSpec
    free_log_std: bool
    action_dim: int
    model_config: dict = field(default_factory=dict, compare=False)
    # use_lstm: the LSTM between the encoder and the heads (None: a feed-forward model).
    lstm: LSTMSpec | None = None
    # lstm_use_prev_action / _reward: what the LSTM reads besides the features (None: nothing).
    prev: PrevInputsSpec | None = None

    @property
    def layers(self) -> list[LayerSpec]:
        """Every dense or conv layer of the model, in build order (the LSTM's weights are
        :attr:`lstm`'s)."""
        vf = self.vf_encoder.layers if self.vf_encoder is not None else []
        logits = [self.logits] if self.logits is not None else []
        return [*self.encoder.layers, *vf, *logits, self.value_out]

    @property
    def num_outputs(self) -> int:
        """Size of the model's output: the distribution inputs (with the free log stds),
        or the features when there is no ``logits`` layer."""
        if self.logits is None:
            return self.encoder.out_size if self.lstm is None else self.lstm.cell_size
        return self.logits.kernel_shape[1] + (self.action_dim if self.free_log_std else 0)


@dataclass(frozen=True)
class QModelSpec:
    """A Q-network for Discrete actions (DQN family): the encoder, then an advantage
    stream of ``hiddens`` into one output per action and, when dueling (Wang et al.
    2016), a state-value stream of the same shape into one output;
    ``Q = V + A - mean(A)``.
    """

    obs_size: int
    encoder: EncoderSpec
    advantage_hiddens: tuple[LayerSpec, ...]
    advantage_out: LayerSpec
    value_hiddens: tuple[LayerSpec, ...]
    value_out: LayerSpec | None
    num_actions: int
    model_config: dict = field(default_factory=dict, compare=False)
    # Distributional Q (C51, Bellemare et al. 2017): each action's head outputs
    # ``num_atoms`` logits over the support ``linspace(v_min, v_max, num_atoms)``.
    num_atoms: int = 1
    v_min: float = -10.0
    v_max: float = 10.0
    # Noisy heads (Fortunato et al. 2018): each head layer ``<name>`` has a sibling
    # ``<name>_sigma`` in ``noise_layers`` holding its noise scales.
    noise_layers: tuple[LayerSpec, ...] = ()
    # The policy-gradient spec's fields that generic model code reads.
    vf_encoder: None = None
    free_log_std: bool = False
    action_dim: int = 0
    lstm: None = None
    prev: None = None

    @property
    def dueling(self) -> bool:
        """Whether the network has a separate state-value stream."""
        return self.value_out is not None

    @property
    def layers(self) -> list[LayerSpec]:
        """Every layer of the model, in build order."""
        value = [*self.value_hiddens, self.value_out] if self.value_out is not None else []
        return [*self.encoder.layers, *self.advantage_hiddens, self.advantage_out, *value, *self.noise_layers]

    @property
    def noisy(self) -> bool:
        """Whether the head layers are factorised-Gaussian noisy layers."""
        return bool(self.noise_layers)

    @property
    def support(self) -> np.ndarray:
        """The atoms ``z_i`` of the value distribution, ``float32 [num_atoms]``."""
        return np.linspace(self.v_min, self.v_max, self.num_atoms, dtype=np.float32)


def plain_dense(spec: ModelSpec) -> bool:
    """Whether ``spec`` is dense layers only, each tanh, relu or linear, with linear heads
    and no free log-std: the models whose gradient PPO's torch closed form
    (``models/torch/closed_form.py``) writes out by hand."""
    if spec.free_log_std or spec.logits is None:
        return False
    for encoder in (spec.encoder, spec.vf_encoder):
        if encoder is None:
            continue
        if encoder.images or not encoder.vector_columns:
            return False
        if any(layer.kind != "dense" or layer.activation not in ("tanh", "relu", "linear")
               for layer in (*encoder.fc, *encoder.post_fc)):
            return False
    return spec.logits.activation == "linear" and spec.value_out.activation == "linear"


def twin_encoders(spec: ModelSpec) -> bool:
    """Whether the value encoder is separate and of the policy encoder's shape (the
    default, ``vf_share_layers=False``): the same columns through dense layers of the
    same shapes and activations, so both can run as one stacked product per layer."""
    pi, vf = spec.encoder, spec.vf_encoder
    if vf is None or pi.images or vf.images:
        return False
    layers_pi, layers_vf = (*pi.fc, *pi.post_fc), (*vf.fc, *vf.post_fc)
    return (bool(layers_pi) and pi.vector_columns == vf.vector_columns
            and [(layer.kernel_shape, layer.activation) for layer in layers_pi]
            == [(layer.kernel_shape, layer.activation) for layer in layers_vf])


def _conv_out(size: int, kernel: int, stride: int, padding: str) -> int:
    if padding == "same":
        return math.ceil(size / stride)
    return (size - kernel) // stride + 1


def default_conv_filters(height: int, width: int) -> list | None:
    """Classic RLlib's default ``conv_filters`` for an image of this size, or None."""
    return _DEFAULT_FILTERS.get((height, width))


def _filters_for(shape: tuple[int, ...], model_config: dict) -> list:
    filters = model_config.get("conv_filters")
    if filters is not None:
        return filters
    return default_conv_filters(shape[0], shape[1]) or [[16, [3, 3], 2], [32, [3, 3], 2]]


def _image_branch(index: int, comp: Component, model_config: dict, prefix: str) -> ImageBranch:
    filters = _filters_for(comp.shape, model_config)
    h, w, channels = comp.shape
    convs = []
    for i, spec in enumerate(filters):
        try:
            out_ch, (kh, kw), stride = int(spec[0]), (int(spec[1][0]), int(spec[1][1])), int(spec[2])
        except (TypeError, ValueError, IndexError) as exc:
            raise ConfigError(
                f"model.conv_filters entry {spec!r} is malformed; each entry is "
                "[out_channels, [kernel_h, kernel_w], stride], e.g. [16, [8, 8], 4]."
            ) from exc
        padding = "valid" if i == len(filters) - 1 else "same"
        new_h, new_w = _conv_out(h, kh, stride, padding), _conv_out(w, kw, stride, padding)
        if new_h < 1 or new_w < 1:
            raise ConfigError(
                f"model.conv_filters {filters} do not fit images of shape {comp.shape}: layer {i} "
                f"(kernel {kh}x{kw}, stride {stride}) sees only {h}x{w} pixels. Give conv_filters "
                "with smaller kernels or strides."
            )
        convs.append(
            LayerSpec(f"{prefix}cnn{index}_{i}", "conv", (kh, kw, channels, out_ch),
                      model_config["conv_activation"], stride, padding)
        )
        h, w, channels = new_h, new_w, out_ch
    return ImageBranch(comp, tuple(convs), h * w * channels)


def dense_stack(prefix: str, in_size: int, hiddens: list, activation: str) -> tuple[tuple[LayerSpec, ...], int]:
    layers = []
    for i, size in enumerate(hiddens):
        layers.append(LayerSpec(f"{prefix}_{i}", "dense", (in_size, int(size)), activation))
        in_size = int(size)
    return tuple(layers), in_size


def build_encoder(layout: list[Component], model_config: dict, prefix: str) -> EncoderSpec:
    images = []
    vector_columns: list[int] = []
    for comp in layout:
        if comp.kind == "image":
            images.append(_image_branch(len(images), comp, model_config, prefix))
        else:
            vector_columns.extend(range(comp.start, comp.start + comp.size))
    fc: tuple[LayerSpec, ...] = ()
    fc_out = 0
    if vector_columns:
        fc, fc_out = dense_stack(f"{prefix}fc", len(vector_columns), model_config["fcnet_hiddens"],
                                  model_config["fcnet_activation"])
    concat = fc_out + sum(branch.out_size for branch in images)
    post_fc, out_size = dense_stack(f"{prefix}post_fc", concat, model_config["post_fcnet_hiddens"],
                                     model_config["post_fcnet_activation"])
    return EncoderSpec(tuple(images), tuple(vector_columns), fc, post_fc, out_size)


def initial_weights(spec: ModelSpec | QModelSpec, seed: int | None) -> dict[str, np.ndarray]:
    """Draws the initial weights of ``spec`` in the canonical layout.

    Dense kernels use classic RLlib's normalised-columns init (each output column scaled
    to norm ``init_std``); conv kernels use Glorot-uniform; biases start at zero.

    Args:
        spec: The model.
        seed: Seed of the draw (None: random).

    Returns:
        ``{"<layer>/kernel": ..., "<layer>/bias": ..., ["log_std": ...]}`` as float32.
    """
    rng = np.random.default_rng(seed)
    weights: dict[str, np.ndarray] = {}
    for layer in spec.layers:
        shape = layer.kernel_shape
        if layer.init in ("noisy_mu", "noisy_sigma"):
            bound = 1.0 / math.sqrt(shape[0])
            if layer.init == "noisy_mu":
                kernel, bias = rng.uniform(-bound, bound, size=shape), rng.uniform(-bound, bound, size=shape[-1])
            else:
                kernel, bias = np.full(shape, layer.init_std * bound), np.full(shape[-1], layer.init_std * bound)
            weights[f"{layer.name}/kernel"] = kernel.astype(np.float32)
            weights[f"{layer.name}/bias"] = bias.astype(np.float32)
            continue
        if layer.kind == "dense":
            kernel = rng.standard_normal(shape)
            kernel *= layer.init_std / np.sqrt(np.square(kernel).sum(axis=0, keepdims=True))
        else:
            kh, kw, cin, cout = shape
            limit = math.sqrt(6.0 / (kh * kw * (cin + cout)))
            kernel = rng.uniform(-limit, limit, size=shape)
        weights[f"{layer.name}/kernel"] = kernel.astype(np.float32)
        weights[f"{layer.name}/bias"] = np.zeros(shape[-1], dtype=np.float32)
    if spec.free_log_std:
        weights["log_std"] = np.zeros(spec.action_dim, dtype=np.float32)
    if spec.lstm is not None:
        weights.update(lstm_initial_weights(spec.lstm, rng))
    return weights


def lstm_initial_weights(lstm: LSTMSpec, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Keras's LSTM init (as 1.13's TF wrapper had it): a Glorot-uniform input kernel, an
    orthogonal recurrent kernel, zero biases but 1.0 on the forget gate (Jozefowicz et al.
    2015: the cell remembers by default early in training)."""
    n_in, cell = lstm.in_size, lstm.cell_size
    limit = math.sqrt(6.0 / (n_in + 4 * cell))
    kernel = rng.uniform(-limit, limit, size=(n_in, 4 * cell))
    q, r = np.linalg.qr(rng.standard_normal((4 * cell, cell)))
    recurrent = (q * np.sign(np.diag(r))).T  # [cell, 4 cell] with orthonormal rows
    bias = np.zeros(4 * cell)
    bias[cell : 2 * cell] = 1.0
    return {"lstm/kernel": kernel.astype(np.float32), "lstm/recurrent_kernel": recurrent.astype(np.float32),
            "lstm/bias": bias.astype(np.float32)}
