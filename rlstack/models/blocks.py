"""Model blocks of the off-policy actor-critic family (SAC, TD3, DDPG), framework-free.

An :class:`ActorCriticSpec` is an actor and one or two Q critics, each described layer by
layer with the same :class:`~rlstack.models.specs.LayerSpec` / ``build_encoder`` rules as
the catalog's networks, so ``initial_weights(spec, seed)`` draws the canonical initial
weights and ``models/torch/blocks.py``, ``models/tf/blocks.py`` and
``models/numpy/blocks.py`` build the same network from it (a torch and a TF policy built
with one seed start from equal weights, and weights move between them unchanged).

* The actor: the observation encoder of its sub-config (``fcnet_hiddens`` over the vector
  columns, a CNN per image, ``post_fcnet_hiddens``), then one output layer ``actor/out``
  of ``2 * action_dim`` (a squashed Gaussian's means and log stds), ``action_dim`` (a
  deterministic actor; tanh is applied by the policy) or ``num_actions`` (a categorical
  actor's logits) units.
* A Q(s, a) critic (Box actions): the action is appended to the flat observation as one
  more vector component, so it joins the observation's vector columns at the input of
  ``fcnet_hiddens`` (for vector observations: ``concat(obs, a) -> hiddens -> 1``); image
  components go through their CNN first and meet the rest in ``post_fcnet_hiddens``.
* A Q(s, .) critic (Discrete actions): the observation encoder, then ``num_actions``
  outputs.
* Twin critics (``twin_q``): a second critic of the same shape, ``twin_q/...``.

Layer names are ``actor/...``, ``q/...`` and ``twin_q/...``; weights are
``"<layer>/kernel"`` and ``"<layer>/bias"`` in the canonical layout of ``specs.py``.

Limits: Dict / Tuple / Discrete observations are flattened by the preprocessor as for
every built-in model (images inside a Dict keep their CNN); acting in numpy covers dense
networks only (no conv layers); no recurrent blocks.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import gymnasium as gym
import numpy as np

from rlstack.errors import ConfigError
from rlstack.models.catalog import MODEL_DEFAULTS, validate_model_config
from rlstack.models.preprocessors import Component, Preprocessor
from rlstack.models.specs import EncoderSpec, LayerSpec, build_encoder

# What the actor's output layer parameterises.
ACTOR_KINDS = ("squashed_gaussian", "deterministic", "categorical")


@dataclass(frozen=True)
class ActorSpec:
    """The actor network.

    Attributes:
        encoder: Observation features (layers ``actor/fc_i``, ``actor/cnn...``,
            ``actor/post_fc_i``).
        out: The output layer ``actor/out``.
        kind: One of :data:`ACTOR_KINDS`.
        action_dim: Size of a Box action, or the number of Discrete actions.
    """

    encoder: EncoderSpec
    out: LayerSpec
    kind: str
    action_dim: int

    @property
    def num_outputs(self) -> int:
        """Size of the actor's output."""
        return self.out.kernel_shape[1]

    @property
    def layers(self) -> list[LayerSpec]:
        """Every layer of the actor, in build order."""
        return [*self.encoder.layers, self.out]


@dataclass(frozen=True)
class CriticSpec:
    """One Q network.

    Attributes:
        name: ``"q"`` or ``"twin_q"`` (the prefix of its layer names).
        encoder: Features of ``concat(flat_obs, action)`` (Q(s, a)) or of the flat
            observation (Q(s, .)).
        out: The output layer ``<name>/out``: 1 unit for Q(s, a), one per action for Q(s, .).
        action_size: Columns the action adds to the input (0 for Q(s, .)).
    """

    name: str
    encoder: EncoderSpec
    out: LayerSpec
    action_size: int

    @property
    def layers(self) -> list[LayerSpec]:
        """Every layer of the critic, in build order."""
        return [*self.encoder.layers, self.out]


@dataclass(frozen=True)
class ActorCriticSpec:
    """An actor and its Q critics (one, or two with ``twin_q``).

    Attributes:
        obs_size: Columns of the flat observation.
        actor: The actor.
        critics: The critics, ``q`` first.
        model_config: The actor's model config (what a ModelV2 reports as its config).
    """

    obs_size: int
    actor: ActorSpec
    critics: tuple[CriticSpec, ...]
    model_config: dict = field(default_factory=dict, compare=False)
    # Fields the catalog's generic code reads (initial_weights, the TF policy base).
    free_log_std: bool = False
    vf_encoder: None = None
    lstm: None = None  # no recurrent actor-critic blocks

    @property
    def encoder(self) -> EncoderSpec:
        """The actor's observation encoder (what generic code inspects for images)."""
        return self.actor.encoder

    @property
    def action_dim(self) -> int:
        """Size of a Box action, or the number of Discrete actions."""
        return self.actor.action_dim

    @property
    def discrete(self) -> bool:
        """Whether the critics are Q(s, .) critics of a Discrete action space."""
        return self.critics[0].action_size == 0

    @property
    def layers(self) -> list[LayerSpec]:
        """Every layer (actor, then each critic), in build order: the order
        ``initial_weights`` draws them in."""
        return [*self.actor.layers, *(layer for critic in self.critics for layer in critic.layers)]

    @property
    def stacked_critics(self) -> bool:
        """Whether the critics can run as one stacked product per layer: two of them
        over dense layers only (no images), the usual case. The framework builders then
        hold each layer of both critics as one ``[2, in, out]`` kernel."""
        return len(self.critics) == 2 and not self.critics[0].encoder.images


