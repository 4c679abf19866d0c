"""Recurrent torch models: 1.13's ``RecurrentNetwork`` base and the built-in LSTM model.

A user's recurrent model subclasses :class:`RecurrentNetwork` (with ``nn.Module``) as in
RLlib 1.13 and defines ``forward_rnn(inputs [B, T, ...], state, seq_lens) ->
(outputs [B, T, num_outputs], new_state)``, ``get_initial_state()`` and
``value_function()``; ``forward`` adds the time dimension to the flat rows a policy
passes (``T`` = 1 when acting). :class:`TorchLSTMModel` is ``use_lstm``'s network, on
the canonical weights of ``specs.LSTMSpec`` (shared with TF and numpy). ``TORCH_OPS``
are the tensor operations ``models/prev_inputs.py`` encodes previous actions with.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlstack.models.specs import ModelSpec
from rlstack.models.modelv2 import add_time_dimension
from rlstack.models.prev_inputs import PrevInputsSpec, TensorOps, with_prev_inputs
from rlstack.models.torch.model import TorchModel, encode
from rlstack.models.torch.torch_modelv2 import TorchModelV2

TORCH_OPS = TensorOps(one_hot=lambda x, depth: nn.functional.one_hot(x.long(), depth).float(),
                      to_float=lambda x: x.float(), reshape=torch.reshape, concat=lambda xs: torch.cat(xs, dim=-1))


class RecurrentNetwork(TorchModelV2):
    """1.13's torch ``RecurrentNetwork``: subclass it with ``nn.Module``.

    Examples:
        >>> import gymnasium as gym
        >>> class MyRNN(RecurrentNetwork, nn.Module):
        ...     def __init__(self, obs_space, action_space, num_outputs, model_config, name):
        ...         nn.Module.__init__(self)
        ...         super().__init__(obs_space, action_space, num_outputs, model_config, name)
        ...         self.rnn = nn.GRU(obs_space.shape[0], 8, batch_first=True)
        ...         self.logits, self.value_branch = nn.Linear(8, num_outputs), nn.Linear(8, 1)
        ...     def get_initial_state(self):
        ...         return [torch.zeros(8)]
        ...     def forward_rnn(self, inputs, state, seq_lens):  # inputs [B, T, 3]
        ...         features, h = self.rnn(inputs, state[0][None])
        ...         self._values = self.value_branch(features).reshape(-1)
        ...         return self.logits(features), [h[0]]
        ...     def value_function(self):
        ...         return self._values
        >>> model = MyRNN(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(2), 2, {}, "rnn")
        >>> # 5 sequences of 2 steps as flat rows, the state at each sequence's start.
        >>> out, state = model({"obs": torch.zeros(10, 3)}, [torch.zeros(5, 8)], torch.full((5,), 2))
        >>> tuple(out.shape), tuple(state[0].shape), tuple(model.value_function().shape)
        ((10, 2), (5, 8), (10,))
    """

    def forward(self, input_dict: dict[str, Any], state: list[torch.Tensor],
                seq_lens: Any) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Adds the time dimension to ``input_dict["obs_flat"]`` (``[B * T, ...]`` with
        ``B = len(seq_lens)``), calls :meth:`forward_rnn` and returns its outputs as
        ``[B * T, num_outputs]`` rows."""
        flat = input_dict["obs_flat"].float()
        if seq_lens is None:  # one step per row (a plain model call)
            seq_lens = torch.ones(flat.shape[0], dtype=torch.int32, device=flat.device)
        inputs = add_time_dimension(flat, seq_lens=seq_lens, framework="torch")
        output, new_state = self.forward_rnn(inputs, state, seq_lens)
        return output.reshape(-1, output.shape[-1]), new_state

    def forward_rnn(self, inputs: torch.Tensor, state: list[torch.Tensor],
                    seq_lens: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Returns ``(outputs [B, T, num_outputs], new_state)`` for ``inputs [B, T, ...]``
        and the state ``[B, ...]`` each at the sequences' start; subclasses define it."""
        raise NotImplementedError(f"{type(self).__name__} must define forward_rnn(inputs, state, seq_lens).")

    def get_initial_state(self) -> list[torch.Tensor]:
        """The state at an episode's start, one tensor per state input, without the batch
        dimension; subclasses define it."""
        raise NotImplementedError(f"{type(self).__name__} must define get_initial_state().")


class LSTMAroundModel(RecurrentNetwork, nn.Module):
    """``use_lstm`` around a custom model, as 1.13 wrapped one: the custom model's outputs
    (built with ``num_outputs=None``, so ``inner.num_outputs`` is their size) and, with
    ``lstm_use_prev_action`` / ``_reward``, the previous action and reward go through an
    LSTM of ``lstm_cell_size``; the action and value heads read its output. The custom
    model's own ``value_function`` is not used.

    Args:
        inner: The custom model. Its parameters train with the LSTM's when it is an
            ``nn.Module`` (1.13's example wraps one without parameters, which need not be).
        obs_space, action_space, num_outputs, model_config, name: As any ModelV2's.
    """

    def __init__(self, inner: TorchModelV2, obs_space: gym.Space, action_space: gym.Space, num_outputs: int,
                 model_config: dict, name: str) -> None:
        nn.Module.__init__(self)
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        if isinstance(inner, nn.Module):
            self.inner = inner
        else:
            self.__dict__["inner"] = inner  # nothing to register: it holds no parameters
        self.cell_size = int(model_config.get("lstm_cell_size", 256))
        self.prev_inputs = PrevInputsSpec.for_action_space(
            action_space, int(bool(model_config.get("lstm_use_prev_action"))),
            int(bool(model_config.get("lstm_use_prev_reward"))), window=False)
        extra = 0 if self.prev_inputs is None else self.prev_inputs.size
        self.lstm = nn.LSTM(int(inner.num_outputs) + extra, self.cell_size, batch_first=True)
        self.logits = nn.Linear(self.cell_size, num_outputs)
        self.value_branch = nn.Linear(self.cell_size, 1)
        self._values: torch.Tensor | None = None

    def get_initial_state(self) -> list[torch.Tensor]:
        """``[h, c]``: zeros ``[lstm_cell_size]`` each."""
        return [torch.zeros(self.cell_size), torch.zeros(self.cell_size)]

    def forward(self, input_dict: dict[str, Any], state: list[torch.Tensor],
                seq_lens: Any) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """The custom model on every row, then :meth:`RecurrentNetwork.forward` over its
        outputs (and the previous action and reward)."""
        features, _ = self.inner.forward(input_dict, [], None)
        features = with_prev_inputs(self.prev_inputs, features.float(), input_dict, TORCH_OPS)
        return RecurrentNetwork.forward(self, {**input_dict, "obs_flat": features}, state, seq_lens)

    def forward_rnn(self, inputs: torch.Tensor, state: list[torch.Tensor],
                    seq_lens: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        out, (h, c) = self.lstm(inputs, (state[0][None], state[1][None]))
        self._values = self.value_branch(out.reshape(-1, self.cell_size)).squeeze(1)
        return self.logits(out), [h[0], c[0]]

    def value_function(self) -> torch.Tensor:
        """The value head on the LSTM's output of the last call's rows."""
        return self._values


def lstm_sequence(x: torch.Tensor, h: torch.Tensor, c: torch.Tensor, kernel: torch.Tensor,
                  recurrent_kernel: torch.Tensor, bias: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The LSTM over ``x [B, T, in]`` from ``(h, c)``; gates and formulas as
    ``models/numpy/recurrent.py``'s ``lstm_step``. Returns ``(outputs [B, T, cell], h, c)``."""
    x_part = x @ kernel + bias  # every step's input term in one product
    outputs = []
    for t in range(x.shape[1]):
        i, f, g, o = (x_part[:, t] + h @ recurrent_kernel).chunk(4, dim=1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        outputs.append(h)
    return torch.stack(outputs, dim=1), h, c


class TorchLSTMModel(TorchModel, RecurrentNetwork):
    """``use_lstm``'s network (1.13's LSTM wrapper): the built-in encoder, an LSTM of
    ``lstm_cell_size`` over the features (and the previous action and reward, with
    ``lstm_use_prev_*``), then the ``logits`` and ``value_out`` heads on its output.

    Args:
        spec: A catalog spec with ``lstm`` set.
        obs_space: The observation space the model sees.
        action_space: The action space.
        name: The model's name.
    """

    def __init__(self, spec: ModelSpec, obs_space: gym.Space | None = None, action_space: gym.Space | None = None,
                 name: str = "default_model") -> None:
        if spec.lstm is None:
            raise ValueError("TorchLSTMModel needs a spec with an LSTM (model.use_lstm=True).")
        super().__init__(spec, obs_space, action_space, name)
        self.prev_inputs = spec.prev
        shapes = spec.lstm.weight_shapes
        # Kept in the canonical layout ([in, 4 cell]): x @ kernel, no transposes.
        self.lstm_kernel = nn.Parameter(torch.zeros(shapes["lstm/kernel"]))
        self.lstm_recurrent_kernel = nn.Parameter(torch.zeros(shapes["lstm/recurrent_kernel"]))
        self.lstm_bias = nn.Parameter(torch.zeros(shapes["lstm/bias"]))

    def _lstm_params(self) -> dict[str, nn.Parameter]:
        return {"lstm/kernel": self.lstm_kernel, "lstm/recurrent_kernel": self.lstm_recurrent_kernel,
                "lstm/bias": self.lstm_bias}

    def get_initial_state(self) -> list[torch.Tensor]:
        """``[h, c]``: zeros ``[lstm_cell_size]`` each."""
        cell = self.spec.lstm.cell_size
        return [self.lstm_bias.new_zeros(cell), self.lstm_bias.new_zeros(cell)]

    def forward(self, input_dict: dict[str, Any], state: list[torch.Tensor],
                seq_lens: Any) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """As 1.13's LSTM wrapper: the encoder on every row, the previous action and
        reward after its features, then :meth:`RecurrentNetwork.forward` over them."""
        features = encode(self.layers, self.spec.encoder, input_dict["obs_flat"].float())
        features = with_prev_inputs(self.prev_inputs, features, input_dict, TORCH_OPS)
        return RecurrentNetwork.forward(self, {**input_dict, "obs_flat": features}, state, seq_lens)

    def forward_rnn(self, inputs: torch.Tensor, state: list[torch.Tensor],
                    seq_lens: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        # inputs: the LSTM's inputs [B, T, in] (see forward).
        batch, steps = inputs.shape[:2]
        out, h, c = lstm_sequence(inputs, state[0], state[1], self.lstm_kernel, self.lstm_recurrent_kernel,
                                  self.lstm_bias)
        rows = out.reshape(batch * steps, -1)
        dist_inputs = self.layers["logits"](rows) if self.spec.logits is not None else rows
        if self.log_std is not None:
            dist_inputs = torch.cat([dist_inputs, self.log_std.expand_as(dist_inputs)], dim=1)
        self._values = self.layers["value_out"](rows).squeeze(1)
        return dist_inputs.reshape(batch, steps, -1), [h, c]

    def policy_and_value(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        raise TypeError("The LSTM model needs its state: call policy_and_value_rnn(obs, state, seq_lens).")

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        raise TypeError("The LSTM model needs its state: call policy_and_value_rnn(obs, state, seq_lens).")

    def get_canonical_weights(self) -> dict[str, np.ndarray]:
        """Weights in the catalog's canonical layout, the LSTM's included."""
        weights = super().get_canonical_weights()
        weights.update({name: p.detach().cpu().numpy().copy() for name, p in self._lstm_params().items()})
        return weights

    @torch.no_grad()
    def set_canonical_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Loads weights in the canonical layout.

        Raises:
            ValueError: If a weight is missing or has the wrong shape.
        """
        super().set_canonical_weights(weights)
        for name, param in self._lstm_params().items():
            if name not in weights:
                raise ValueError(f"Weight {name} is missing; was it saved with another model config?")
            value = np.array(weights[name], dtype=np.float32)
            if tuple(value.shape) != tuple(param.shape):
                raise ValueError(f"Weight {name} has shape {value.shape} but the model expects "
                                 f"{tuple(param.shape)}; was it saved with another model config?")
            param.copy_(torch.from_numpy(value))
