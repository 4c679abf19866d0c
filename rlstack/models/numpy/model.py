"""NumpyModel: the forward pass of the catalog's dense models in numpy.

Rollout workers only act; for the small MLPs of most control tasks a numpy forward pass
at batch 1-32 is several times faster than a framework's (no dispatch or autograd
overhead), and a worker that never imports torch or TensorFlow starts faster and holds
~300 MiB less. Weights are the catalog's canonical arrays, so the learner's
``get_weights()`` loads here unchanged.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlstack.models.specs import EncoderSpec, LayerSpec, ModelSpec, twin_encoders


def _elu(x: np.ndarray) -> np.ndarray:
    return np.where(x > 0, x, np.expm1(np.minimum(x, 0)))


def _silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


_ACTIVATIONS = {"tanh": np.tanh, "relu": lambda x: np.maximum(x, 0), "swish": _silu, "silu": _silu,
                "elu": _elu, "linear": None}


def supports(spec: ModelSpec) -> bool:
    """True when the model has no conv layers (numpy inference covers dense models only)."""
    return not spec.encoder.images and (spec.vf_encoder is None or not spec.vf_encoder.images)


class NumpyLayers:
    """Dense layers of a spec and their weights, run in numpy (float32): what
    :class:`NumpyModel` and ``blocks.py``'s ``NumpyActorCritic`` share.

    Args:
        spec: A spec whose ``layers`` lists every layer (a ModelSpec, an ActorCriticSpec).
    """

    def __init__(self, spec: Any) -> None:
        self.spec = spec
        self.weights: dict[str, np.ndarray] = {}
        # Per layer name: (kernel, bias, activation), bound when weights are loaded.
        self._layers: dict[str, tuple[np.ndarray, np.ndarray, Any]] = {}

    def _load_layers(self, weights: dict[str, np.ndarray], copy: bool,
                     layers: list[Any] | None = None) -> dict[str, np.ndarray]:
        # Every layer's (or ``layers``') kernel and bias from canonical-layout ``weights``
        # as float32: copies, or the arrays themselves where already float32 (copy False).
        to_array = np.array if copy else np.asarray
        loaded = {}
        for layer in self.spec.layers if layers is None else layers:
            for part, shape in (("kernel", layer.kernel_shape), ("bias", (layer.kernel_shape[-1],))):
                name = f"{layer.name}/{part}"
                if name not in weights:
                    raise ValueError(f"Weight {name} is missing; was it saved with another model config?")
                value = to_array(weights[name], dtype=np.float32)
                if value.shape != tuple(shape):
                    raise ValueError(f"Weight {name} has shape {value.shape}; the model expects {tuple(shape)}.")
                loaded[name] = value
        return loaded

    def _bind_layers(self, loaded: dict[str, np.ndarray]) -> None:
        self.weights = loaded
        self._layers = {layer.name: (loaded[f"{layer.name}/kernel"], loaded[f"{layer.name}/bias"],
                                     _ACTIVATIONS[layer.activation]) for layer in self.spec.layers}

    def get_canonical_weights(self) -> dict[str, np.ndarray]:
        """The weights in the canonical layout (copies)."""
        return {name: value.copy() for name, value in self.weights.items()}

    def _run(self, layer: LayerSpec, x: np.ndarray) -> np.ndarray:
        kernel, bias, activation = self._layers[layer.name]
        x = x @ kernel + bias
        return activation(x) if activation is not None else x

    def _encode(self, encoder: EncoderSpec, obs: np.ndarray) -> np.ndarray:
        x = obs[:, encoder.column_index]
        for layer in (*encoder.fc, *encoder.post_fc):
            x = self._run(layer, x)
        return x


class NumpyModel(NumpyLayers):
    """The built-in dense policy-and-value network, in numpy (float32).

    Args:
        spec: The catalog's description of every layer.

    Raises:
        ValueError: If the model has conv layers.
    """

    def __init__(self, spec: ModelSpec) -> None:
        if not supports(spec):
            raise ValueError("NumpyModel covers dense models only; this one has conv layers.")
        super().__init__(spec)
        # A separate value encoder of the policy encoder's shape (the default) runs with
        # it as one stacked product per layer: (kernels [2, in, out], biases [2, 1, out],
        # activation) per layer; None otherwise.
        self._twin: list[tuple[np.ndarray, np.ndarray, Any]] | None = None

    def set_canonical_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Loads weights in the canonical layout (copies them as float32).

        Raises:
            ValueError: If a weight is missing or has the wrong shape.
        """
        loaded = self._load_layers(weights, copy=True)
        if self.spec.free_log_std:
            loaded["log_std"] = np.array(weights["log_std"], dtype=np.float32)
        self._bind_layers(loaded)
        self._twin = None
        pi, vf = self.spec.encoder, self.spec.vf_encoder
        if twin_encoders(self.spec):
            self._twin = [(np.stack([loaded[f"{a.name}/kernel"], loaded[f"{b.name}/kernel"]]),
                           np.stack([loaded[f"{a.name}/bias"], loaded[f"{b.name}/bias"]])[:, None, :],
                           _ACTIVATIONS[a.activation])
                          for a, b in zip((*pi.fc, *pi.post_fc), (*vf.fc, *vf.post_fc))]

    def __call__(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Returns ``(dist_inputs [B, num_outputs], values [B])`` for flat observations."""
        if self._twin is not None:
            x = obs[:, self.spec.encoder.column_index]
            for kernel, bias, activation in self._twin:
                x = np.matmul(x, kernel) + bias  # [B, in] or [2, B, in] times [2, in, out]
                if activation is not None:
                    x = activation(x)
            features, vf_features = x[0], x[1]
        else:
            features = self._encode(self.spec.encoder, obs)
            vf_features = features if self.spec.vf_encoder is None else self._encode(self.spec.vf_encoder, obs)
        # No logits layer (model.no_final_linear): the last hidden layer gives the inputs.
        dist_inputs = features if self.spec.logits is None else self._run(self.spec.logits, features)
        if self.spec.free_log_std:
            log_std = np.broadcast_to(self.weights["log_std"], dist_inputs.shape)
            dist_inputs = np.concatenate([dist_inputs, log_std], axis=1)
        return dist_inputs, self._run(self.spec.value_out, vf_features)[:, 0]

    def policy_and_value(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(dist_inputs, values)``: the call the framework models' policies make (the
        ModelV2 interface's flat-observation path)."""
        return self(obs)

    def value(self, obs: np.ndarray) -> np.ndarray:
        """Returns ``values [B]`` only."""
        if self.spec.vf_encoder is None:
            return self(obs)[1]
        return self._run(self.spec.value_out, self._encode(self.spec.vf_encoder, obs))[:, 0]


class NumpyQModel(NumpyModel):
    """The built-in dense Q-network (DQN family) in numpy; distributional and noisy
    specs as :class:`~rlstack.models.torch.model.TorchQModel` (noise from ``noise_rng``).

    Args:
        spec: The catalog's Q-network description.
    """

    def __init__(self, spec: Any) -> None:
        super().__init__(spec)
        # The noisy layers' noise (the acting policy reseeds it with its sampling seed).
        self.noise_rng = np.random.default_rng()

    def _noisy(self, layer: LayerSpec, x: np.ndarray, noise: bool) -> np.ndarray:
        # y = x W_mu + b_mu + ((x * f(e_in)) W_sigma + b_sigma) * f(e_out), f(e) = sign(e) sqrt|e|
        y = self._run(layer, x)
        if not noise:
            return y
        fan_in, fan_out = layer.kernel_shape
        eps_in = self.noise_rng.standard_normal(fan_in).astype(np.float32)
        eps_out = self.noise_rng.standard_normal(fan_out).astype(np.float32)
        f_in, f_out = np.sign(eps_in) * np.sqrt(np.abs(eps_in)), np.sign(eps_out) * np.sqrt(np.abs(eps_out))
        kernel, bias, _ = self._layers[f"{layer.name}_sigma"]
        return y + ((x * f_in) @ kernel + bias) * f_out

    def _head(self, layers: tuple[LayerSpec, ...], out: LayerSpec, x: np.ndarray, noise: bool = True) -> np.ndarray:
        if not self.spec.noisy:
            for layer in layers:
                x = self._run(layer, x)
            return self._run(out, x)
        for layer in layers:
            x = np.maximum(self._noisy(layer, x, noise), 0.0)
        return self._noisy(out, x, noise)

    def q_logits(self, obs: np.ndarray, noise: bool = True) -> np.ndarray:
        """The heads' outputs as ``[B, num_actions, num_atoms]``."""
        spec = self.spec
        features = self._encode(spec.encoder, obs)
        advantages = self._head(spec.advantage_hiddens, spec.advantage_out, features, noise)
        advantages = advantages.reshape(-1, spec.num_actions, spec.num_atoms)
        if spec.value_out is None:
            return advantages
        value = self._head(spec.value_hiddens, spec.value_out, features, noise)[:, None, :]
        return value + advantages - advantages.mean(axis=1, keepdims=True)

    def q_values(self, obs: np.ndarray, noise: bool = True) -> np.ndarray:
        """``Q(s, .)``: the call Q-learning policies make (as on the framework models)."""
        logits = self.q_logits(obs, noise)
        if self.spec.num_atoms == 1:
            return logits[:, :, 0]
        logits = logits - logits.max(axis=2, keepdims=True)
        probs = np.exp(logits)
        probs /= probs.sum(axis=2, keepdims=True)
        return (probs * self.spec.support).sum(axis=2)

    def __call__(self, obs: np.ndarray) -> np.ndarray:  # type: ignore[override]
        """Returns ``Q(s, .)`` as ``[B, num_actions]`` for flat observations."""
        return self.q_values(obs)