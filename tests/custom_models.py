"""Custom models used by the tests (importable by Ray workers, unlike test modules' locals)."""

from __future__ import annotations


def _torch_model():
    import torch
    from torch import nn

    class TinyTorchModel(nn.Module):
        """One hidden layer; returns (dist_inputs, values) per the custom-model contract."""

        def __init__(self, obs_space, action_space, num_outputs, model_config, name, hidden=4):
            super().__init__()
            size = int(obs_space.shape[0])
            self.body = nn.Sequential(nn.Linear(size, hidden), nn.Tanh())
            self.pi = nn.Linear(hidden, num_outputs)
            self.vf = nn.Linear(hidden, 1)

        def forward(self, obs: torch.Tensor):
            features = self.body(obs)
            return self.pi(features), self.vf(features).squeeze(1)

    return TinyTorchModel


def _tf_model():
    import tensorflow as tf

    class TinyTFModel(tf.Module):
        """A Keras-free model whose variables are created on the first call."""

        def __init__(self, obs_space, action_space, num_outputs, model_config, name):
            super().__init__(name=name)
            self.num_outputs = num_outputs
            self.w = None

        def __call__(self, obs):
            if self.w is None:
                size = obs.shape[-1]
                self.w = tf.Variable(tf.random.normal([size, self.num_outputs + 1], stddev=0.1, seed=1), name="w")
            out = tf.matmul(obs, self.w)
            return out[:, : self.num_outputs], out[:, self.num_outputs]

    return TinyTFModel


def __getattr__(name):
    if name == "TinyTorchModel":
        return _torch_model()
    if name == "TinyTFModel":
        return _tf_model()
    raise AttributeError(name)
