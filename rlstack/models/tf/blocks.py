"""The actor-critic blocks of ``models/blocks.py`` in TensorFlow (SAC, TD3, DDPG).

The twins of ``models/torch/blocks.py``: :class:`TFActorCritic` (actor and critics) and
:class:`TFCritics` (the critics alone, which a target network copies), plain
``tf.Variable``\\ s in the canonical layout; twin critics over dense layers are held as
stacked ``[2, in, out]`` kernels and run as one batched matmul per layer.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from rlstack.models.blocks import ActorCriticSpec, CriticSpec
from rlstack.models.specs import LayerSpec, initial_weights
from rlstack.models.tf.framework import tf
from rlstack.models.tf.graph_function import GraphFunction
from rlstack.models.tf.model import _ACTIVATIONS, _flat, encode, run_layer, vector_part
from rlstack.models.tf.tf_modelv2 import TFModelV2


def _critic_stack(critic: CriticSpec) -> list[LayerSpec]:
    # The dense layers of one critic in order: fc, post_fc, out.
    return [*critic.encoder.fc, *critic.encoder.post_fc, critic.out]


def _variables(weights: dict[str, np.ndarray], names: list[str]) -> dict[str, tf.Variable]:
    return {name: tf.Variable(np.asarray(weights[name], np.float32), name=name.replace("/", "_"))
            for name in names}


class TFCritics:
    """One or two Q critics, twins of :class:`~rlstack.models.torch.blocks.TorchCritics`.

    Args:
        spec: The actor-critic spec whose critics to build.
        weights: Canonical weights to start from (default: ``initial_weights(spec, 0)``).
    """

    def __init__(self, spec: ActorCriticSpec, weights: dict[str, np.ndarray] | None = None) -> None:
        weights = initial_weights(spec, 0) if weights is None else weights
        self.critic_specs = spec.critics
        self.discrete = spec.discrete
        self.stacked = spec.stacked_critics
        if self.stacked:
            first = spec.critics[0]
            self.encoder = first.encoder
            self.layer_names = [[layer.name for layer in _critic_stack(critic)] for critic in spec.critics]
            self.activations = [_ACTIVATIONS[layer.activation] for layer in _critic_stack(first)]
            self.kernels, self.biases = [], []
            for j, layer in enumerate(_critic_stack(first)):
                kernel = np.stack([weights[f"{names[j]}/kernel"] for names in self.layer_names])
                bias = np.stack([weights[f"{names[j]}/bias"] for names in self.layer_names])[:, None, :]
                self.kernels.append(tf.Variable(kernel.astype(np.float32), name=f"critics_{j}_kernel"))
                self.biases.append(tf.Variable(bias.astype(np.float32), name=f"critics_{j}_bias"))
            self.variables_list = [v for pair in zip(self.kernels, self.biases) for v in pair]
        else:
            names = sorted(f"{layer.name}/{part}" for critic in spec.critics for layer in critic.layers
                           for part in ("kernel", "bias"))
            self.weight_vars = _variables(weights, names)
            self.variables_list = [self.weight_vars[name] for name in names]

    def __call__(self, obs: tf.Tensor, actions: tf.Tensor | None = None) -> tf.Tensor:
        """Q-values of every critic: ``[C, B]`` for Q(s, a) (``actions [B, action_dim]``),
        ``[C, B, num_actions]`` for Q(s, .) (no actions)."""
        x = obs if actions is None else tf.concat([obs, tf.cast(actions, tf.float32)], axis=1)
        if self.stacked:
            x = vector_part(x, self.encoder)
            for i, (kernel, bias, activation) in enumerate(zip(self.kernels, self.biases, self.activations)):
                # [B, in] -> [2, B, out] on the first layer, then [2, B, in] @ [2, in, out].
                x = tf.matmul(x[None] if i == 0 else x, kernel) + bias
                if activation is not None:
                    x = activation(x)
            q = x
        else:
            q = tf.stack([run_layer(self.weight_vars, critic.out, encode(self.weight_vars, critic.encoder, x))
                          for critic in self.critic_specs])
        return q if self.discrete else tf.squeeze(q, axis=-1)

    def raw_variables(self) -> dict[str, tf.Variable]:
        """The variables as held (stacked or by canonical name), keyed for reading."""
        if not self.stacked:
            return dict(self.weight_vars)
        return {**{f"critics/{j}/kernel": v for j, v in enumerate(self.kernels)},
                **{f"critics/{j}/bias": v for j, v in enumerate(self.biases)}}

    def canonical_from_raw(self, raw: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Canonical weights from values read out of :meth:`raw_variables`."""
        if not self.stacked:
            return dict(raw)
        weights = {}
        for j in range(len(self.kernels)):
            kernel, bias = raw[f"critics/{j}/kernel"], raw[f"critics/{j}/bias"]
            for c, names in enumerate(self.layer_names):
                weights[f"{names[j]}/kernel"] = kernel[c].copy()
                weights[f"{names[j]}/bias"] = bias[c, 0].copy()
        return weights

    def get_canonical_weights(self) -> dict[str, np.ndarray]:
        """The critics' weights in the canonical layout, as numpy copies."""
        if getattr(self, "_read_all", None) is None:
            # One graph call reads every variable, not one eager read per variable.
            self._read_all = GraphFunction(lambda: {k: tf.identity(v) for k, v in self.raw_variables().items()}, [])
        return self.canonical_from_raw({k: v.numpy().copy() for k, v in self._read_all().items()})

    def set_canonical_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Loads the critics' weights from canonical-layout arrays (other keys are ignored).

        Raises:
            ValueError: If a weight has the wrong shape.
        """
        if self.stacked:
            for j, (kernel, bias) in enumerate(zip(self.kernels, self.biases)):
                kernels = np.stack([np.asarray(weights[f"{names[j]}/kernel"], np.float32)
                                    for names in self.layer_names])
                biases = np.stack([np.asarray(weights[f"{names[j]}/bias"], np.float32)
                                   for names in self.layer_names])[:, None, :]
                _check_shape(self.layer_names[0][j], kernels[0], kernel.shape[1:])
                kernel.assign(kernels)
                bias.assign(biases)
            return
        for name, var in self.weight_vars.items():
            value = np.asarray(weights[name], np.float32)
            _check_shape(name, value, var.shape)
            var.assign(value)

    def assign_from(self, other: "TFCritics", tau: float = 1.0) -> None:
        """``self <- tau * other + (1 - tau) * self`` for every variable: a target
        network's update (``tau=1`` copies)."""
        for target, source in zip(self.variables_list, other.variables_list):
            target.assign(source if tau == 1.0 else target + tau * (source - target))


