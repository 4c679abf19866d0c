"""1.13-style torch models and distributions used by the tests (importable by Ray
workers; torch is imported only when a class is asked for)."""

from __future__ import annotations


def _classes() -> dict[str, type]:
    import torch
    from torch import nn

    from rlstack.models.torch.fcnet import FullyConnectedNetwork
    from rlstack.models.torch.misc import SlimFC, normc_initializer
    from rlstack.models.torch.recurrent_net import RecurrentNetwork
    from rlstack.models.torch.torch_action_dist import TorchCategorical
    from rlstack.models.torch.torch_modelv2 import TorchModelV2

    class WrappedFCModel(TorchModelV2, nn.Module):
        """RLlib 1.13's custom-env example model: a FullyConnectedNetwork inside."""

        def __init__(self, obs_space, action_space, num_outputs, model_config, name):
            TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name)
            nn.Module.__init__(self)
            self.torch_sub_model = FullyConnectedNetwork(obs_space, action_space, num_outputs, model_config, name)

        def forward(self, input_dict, state, seq_lens):
            input_dict["obs"] = input_dict["obs"].float()
            fc_out, _ = self.torch_sub_model(input_dict, state, seq_lens)
            return fc_out, []

        def value_function(self):
            return torch.reshape(self.torch_sub_model.value_function(), [-1])

    class CustomLossModel(TorchModelV2, nn.Module):
        """super().__init__ style; adds ``coeff * sum(w^2)`` of its head in custom_loss
        (returning a list, as 1.13's torch examples do) and reports it in metrics()."""

        def __init__(self, obs_space, action_space, num_outputs, model_config, name, coeff=1.0):
            super().__init__(obs_space, action_space, num_outputs, model_config, name)
            size = int(obs_space.shape[0])
            self.body = SlimFC(size, 8, initializer=normc_initializer(1.0), activation_fn="tanh")
            self.pi = SlimFC(8, num_outputs, initializer=normc_initializer(0.01))
            self.vf = SlimFC(8, 1, initializer=normc_initializer(0.01))
            self.coeff = coeff
            self._features = None
            self.extra_loss = torch.zeros(())

        def forward(self, input_dict, state, seq_lens):
            self._features = self.body(input_dict["obs_flat"].float())
            return self.pi(self._features), state

        def value_function(self):
            return self.vf(self._features).squeeze(1)

        def custom_loss(self, policy_loss, loss_inputs):
            self.extra_loss = self.coeff * (self.pi._model[0].weight ** 2).sum()
            return [loss + self.extra_loss for loss in policy_loss]

        def metrics(self):
            return {"extra_loss": self.extra_loss.detach()}

    class RecurrentModel(RecurrentNetwork, nn.Module):
        """RLlib 1.13's ``examples/models/rnn_model.py`` (RNNModel) shape: a dense layer,
        an nn.LSTM over [B, T, ...], then the logits and value heads."""

        seen_input_shapes: list = []

        def __init__(self, obs_space, action_space, num_outputs, model_config, name, lstm_state_size=8):
            nn.Module.__init__(self)
            super().__init__(obs_space, action_space, num_outputs, model_config, name)
            self.lstm_state_size = lstm_state_size
            self.fc1 = nn.Linear(int(obs_space.shape[0]), 16)
            self.lstm = nn.LSTM(16, lstm_state_size, batch_first=True)
            self.action_branch = nn.Linear(lstm_state_size, num_outputs)
            self.value_branch = nn.Linear(lstm_state_size, 1)
            self._features = None

        def get_initial_state(self):
            return [self.fc1.weight.new(1, self.lstm_state_size).zero_().squeeze(0),
                    self.fc1.weight.new(1, self.lstm_state_size).zero_().squeeze(0)]

        def value_function(self):
            return torch.reshape(self.value_branch(self._features), [-1])

        def forward_rnn(self, inputs, state, seq_lens):
            type(self).seen_input_shapes.append(tuple(inputs.shape))
            x = nn.functional.relu(self.fc1(inputs))
            self._features, [h, c] = self.lstm(x, [torch.unsqueeze(state[0], 0), torch.unsqueeze(state[1], 0)])
            return self.action_branch(self._features), [torch.squeeze(h, 0), torch.squeeze(c, 0)]

    class TemperatureCategorical(TorchCategorical):
        """A categorical whose last input column is a learned inverse temperature: needs
        n + 1 model outputs, so a policy using the built-in categorical would fail."""

        logp_calls = 0

        def __init__(self, inputs, model=None):
            scale = torch.nn.functional.softplus(inputs[:, -1:]) + 0.5
            super().__init__(inputs[:, :-1] * scale, model)
            self.model = model

        def logp(self, actions):
            type(self).logp_calls += 1
            return super().logp(actions)

        @staticmethod
        def required_model_output_shape(action_space, model_config):
            return int(action_space.n) + 1

    return {cls.__name__: cls for cls in (WrappedFCModel, CustomLossModel, RecurrentModel, TemperatureCategorical)}


_cache: dict[str, type] = {}


def __getattr__(name):
    if not _cache:
        for cls_name, cls in _classes().items():
            cls.__module__ = __name__
            cls.__qualname__ = cls_name
            _cache[cls_name] = cls
    if name in _cache:
        return _cache[name]
    raise AttributeError(name)
