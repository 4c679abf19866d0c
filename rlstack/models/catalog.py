"""ModelCatalog: chooses the network and the action distribution for a pair of spaces.

The catalog is framework-free. It turns ``(observation_space, action_space, model
config)`` into a :class:`~rlstack.models.specs.ModelSpec` (see ``specs.py`` for the
network shapes and the canonical weight layout) and an :class:`ActionDistSpec`, holds
users' custom models and action distributions, and offers classic RLlib's
``get_model_v2`` / ``get_action_dist`` (``model_factory.py``).
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from rlstack.errors import ConfigError, did_you_mean
from rlstack.models.attention import ATTENTION_DEFAULTS, check_attention_config
from rlstack.models.preprocessors import Preprocessor, get_preprocessor
from rlstack.models.prev_inputs import PrevInputsSpec
from rlstack.models.specs import (EncoderSpec, LayerSpec, LSTMSpec, ModelSpec, QModelSpec, build_encoder,
                                  dense_stack)

# Classic RLlib model keys and defaults. The keys of NO_OP_MODEL_KEYS (below) are accepted
# so that old configs load, and refused by validate_model_config at any value but the
# ones named there.
MODEL_DEFAULTS: dict[str, Any] = {
    # Sizes of the hidden layers of the MLP over vector observations.
    "fcnet_hiddens": [256, 256],
    # Activation of those layers: "tanh", "relu", "swish" (or "silu"), "elu", "linear".
    "fcnet_activation": "tanh",
    # CNN layers for image observations: [[out_channels, [kh, kw], stride], ...];
    # None picks a default from the image size.
    "conv_filters": None,
    # Activation of the CNN layers.
    "conv_activation": "relu",
    # Hidden layers after the concatenated encoders of Dict/Tuple observations, or after
    # the CNN of an image observation.
    "post_fcnet_hiddens": [],
    # Activation of the post_fcnet_hiddens layers.
    "post_fcnet_activation": "relu",
    # Share the encoder between the policy and the value function.
    "vf_share_layers": False,
    # For continuous actions: a state-independent, learned log std instead of one
    # predicted by the network.
    "free_log_std": False,
    # Name given to ModelCatalog.register_custom_model, or None for the built-in model.
    "custom_model": None,
    # Extra keyword arguments passed to the custom model's constructor.
    "custom_model_config": {},
    # Wrap the built-in model in an LSTM (1.13's LSTM wrapper): encoder, LSTM, then the
    # policy and value heads on the LSTM's output. Workers keep each sub-env's state.
    "use_lstm": False,
    # Size of the LSTM's cell (and of each of its two state tensors, h and c).
    "lstm_cell_size": 256,
    # Longest sequence a train batch is chopped into (episodes never cross a sequence);
    # also how far back the loss backpropagates through time.
    "max_seq_len": 20,
    # Feed the previous action (one-hot for Discrete, one-hot per component for
    # MultiDiscrete, flat for Box) / the previous reward to the LSTM, after the encoder's
    # features (1.13's LSTM wrapper); zeros at an episode's start. See models/prev_inputs.py.
    "lstm_use_prev_action": False,
    # Feed the previous reward to the LSTM beside the features.
    "lstm_use_prev_reward": False,
    # Attention (GTrXL, 1.13's attention wrapper): the dense encoder, then
    # attention_num_transformer_units gated Transformer-XL units of attention_dim with
    # attention_num_heads heads of attention_head_dim, each step reading the unit inputs of
    # the attention_memory_inference (acting) / attention_memory_training (training) steps
    # before it, a position-wise MLP of attention_position_wise_mlp_dim, GRU gates whose
    # bias starts at attention_init_gru_gate_bias; attention_use_n_prev_actions /
    # _rewards: the last n actions / rewards (encoded as for the LSTM) after the encoder's
    # features. See models/attention.py.
    **ATTENTION_DEFAULTS,
    # Atari envs under preprocessor_pref="deepmind" (env/atari.py): stack the last 4 screens
    # (True) or give one.
    "framestack": True,
    # The side of the square Atari screen (84, or 42 for a smaller net), under "deepmind"
    # and under classic RLlib's image preprocessing of (210, 160, 3) screens, which any
    # env the "deepmind" wrapper does not take gets (preprocessor_pref None or "rllib").
    "dim": 84,
    # That image preprocessing: average the colour channels into one grey channel. No
    # effect under "deepmind", whose screens are always grey (1.x ignored it there too).
    "grayscale": False,
    # That image preprocessing: scale the screen to [-1, 1) ((x - 128) / 128) if True, to
    # [0, 1] (x / 255) if False. No effect under "deepmind" (uint8 screens, as in 1.x).
    "zero_mean": True,
    # Not used: one observation encoding for every space (see models/preprocessors.py).
    "custom_preprocessor": None,
    # Not used: 1.x chose between two implementations of its default models; rlstack has
    # one of each, built the same for either value.
    "_use_default_native_models": False,
    # Name given to ModelCatalog.register_custom_action_dist (or the class itself), or
    # None for the built-in distribution of the action space.
    "custom_action_dist": None,
    # The built-in dense network over a vector observation: its last hidden layer (of
    # fcnet_hiddens + post_fcnet_hiddens; one over the observation if both are empty)
    # outputs the action distribution's inputs itself, with its activation, instead of
    # feeding a linear logits layer (1.13's). As in 1.13 it changes nothing under use_lstm,
    # for Dict / Tuple observations, or for the Q-networks of DQN, SAC and DDPG; image
    # observations are not supported with it.
    "no_final_linear": False,
    # 1.13's copy of the top-level key of that name: the built-in models read Dict / Tuple
    # observations by their parts either way (True with a custom_model is refused).
    "_disable_preprocessor_api": False,
    # 1.13's copy of the top-level key of that name: Dict / Tuple actions are one flat vector
    # in models and batches (False only).
    "_disable_action_flattening": False,
    # Whether recurrent models get [T, B, ...] inputs (1.13's; False only: rlstack's
    # sequences are batch-major, [B, T, ...]).
    "_time_major": False,
}

# Keys accepted for old configs but without effect: key -> (the values accepted, why no
# other is).
NO_OP_MODEL_KEYS: dict[str, tuple[tuple[Any, ...], str]] = {
    "custom_preprocessor": ((None,), "rlstack encodes every observation space one way (models/preprocessors.py); "
                                     "transform observations in a gymnasium ObservationWrapper, or register a custom "
                                     "model with ModelCatalog.register_custom_model"),
    "_disable_preprocessor_api": ((False, True), "rlstack's built-in models read Dict / Tuple observations by their "
                                                 "parts either way"),
    "_disable_action_flattening": ((False,), "rlstack's models and batches hold a Dict / Tuple action as one flat "
                                             "vector and have no nested form"),
    "_time_major": ((False,), "rlstack's sequences are batch-major ([B, T, ...]) and its recurrent models read them "
                              "so"),
}

# The message for a custom model asked to read raw observations (top-level or model key).
DISABLE_PREPROCESSOR_API_WITH_CUSTOM_MODEL = (
    "_disable_preprocessor_api=True with a custom_model is not supported by rlstack: a model always gets "
    "input_dict['obs'] in the observation space's structure with Discrete parts one-hot encoded (and "
    "input_dict['obs_flat']), where 1.x handed the raw values. Remove the key and read the one-hot parts.")

ACTIVATIONS = ("tanh", "relu", "swish", "silu", "elu", "linear")

@dataclass(frozen=True)
class ActionDistSpec:
    """The action distribution chosen for an action space.

    Attributes:
        kind: ``"categorical"``, ``"multi_categorical"``, ``"diag_gaussian"``,
            ``"multi_action"`` (a Tuple / Dict space: one of those per leaf, acting with
            one flat action vector, see ``FlatActionLayout``), or ``"custom"`` for
            ``model.custom_action_dist``.
        num_outputs: Size of the distribution's input vector (means and log stds for
            ``diag_gaussian``; the custom class's ``required_model_output_shape``).
        nvec: Category counts (``multi_categorical``; ``(n,)`` for ``categorical``).
        action_dim: Action vector size (``diag_gaussian``; ``multi_action``: the flat
            vector's).
        action_shape: Shape of one action as the env expects it (``multi_action``: of
            the flat vector).
        custom_class: The custom distribution class (``kind == "custom"``), constructed
            as ``custom_class(inputs, model)`` as in classic RLlib.
        children: The leaves' distributions (``multi_action``), in tree order.
        layout: Where each leaf sits in the flat action vector (a Tuple / Dict space's
            ``FlatActionLayout``; None for other spaces).
    """

    kind: str
    num_outputs: int
    nvec: tuple[int, ...] = ()
    action_dim: int = 0
    action_shape: tuple[int, ...] = ()
    custom_class: Any = field(default=None, compare=False)
    children: tuple["ActionDistSpec", ...] = ()
    layout: Any = field(default=None, compare=False)


def validate_model_config(model_config: dict) -> None:
    """Rejects unknown or unsupported ``model`` keys and bad values.

    Raises:
        ConfigError: Naming the key and the fix.
    """
    for key in model_config:
        if key not in MODEL_DEFAULTS:
            raise ConfigError(
                f"Unknown model config key {key!r}{did_you_mean(key, MODEL_DEFAULTS)} "
                f"Valid model keys: {', '.join(sorted(MODEL_DEFAULTS))}."
            )
    for key, (accepted, reason) in NO_OP_MODEL_KEYS.items():
        value = model_config.get(key, MODEL_DEFAULTS[key])
        if not any(value is a or (type(value) is type(a) and value == a) for a in accepted):
            raise ConfigError(
                f"model.{key}={value!r} is not supported by rlstack's models: {reason}, so only "
                f"{' or '.join(repr(a) for a in accepted)} (no effect) is accepted; remove the key."
            )
    if model_config.get("_disable_preprocessor_api") is True and model_config.get("custom_model"):
        raise ConfigError(f"model.{DISABLE_PREPROCESSOR_API_WITH_CUSTOM_MODEL}")
    if not isinstance(model_config.get("no_final_linear", False), bool):
        raise ConfigError(f"model.no_final_linear must be True or False; got {model_config['no_final_linear']!r}.")
    check_attention_config(model_config)
    if model_config.get("use_attention") and model_config.get("use_lstm"):
        raise ConfigError("model.use_attention and model.use_lstm are both True: choose one memory (1.13 refused "
                          "the pair too).")
    for key in ("max_seq_len", "lstm_cell_size"):
        value = model_config.get(key, MODEL_DEFAULTS[key])
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"model.{key} must be an integer >= 1 (1.13's default: {MODEL_DEFAULTS[key]}); "
                              f"got {value!r}.")
    for key in ("use_lstm", "lstm_use_prev_action", "lstm_use_prev_reward", "grayscale", "zero_mean"):
        if not isinstance(model_config.get(key, False), bool):
            raise ConfigError(f"model.{key} must be True or False; got {model_config[key]!r}.")
    for key in ("fcnet_activation", "conv_activation", "post_fcnet_activation"):
        value = model_config.get(key)
        if value is None:
            model_config[key] = "linear"
        elif value not in ACTIVATIONS:
            raise ConfigError(f"model.{key}={value!r} is not supported; allowed: {', '.join(ACTIVATIONS)}.")
    dim = model_config.get("dim", MODEL_DEFAULTS["dim"])
    # Atari screens need 8 or more (checked where an Atari env is wrapped); other models
    # may read dim for their own image sizes, as 1.13's did.
    if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
        raise ConfigError(f"model.dim must be a positive integer (the side of Atari screens, e.g. 84 or 42); "
                          f"got {dim!r}.")
    if not isinstance(model_config.get("framestack", True), bool):
        raise ConfigError(f"model.framestack must be True or False; got {model_config['framestack']!r}.")
    for key in ("fcnet_hiddens", "post_fcnet_hiddens"):
        value = model_config.get(key)
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, int) and v > 0 for v in value):
            raise ConfigError(f"model.{key} must be a list of positive layer sizes, e.g. [256, 256]; got {value!r}.")


def action_dist_spec(action_space: gym.Space, model_config: dict | None = None) -> ActionDistSpec:
    """Chooses the action distribution for ``action_space`` (or ``model_config``'s
    ``custom_action_dist``).

    Raises:
        ConfigError: For an action space no built-in distribution covers, or an unknown
            custom distribution.
    """
    custom = (model_config or {}).get("custom_action_dist")
    if custom:
        dist_class = custom if isinstance(custom, type) else ModelCatalog.get_custom_action_dist(custom)
        num_outputs = int(np.prod(dist_class.required_model_output_shape(action_space, model_config)))
        builtin = _builtin_dist_spec(action_space) if _has_builtin_dist(action_space) else None
        # Over a Tuple / Dict space the custom distribution's samples (tuples, as 1.13's
        # autoregressive example draws) are kept flat, laid out as the built-in one's.
        return ActionDistSpec("custom", num_outputs, nvec=builtin.nvec if builtin else (),
                              action_dim=builtin.action_dim if builtin else 0,
                              action_shape=builtin.action_shape if builtin else tuple(action_space.shape or ()),
                              custom_class=dist_class, layout=builtin.layout if builtin else None)
    return _builtin_dist_spec(action_space)


def _has_builtin_dist(action_space: gym.Space) -> bool:
    if isinstance(action_space, (gym.spaces.Tuple, gym.spaces.Dict)):
        from rlstack.utils.spaces.space_utils import flatten_space

        return all(_has_builtin_dist(leaf) for leaf in flatten_space(action_space))
    return isinstance(action_space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.Box))


def _builtin_dist_spec(action_space: gym.Space) -> ActionDistSpec:
    if isinstance(action_space, (gym.spaces.Tuple, gym.spaces.Dict)):
        from rlstack.utils.spaces.space_utils import FlatActionLayout

        try:
            layout = FlatActionLayout(action_space)
        except TypeError as exc:
            raise ConfigError(str(exc)) from None
        children = tuple(_builtin_dist_spec(leaf) for leaf in layout.leaves)
        return ActionDistSpec("multi_action", sum(child.num_outputs for child in children), action_dim=layout.width,
                              action_shape=(layout.width,), children=children, layout=layout)
    if isinstance(action_space, gym.spaces.Discrete):
        n = int(action_space.n)
        return ActionDistSpec("categorical", n, nvec=(n,))
    if isinstance(action_space, gym.spaces.MultiDiscrete):
        nvec = tuple(int(n) for n in np.asarray(action_space.nvec).reshape(-1))
        return ActionDistSpec("multi_categorical", sum(nvec), nvec=nvec, action_shape=tuple(action_space.shape))
    if isinstance(action_space, gym.spaces.Box):
        dim = int(np.prod(action_space.shape))
        return ActionDistSpec("diag_gaussian", 2 * dim, action_dim=dim,
                              action_shape=tuple(action_space.shape))
    raise ConfigError(
        f"Action space {action_space} is not supported; use Discrete, MultiDiscrete or Box, or a Tuple / Dict of "
        "them (the built-in action distributions cover those), or register a distribution with "
        "ModelCatalog.register_custom_action_dist and set model.custom_action_dist."
    )


class ModelCatalog:
    """Builds model specs and holds users' custom models."""

    _custom_models: dict[str, type] = {}
    _custom_action_dists: dict[str, type] = {}

    @classmethod
    def register_custom_model(cls, name: str, model_class: type) -> None:
        """Makes ``model_class`` available as ``config["model"]["custom_model"] = name``.

        It is constructed as ``model_class(obs_space, action_space, num_outputs,
        model_config, name, **custom_model_config)`` and is either a classic RLlib
        ModelV2 of the framework it is used with (``class M(TorchModelV2, nn.Module)``
        or ``TFModelV2``, with ``forward(input_dict, state, seq_lens)`` and
        ``value_function()``), or rlstack's shortcut form: a ``torch.nn.Module`` /
        ``tf.Module`` called on a ``float32 [batch, obs_size]`` tensor of flattened
        observations that returns ``(dist_inputs [batch, num_outputs], values [batch])``.
        A recurrent model subclasses 1.13's ``RecurrentNetwork``
        (``rlstack.models.torch.recurrent_net`` / ``rlstack.models.tf.recurrent_net``)
        with ``forward_rnn(inputs [B, T, ...], state, seq_lens)`` and a non-empty
        ``get_initial_state()``; algorithms that train on sequences (PPO) take it, the
        others refuse it.

        Args:
            name: The name to use in the model config.
            model_class: The model class.
        """
        cls._custom_models[name] = model_class
        _register_with_tune("model", name, model_class)

    @classmethod
    def register_custom_action_dist(cls, name: str, action_dist_class: type) -> None:
        """Makes ``action_dist_class`` available as ``config["model"]["custom_action_dist"] = name``.

        The class follows classic RLlib's ``ActionDistribution`` interface for the
        framework it is used with (e.g. a ``TorchDistributionWrapper`` subclass):
        constructed as ``action_dist_class(inputs, model)``, with ``sample()``,
        ``deterministic_sample()``, ``logp(actions)``, ``entropy()``, ``kl(other)`` and a
        static ``required_model_output_shape(action_space, model_config)`` that sizes
        the model's output.

        Args:
            name: The name to use in the model config.
            action_dist_class: The distribution class.
        """
        cls._custom_action_dists[name] = action_dist_class
        _register_with_tune("action_dist", name, action_dist_class)

    @classmethod
    def get_custom_action_dist(cls, name: str | type) -> type:
        """Returns a registered custom action distribution class (a class is returned as is).

        Raises:
            ConfigError: If no distribution of that name was registered.
        """
        if isinstance(name, type):
            return name
        if name not in cls._custom_action_dists:
            found = _from_tune_registry(name, kind="action_dist")
            if found is not None:
                cls._custom_action_dists[name] = found
                return found
            raise ConfigError(
                f"Unknown custom_action_dist {name!r}{did_you_mean(name, cls._custom_action_dists)} Register it "
                "first with ModelCatalog.register_custom_action_dist(name, cls) (registered: "
                f"{', '.join(sorted(cls._custom_action_dists)) or 'none'})."
            )
        return cls._custom_action_dists[name]

    @staticmethod
    def get_action_dist(action_space: gym.Space, config: dict, dist_type: Any = None,
                        framework: str = "torch", **kwargs: Any) -> tuple[type, int]:
        """Returns ``(dist_class, num_outputs)`` for ``action_space`` (classic RLlib's call).

        Args:
            action_space: The action space.
            config: The ``model`` sub-dict (its ``custom_action_dist`` wins).
            dist_type: A distribution class to use instead of the built-in one.
            framework: ``"torch"`` or ``"tf"`` (``"tf2"``, ``"tfe"``).

        Raises:
            ConfigError: For an unknown framework or an unsupported action space.
        """
        from rlstack.models.model_factory import get_action_dist

        return get_action_dist(action_space, config, dist_type, framework)

    @staticmethod
    def get_preprocessor_for_space(observation_space: gym.Space, options: dict | None = None) -> Any:
        """Classic RLlib's preprocessor for ``observation_space``: ``.size``, ``.shape``,
        ``.observation_space``, ``.transform(obs)`` (the encoding policies use)."""
        return get_preprocessor(observation_space)(observation_space, options)

    @staticmethod
    def get_model_v2(obs_space: gym.Space, action_space: gym.Space, num_outputs: int | None, model_config: dict,
                     framework: str = "torch", name: str = "default_model", model_interface: type | None = None,
                     default_model: type | None = None, **model_kwargs: Any) -> Any:
        """Builds a ModelV2 (classic RLlib's call): ``model_config["custom_model"]`` if
        set, else ``default_model``, else the built-in network for the spaces
        (``FullyConnectedNetwork``, or ``VisionNetwork`` for images).

        Args:
            obs_space: The observation space the model sees.
            action_space: The action space.
            num_outputs: Size of the model's output.
            model_config: The ``model`` sub-dict of the config.
            framework: ``"torch"`` or ``"tf"`` (``"tf2"``, ``"tfe"``).
            name: The model's name.
            model_interface: A ModelV2 class whose extra methods the model needs
                (1.13's ``get_q_values`` heads): the model is built as a subclass of it
                and of the chosen class, as 1.13 wrapped it.
            default_model: The class to build when no custom model is set.
            **model_kwargs: Extra constructor arguments (after ``custom_model_config``).

        Raises:
            ConfigError: For an unknown framework or custom model.
        """
        from rlstack.models.model_factory import get_model_v2

        return get_model_v2(obs_space, action_space, num_outputs, model_config, framework, name, model_interface,
                            default_model, **model_kwargs)

    @classmethod
    def registered_models(cls, model_config: dict | None = None) -> dict[str, dict[str, type]]:
        """A copy of the custom models and action distributions registered in this
        process, for remote workers (``{"models": ..., "action_dists": ...}``).

        With ``model_config``, only the entries it names: a worker unpickles every class
        it is sent, which imports that class's framework, and a worker acting in numpy
        must import neither torch nor TensorFlow.
        """
        models, dists = dict(cls._custom_models), dict(cls._custom_action_dists)
        if model_config is not None:
            names = {model_config.get("custom_model"), model_config.get("custom_action_dist")}
            models = {name: value for name, value in models.items() if name in names}
            dists = {name: value for name, value in dists.items() if name in names}
        return {"models": models, "action_dists": dists}

    @classmethod
    def restore_models(cls, entries: dict[str, dict[str, type]]) -> None:
        """Adds entries captured with :meth:`registered_models` (used by remote workers)."""
        cls._custom_models.update(entries.get("models", {}))
        cls._custom_action_dists.update(entries.get("action_dists", {}))

    @classmethod
    def get_custom_model(cls, name: str) -> type:
        """Returns a registered custom model class.

        Raises:
            ConfigError: If no model of that name was registered.
        """
        if name not in cls._custom_models:
            found = _from_tune_registry(name)
            if found is not None:
                cls._custom_models[name] = found
                return found
            raise ConfigError(
                f"Unknown custom_model {name!r}{did_you_mean(name, cls._custom_models)} Register it "
                "first with ModelCatalog.register_custom_model(name, cls) (registered: "
                f"{', '.join(sorted(cls._custom_models)) or 'none'})."
            )
        return cls._custom_models[name]

    @staticmethod
    def get_model_spec(obs_space: gym.Space, action_space: gym.Space, model_config: dict,
                       num_outputs: int | None = None) -> ModelSpec:
        """Returns the built-in network for these spaces and model config.

        Args:
            obs_space: The observation space (a flattened Box with ``original_space``
                is read as its original space).
            action_space: The action space.
            model_config: The ``model`` sub-dict of the config.
            num_outputs: Size of the output; None sizes it for the action distribution,
                0 leaves out the ``logits`` layer (the outputs are the features, as
                classic RLlib's ``num_outputs=None``).
        """
        config = copy.deepcopy(MODEL_DEFAULTS)
        config.update(model_config or {})
        validate_model_config(config)
        if config["use_attention"]:
            raise ConfigError(
                "model.use_attention=True: the attention network (GTrXL) has no built-in spec; the policy builds "
                "it as AttentionWrapper (rlstack.models.torch.attention_net / rlstack.models.tf.attention_net).")
        obs_space = getattr(obs_space, "original_space", obs_space)
        preprocessor = Preprocessor(obs_space)
        free_log_std = bool(config["free_log_std"])
        if num_outputs is None:
            dist = action_dist_spec(action_space, config)
            num_outputs, action_dim = dist.num_outputs, dist.action_dim
        else:
            # A 1.x model asked for a size: with free_log_std, half of it are log stds.
            num_outputs = int(num_outputs)
            action_dim = num_outputs // 2 if free_log_std else 0
            if free_log_std and num_outputs % 2:
                raise ConfigError(f"model.free_log_std needs an even num_outputs (means and log stds); got {num_outputs}.")
        encoder = build_encoder(preprocessor.layout, config, "")
        lstm = None
        prev = None
        if config["use_lstm"]:
            # 1.13's LSTM wrapper: both heads read the LSTM's output; no value encoder. The
            # LSTM reads the features, then the previous action and reward if asked.
            prev = PrevInputsSpec.for_action_space(action_space, int(config["lstm_use_prev_action"]),
                                                   int(config["lstm_use_prev_reward"]), window=False)
            lstm = LSTMSpec(encoder.out_size + (prev.size if prev else 0), config["lstm_cell_size"],
                            config["max_seq_len"])
            vf_encoder = None
        else:
            vf_encoder = None if config["vf_share_layers"] else build_encoder(preprocessor.layout, config, "vf_")
        features = encoder.out_size if lstm is None else lstm.cell_size
        # With free_log_std the network predicts only the means; log_std is a variable.
        num_logits = num_outputs - (action_dim if free_log_std else 0)
        logits = LayerSpec("logits", "dense", (features, num_logits), init_std=0.01) if num_logits else None
        # 1.13 read no_final_linear in its dense and conv networks only: its LSTM wrapper
        # asked the network for no outputs, and Dict / Tuple observations went through
        # ComplexInputNetwork, which built its own logits layer.
        if (config["no_final_linear"] and num_logits and lstm is None
                and not isinstance(obs_space, (gym.spaces.Dict, gym.spaces.Tuple))):
            encoder = _last_hidden_layer_as_output(encoder, num_logits, config, free_log_std)
            features, logits = encoder.out_size, None
        value_in = features if vf_encoder is None else vf_encoder.out_size
        value_out = LayerSpec("value_out", "dense", (value_in, 1), init_std=0.01)
        return ModelSpec(preprocessor.size, encoder, vf_encoder, logits, value_out,
                         free_log_std and logits is not None, action_dim, config, lstm, prev)

    @staticmethod
    def get_q_model_spec(obs_space: gym.Space, action_space: gym.Space, model_config: dict,
                         hiddens: list[int], dueling: bool, num_atoms: int = 1, v_min: float = -10.0,
                         v_max: float = 10.0, noisy: bool = False, sigma0: float = 0.5) -> QModelSpec:
        """Returns the built-in Q-network for these spaces (DQN's ``hiddens``,
        ``dueling``, ``num_atoms``, ``v_min``, ``v_max``, ``noisy`` and ``sigma0`` keys
        shape the heads).

        With ``num_atoms > 1`` every action (and the dueling value) has ``num_atoms``
        outputs, the logits of its value distribution. With ``noisy`` every head layer
        is a factorised-Gaussian noisy layer (mu in the layer itself, sigma in a sibling
        ``<name>_sigma`` layer, linear: the model applies ReLU after the noise).

        Raises:
            ConfigError: If the action space is not Discrete.
        """
        if not isinstance(action_space, gym.spaces.Discrete):
            raise ConfigError(
                f"Q-learning (DQN, ApeX) needs a Discrete action space, got {action_space}. Use PPO (any "
                "action space), or discretise the actions with a gymnasium ActionWrapper."
            )
        config = copy.deepcopy(MODEL_DEFAULTS)
        config.update(model_config or {})
        validate_model_config(config)
        if not isinstance(hiddens, (list, tuple)) or not all(isinstance(v, int) and v > 0 for v in hiddens):
            raise ConfigError(f"hiddens must be a list of positive layer sizes, e.g. [256]; got {hiddens!r}.")
        preprocessor = Preprocessor(obs_space)
        encoder = build_encoder(preprocessor.layout, config, "")
        num_actions = int(action_space.n)
        noise_layers: list[LayerSpec] = []

        def head(prefix: str, out_name: str, outputs: int) -> tuple[tuple[LayerSpec, ...], LayerSpec]:
            layers, size = dense_stack(prefix, encoder.out_size, list(hiddens), "relu")
            out = LayerSpec(out_name, "dense", (size, outputs), init_std=0.01)
            if not noisy:
                return layers, out
            layers = tuple(LayerSpec(layer.name, "dense", layer.kernel_shape, init="noisy_mu") for layer in layers)
            out = LayerSpec(out_name, "dense", (size, outputs), init="noisy_mu")
            noise_layers.extend(LayerSpec(f"{layer.name}_sigma", "dense", layer.kernel_shape, init_std=float(sigma0),
                                          init="noisy_sigma") for layer in (*layers, out))
            return layers, out

        advantage_hiddens, advantage_out = head("q_hidden", "q_out", num_actions * num_atoms)
        value_hiddens: tuple[LayerSpec, ...] = ()
        value_out = None
        if dueling:
            value_hiddens, value_out = head("v_hidden", "v_out", num_atoms)
        return QModelSpec(preprocessor.size, encoder, advantage_hiddens, advantage_out, value_hiddens, value_out,
                          num_actions, config, num_atoms=int(num_atoms), v_min=float(v_min), v_max=float(v_max),
                          noise_layers=tuple(noise_layers))


def _last_hidden_layer_as_output(encoder: EncoderSpec, size: int, config: dict, free_log_std: bool) -> EncoderSpec:
    """``encoder`` with its last dense layer resized to ``size`` outputs (1.13's
    ``no_final_linear``): that layer, activation included, then gives the action
    distribution's inputs. With no hidden layer at all, one layer over the observation
    does (with ``post_fcnet_activation``, as 1.13's network used without ``fcnet_hiddens``).

    Raises:
        ConfigError: For image observations, and with ``free_log_std``.
    """
    if encoder.images:
        raise ConfigError(
            "model.no_final_linear=True is not supported for image observations: rlstack's CNN ends in its "
            "conv_filters' last layer and a dense logits layer, and cannot make that conv layer the output as 1.13's "
            "VisionNetwork did. Remove no_final_linear, or register a custom model that ends as you need.")
    if free_log_std:
        raise ConfigError(
            "model.no_final_linear=True with free_log_std=True: the last hidden layer would give the means and there "
            "is no linear layer to append the free log stds to (1.13's network dropped them then); set one of them "
            "to False.")
    if encoder.post_fc:
        last = encoder.post_fc[-1]
        post_fc = (*encoder.post_fc[:-1], dataclasses.replace(last, kernel_shape=(last.kernel_shape[0], size)))
        return dataclasses.replace(encoder, post_fc=post_fc, out_size=size)
    if encoder.fc:
        last = encoder.fc[-1]
        fc = (*encoder.fc[:-1], dataclasses.replace(last, kernel_shape=(last.kernel_shape[0], size)))
        return dataclasses.replace(encoder, fc=fc, out_size=size)
    layer = LayerSpec("fc_0", "dense", (len(encoder.vector_columns), size), config["post_fcnet_activation"])
    return dataclasses.replace(encoder, fc=(layer,), out_size=size)


def _register_with_tune(kind: str, name: str, value: type) -> None:
    # Also into Ray Tune's global registry, which every process of the cluster sees
    # (Tune trials build their workers from it).
    from ray.tune.registry import RLLIB_ACTION_DIST, RLLIB_MODEL, _global_registry

    try:
        _global_registry.register(RLLIB_MODEL if kind == "model" else RLLIB_ACTION_DIST, name, value)
    except Exception as exc:  # noqa: BLE001 - e.g. a class that cannot be pickled
        logging.getLogger(__name__).warning(
            "Custom %s %r is registered in this process only (Tune trials will not find it): %s",
            kind.replace("_", " "), name, exc)


def _from_tune_registry(name: str, kind: str = "model") -> type | None:
    import sys

    if "ray.tune" not in sys.modules:
        import ray

        if not ray.is_initialized():
            return None
    from ray.tune.registry import RLLIB_ACTION_DIST, RLLIB_MODEL, _global_registry

    category = RLLIB_MODEL if kind == "model" else RLLIB_ACTION_DIST
    try:
        return _global_registry.get(category, name) if _global_registry.contains(category, name) else None
    except Exception:  # noqa: BLE001 - no Ray / GCS reachable: treat as unknown
        return None
