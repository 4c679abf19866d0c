"""NumpyLSTMModel: the built-in ``use_lstm`` model's forward step in numpy.

Rollout workers act one step at a time, carrying each sub-env's state ``[h, c]``; the
learner's torch or TF model runs whole sequences. Weights are the canonical arrays
(``specs.LSTMSpec``), so the learner's ``get_weights()`` loads here unchanged.
"""

from __future__ import annotations

import numpy as np

from rlstack.models.specs import ModelSpec
from rlstack.models.numpy.model import NumpyModel
from rlstack.models.prev_inputs import NUMPY_OPS, PREV_ACTIONS, PREV_REWARDS, with_prev_inputs


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (np.tanh(0.5 * x) + 1.0)  # no overflow warning for large |x|


def lstm_step(x: np.ndarray, h: np.ndarray, c: np.ndarray, kernel: np.ndarray, recurrent_kernel: np.ndarray,
              bias: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One LSTM step (Hochreiter & Schmidhuber 1997, with a forget gate), gates in Keras's
    order: ``z = x K + h R + b``; ``i, f, g, o = split(z)``;
    ``c' = sigmoid(f) c + sigmoid(i) tanh(g)``; ``h' = sigmoid(o) tanh(c')``.

    Returns:
        ``(h', c')``, each ``[B, cell]``.
    """
    z = x @ kernel + h @ recurrent_kernel + bias
    i, f, g, o = np.split(z, 4, axis=1)
    c_new = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
    return _sigmoid(o) * np.tanh(c_new), c_new


class NumpyLSTMModel(NumpyModel):
    """The built-in LSTM policy-and-value network, one step at a time (float32).

    Args:
        spec: A catalog spec with ``lstm`` set.
    """

    def __init__(self, spec: ModelSpec) -> None:
        if spec.lstm is None:
            raise ValueError("NumpyLSTMModel needs a spec with an LSTM (model.use_lstm=True).")
        super().__init__(spec)
        self.prev_inputs = spec.prev

    def set_canonical_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Loads weights in the canonical layout (copies them as float32).

        Raises:
            ValueError: If a weight is missing or has the wrong shape.
        """
        super().set_canonical_weights(weights)
        for name, shape in self.spec.lstm.weight_shapes.items():
            if name not in weights:
                raise ValueError(f"Weight {name} is missing; was it saved with another model config?")
            value = np.array(weights[name], dtype=np.float32)
            if value.shape != shape:
                raise ValueError(f"Weight {name} has shape {value.shape}; the model expects {shape}.")
            self.weights[name] = value

    def get_initial_state(self) -> list[np.ndarray]:
        """``[h, c]``: zeros ``[cell]`` each."""
        cell = self.spec.lstm.cell_size
        return [np.zeros(cell, np.float32), np.zeros(cell, np.float32)]

    def step(self, obs: np.ndarray, state: list[np.ndarray], prev_actions: np.ndarray | None = None,
             prev_rewards: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
        """One step for a batch of sub-envs.

        Args:
            obs: Flat observations ``[B, obs_size]``.
            state: ``[h, c]``, each ``[B, cell]``.
            prev_actions: The previous actions ``[B, ...]`` (with ``lstm_use_prev_action``).
            prev_rewards: The previous rewards ``[B]`` (with ``lstm_use_prev_reward``).

        Returns:
            ``(dist_inputs [B, num_outputs], values [B], [h', c'])``.
        """
        features = with_prev_inputs(self.prev_inputs, self._encode(self.spec.encoder, obs),
                                    {PREV_ACTIONS: prev_actions, PREV_REWARDS: prev_rewards}, NUMPY_OPS)
        w = self.weights
        h, c = lstm_step(features, state[0], state[1], w["lstm/kernel"], w["lstm/recurrent_kernel"], w["lstm/bias"])
        dist_inputs = self._run(self.spec.logits, h)
        if self.spec.free_log_std:
            dist_inputs = np.concatenate([dist_inputs, np.broadcast_to(w["log_std"], dist_inputs.shape)], axis=1)
        return dist_inputs, self._run(self.spec.value_out, h)[:, 0], [h, c]

    def __call__(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        raise TypeError("The LSTM model acts with step(obs, state); it has no stateless call.")