def sub_model_config(config: dict | None, where: str) -> dict:
    """``MODEL_DEFAULTS`` under a ``Q_model`` / ``policy_model`` style sub-config, checked.

    Args:
        config: The sub-config (None: the defaults).
        where: The key it came from, for messages (e.g. ``"Q_model"``).

    Raises:
        ConfigError: For an unknown key, a custom model (not supported in these blocks)
            or a bad value, naming ``where``.
    """
    merged = copy.deepcopy(MODEL_DEFAULTS)
    merged.update(copy.deepcopy(config or {}))
    if merged.get("custom_model"):
        raise ConfigError(
            f"{where}.custom_model={merged['custom_model']!r} is not supported yet: the actor and critics are "
            f"rlstack's built-in blocks (shape them with {where}.fcnet_hiddens, fcnet_activation, "
            f"post_fcnet_hiddens and conv_filters); remove custom_model from {where}.")
    try:
        validate_model_config(merged)
    except ConfigError as exc:
        raise ConfigError(f"In {where}: {exc}") from exc
    return merged


def _dense(name: str, in_size: int, out_size: int, init_std: float = 0.01) -> LayerSpec:
    return LayerSpec(name, "dense", (in_size, out_size), init_std=init_std)


def actor_critic_spec(obs_space: gym.Space, action_space: gym.Space, actor_config: dict | None,
                      critic_config: dict | None, actor_kind: str, twin_q: bool,
                      actor_key: str = "policy_model", critic_key: str = "Q_model") -> ActorCriticSpec:
    """The actor and critics for a pair of spaces.

    Args:
        obs_space: The observation space (a flattened Box with ``original_space`` is read
            as its original space).
        action_space: A bounded Box (Q(s, a) critics) or a Discrete space (Q(s, .)).
        actor_config: The actor's model sub-config (``MODEL_DEFAULTS`` keys).
        critic_config: The critics' model sub-config.
        actor_kind: One of :data:`ACTOR_KINDS`.
        twin_q: Two critics instead of one.
        actor_key: The actor sub-config's config key, for messages.
        critic_key: The critics' sub-config's config key, for messages.

    Raises:
        ConfigError: For an action space the blocks do not cover, a kind that does not
            fit it, or a bad sub-config.
    """
    if actor_kind not in ACTOR_KINDS:
        raise ConfigError(f"actor kind {actor_kind!r} is unknown; use one of {', '.join(ACTOR_KINDS)}.")
    discrete = isinstance(action_space, gym.spaces.Discrete)
    if not discrete and not isinstance(action_space, gym.spaces.Box):
        raise ConfigError(f"The actor-critic blocks need a Box or Discrete action space, got {action_space}.")
    if discrete != (actor_kind == "categorical"):
        raise ConfigError(f"A {actor_kind} actor does not fit the action space {action_space}.")
    actor_config = sub_model_config(actor_config, actor_key)
    critic_config = sub_model_config(critic_config, critic_key)
    obs_space = getattr(obs_space, "original_space", obs_space)
    layout = Preprocessor(obs_space).layout
    obs_size = Preprocessor(obs_space).size
    action_dim = int(action_space.n) if discrete else int(np.prod(action_space.shape))

    encoder = build_encoder(layout, actor_config, "actor/")
    outputs = 2 * action_dim if actor_kind == "squashed_gaussian" else action_dim
    actor = ActorSpec(encoder, _dense("actor/out", encoder.out_size, outputs), actor_kind, action_dim)

    # Q(s, a): the action is one more vector component after the observation's columns.
    critic_layout = layout if discrete else [*layout, Component("vector", (action_dim,), obs_size, action_dim)]
    critics = []
    for name in ("q", "twin_q")[: 2 if twin_q else 1]:
        critic_encoder = build_encoder(critic_layout, critic_config, f"{name}/")
        out = _dense(f"{name}/out", critic_encoder.out_size, action_dim if discrete else 1)
        critics.append(CriticSpec(name, critic_encoder, out, 0 if discrete else action_dim))
    return ActorCriticSpec(obs_size, actor, tuple(critics), actor_config)


def critic_weight_names(spec: ActorCriticSpec) -> list[str]:
    """The canonical weight names of the critics (what a target network holds)."""
    return [f"{layer.name}/{part}" for critic in spec.critics for layer in critic.layers
            for part in ("kernel", "bias")]


def actor_weight_names(spec: ActorCriticSpec) -> list[str]:
    """The canonical weight names of the actor (what acting needs)."""
    return [f"{layer.name}/{part}" for layer in spec.actor.layers for part in ("kernel", "bias")]