def _check_shape(name: str, value: np.ndarray, expected: Any) -> None:
    if tuple(value.shape) != tuple(expected):
        raise ValueError(f"Weight {name} has shape {value.shape} but the model expects {tuple(expected)}; "
                         "was it saved with another model config?")


class TFActorCritic(TFModelV2):
    """The actor and critics of an :class:`~rlstack.models.blocks.ActorCriticSpec`.

    Policies call :meth:`actor_outputs` and :meth:`critic_values` on flat observations;
    as a ModelV2, ``model(input_dict)`` returns the actor's outputs.

    Args:
        spec: The actor-critic spec.
        obs_space: The observation space (default: a flat Box of ``spec.obs_size``).
        action_space: The action space.
        model_config: The actor's model config (default: the spec's).
        name: The model's name.
        seed: Seed of the initial weights (policies load their own right after).
    """

    def __init__(self, spec: ActorCriticSpec, obs_space: gym.Space | None = None,
                 action_space: gym.Space | None = None, model_config: dict | None = None,
                 name: str = "actor_critic", seed: int | None = 0) -> None:
        if obs_space is None:
            obs_space = gym.spaces.Box(-np.inf, np.inf, (spec.obs_size,), np.float32)
        super().__init__(obs_space, action_space, spec.actor.num_outputs,
                         spec.model_config if model_config is None else model_config, name)
        self.spec = spec
        initial = initial_weights(spec, seed)
        self.actor_vars = _variables(initial, sorted(f"{layer.name}/{part}" for layer in spec.actor.layers
                                                     for part in ("kernel", "bias")))
        self.critics = TFCritics(spec, initial)

    @property
    def actor_variables(self) -> list[tf.Variable]:
        """The actor's variables (what the actor's optimizer steps), by canonical name."""
        return [self.actor_vars[name] for name in sorted(self.actor_vars)]

    @property
    def critic_variables(self) -> list[tf.Variable]:
        """The critics' variables (what the critics' optimizer steps)."""
        return list(self.critics.variables_list)

    @property
    def variables_list(self) -> list[tf.Variable]:
        """Every trainable variable: the actor's, then the critics'."""
        return [*self.actor_variables, *self.critic_variables]

    def _collect(self, trainable_only: bool, as_dict: bool) -> list[tf.Variable] | dict[str, tf.Variable]:
        named = {**{f"actor:{k}": v for k, v in sorted(self.actor_vars.items())},
                 **{f"critics:{k}": v for k, v in self.critics.raw_variables().items()}}
        return named if as_dict else list(named.values())

    def actor_outputs(self, obs: tf.Tensor) -> tf.Tensor:
        """The actor's outputs ``[B, num_outputs]`` for flat observations."""
        actor = self.spec.actor
        return run_layer(self.actor_vars, actor.out, encode(self.actor_vars, actor.encoder, obs))

    def critic_values(self, obs: tf.Tensor, actions: tf.Tensor | None = None) -> tf.Tensor:
        """Every critic's Q-values: ``[C, B]`` for Q(s, a), ``[C, B, num_actions]`` for Q(s, .)."""
        return self.critics(obs, actions)

    def policy_and_value(self, obs: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """The actor's outputs and the critics' value of its greedy behaviour (see
        :meth:`rlstack.models.torch.blocks.TorchActorCritic.policy_and_value`)."""
        outputs = self.actor_outputs(obs)
        kind = self.spec.actor.kind
        if kind == "categorical":
            probs = tf.nn.softmax(outputs, axis=-1)
            return outputs, tf.reduce_sum(probs * tf.reduce_min(self.critics(obs), axis=0), axis=-1)
        greedy = tf.tanh(outputs[:, : self.spec.actor.action_dim] if kind == "squashed_gaussian" else outputs)
        return outputs, tf.reduce_min(self.critics(obs, greedy), axis=0)

    def value(self, obs: tf.Tensor) -> tf.Tensor:
        """The greedy value of :meth:`policy_and_value` ``[B]``."""
        return self.policy_and_value(obs)[1]

    def forward(self, input_dict: dict[str, Any], state: list, seq_lens: Any) -> tuple[tf.Tensor, list]:
        """1.13's entry: the actor's outputs for ``input_dict["obs_flat"]``."""
        obs = input_dict.get("obs_flat", input_dict["obs"])
        return self.actor_outputs(_flat(tf.cast(obs, tf.float32))), state

    def value_function(self) -> tf.Tensor:
        """Not defined: an actor-critic of Q critics has no state-value head."""
        raise NotImplementedError("An actor with Q critics has no value_function(); call critic_values(obs, "
                                  "actions) for Q-values.")

    def get_canonical_weights(self) -> dict[str, np.ndarray]:
        """The actor's and critics' weights in the canonical layout, as numpy copies."""
        if getattr(self, "_read_all", None) is None:
            # One graph call reads every variable, not one eager read per variable: the
            # weights go to the acting copy after every sampling round.
            self._read_all = GraphFunction(
                lambda: ({k: tf.identity(v) for k, v in self.actor_vars.items()},
                         {k: tf.identity(v) for k, v in self.critics.raw_variables().items()}), [])
        actor, critics = self._read_all()
        return {**{k: v.numpy().copy() for k, v in actor.items()},
                **self.critics.canonical_from_raw({k: v.numpy() for k, v in critics.items()})}

    def get_actor_weights(self) -> dict[str, np.ndarray]:
        """The actor's weights (canonical layout) as numpy copies, read in one graph call."""
        if getattr(self, "_read_actor", None) is None:
            self._read_actor = GraphFunction(lambda: {k: tf.identity(v) for k, v in self.actor_vars.items()}, [])
        return {k: v.numpy().copy() for k, v in self._read_actor().items()}

    def set_canonical_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Loads canonical-layout weights of the actor and the critics.

        Raises:
            ValueError: If a weight has the wrong shape.
            KeyError: If a weight is missing.
        """
        for name, var in self.actor_vars.items():
            value = np.asarray(weights[name], np.float32)
            _check_shape(name, value, var.shape)
            var.assign(value)
        self.critics.set_canonical_weights(weights)
