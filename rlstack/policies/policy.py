"""Policy: the framework-free surface every algorithm's policy offers.

Numpy in, numpy out: rollout workers and trainers never touch a tensor. Observations
arrive already flattened by the policy's :class:`~rlstack.models.Preprocessor` and
filtered; actions leave in the layout of the action space.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import numpy as np

from rlstack.errors import ConfigError
from rlstack.models.catalog import ModelCatalog, action_dist_spec
from rlstack.models.modelv2 import ModelV2, model_obs_space
from rlstack.models.preprocessors import Preprocessor
# Re-exported: check_observation lived here.
from rlstack.policies.observations import check_observation  # noqa: F401
from rlstack.policies.view_requirement import check_views
from rlstack.policies.policy_map import PolicySpec  # noqa: F401 - 1.13's ray.rllib.policy.policy.PolicySpec
from rlstack.policies.recurrent import RecurrentPolicyMixin
from rlstack.sample_batch import SampleBatch

PolicyState = dict[str, np.ndarray]

def encode_json(value: Any) -> np.ndarray:
    """Stores a JSON-able value (e.g. a random generator's state) as a uint8 array."""
    return np.frombuffer(json.dumps(value).encode("utf-8"), dtype=np.uint8).copy()


def decode_json(array: np.ndarray) -> Any:
    """Reads back a value stored with :func:`encode_json`."""
    return json.loads(np.asarray(array, dtype=np.uint8).tobytes().decode("utf-8"))


def target_state(weights: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A target network's weights as policy-state entries, under ``target/<name>``
    (DQN's, DDPG's and SAC's policies save their target networks so)."""
    return {f"target/{name}": value for name, value in weights.items()}


def saved_target_weights(state: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The target network's weights in a policy state, as :func:`target_state` stored
    them; empty for a state saved without them (the target then starts as a copy)."""
    return {key[len("target/"):]: value for key, value in state.items() if key.startswith("target/")}


class Policy(RecurrentPolicyMixin, ABC):
    """One learnable behaviour: a model, an action distribution and a loss.

    Args:
        observation_space: The env's observation space.
        action_space: The env's action space.
        config: The trainer's merged config.
        num_gpus: GPUs this copy may use (the learner's ``num_gpus``, or a rollout
            worker's ``num_gpus_per_worker``).
        sampling_seed: Seed of this copy's own action-sampling generator (None: random).
            Each copy samples from its own generator so that nothing else in the
            process (building another policy, evaluation) shifts its random stream.
    """

    framework: str = ""
    # What rollout workers record for this policy: the next observation of every step
    # (Q-learning), and V(s) where a piece is cut or truncated (policy gradients).
    needs_next_obs: bool = False
    needs_bootstrap_value: bool = True
    # The rollout worker's callbacks (set_callbacks); learn_on_batch calls their
    # on_learn_on_batch only when they override it.
    callbacks: Any = None
    calls_learn_hook: bool = False
    # What on_learn_on_batch wrote on the last learn_on_batch (replaced, never mutated).
    learn_custom_metrics: dict[str, Any] = {}
    # Box actions always come out in [-1, 1] (a tanh actor: DDPG, TD3), so
    # unsquash_actions maps them onto the bounds whatever normalize_actions says, as
    # 1.13's actors squashed onto the bounds themselves with normalize_actions=False.
    acts_in_unit_box: bool = False
    # Shuffle rows before each SGD epoch; sequence losses (V-trace) and per-row
    # statistics keep the batch order.
    shuffle_minibatches: bool = True
    # Loss statistics with one value per minibatch row (DQN's "td_error"): learn_on_batch
    # returns each as one array over the whole batch, in its row order, not averaged.
    per_row_stats: tuple[str, ...] = ()
    # Statistics a summed loss reports as means over rows (A3C's entropy): weighted by
    # rows, not added up, where compute_gradients sums a batch's microbatches.
    row_mean_stats: tuple[str, ...] = ()

    @staticmethod
    def pin_threads(config: dict) -> None:
        """Sizes the framework's thread pools in a rollout worker's process, before its
        policy is built (no-op by default)."""

    def __init__(
        self, observation_space: gym.Space, action_space: gym.Space, config: dict, num_gpus: float = 0,
        sampling_seed: int | None = None,
    ) -> None:
        self.sampling_seed = sampling_seed
        self.observation_space = observation_space
        self.action_space = action_space
        self.config = config
        self.num_gpus = num_gpus
        # (sgd_minibatch_size, num_sgd_iter) that learn_on_batch runs instead of the
        # config's, inside plan_override() (1.x's TrainOneStep arguments).
        self._plan_override: tuple[int, int] | None = None
        self.preprocessor = Preprocessor(observation_space)
        self.dist_spec = action_dist_spec(action_space, config.get("model"))
        self.global_timestep = 0
        self.worker_index, self.num_workers = 0, 0
        # 1.x's record of the columns the policy reads, by name (ViewRequirement); a
        # hand-written policy may add to it, as 1.13's examples do. rlstack's samplers
        # build their batches without reading it.
        self.view_requirements: dict[str, Any] = {}
        if self.per_row_stats and self.shuffle_minibatches:
            raise TypeError(
                f"{type(self).__name__} sets per_row_stats={self.per_row_stats!r} and shuffle_minibatches=True; "
                "per-row statistics come back in the batch's row order, which needs unshuffled minibatches. Set "
                "shuffle_minibatches = False on the class.")

    @property
    def device_name(self) -> str:
        """Where this policy computes: ``"cpu"``, ``"cuda:0"`` (torch) or ``"/GPU:0"`` (TF)."""
        return str(getattr(self, "device", "cpu"))

    def model_spec(self) -> Any:
        """The built-in network for this policy's spaces and model config (the catalog's
        policy-and-value network; Q-learning policies return a Q-network spec)."""
        spec = ModelCatalog.get_model_spec(self.observation_space, self.action_space, self.config.get("model", {}))
        if spec.lstm is not None and not self.supports_recurrent_models:
            raise ConfigError(
                f"model.use_lstm=True, but {type(self).__name__} does not train recurrent models yet; use PPO, PG, "
                "A2C, A3C or IMPALA, or set use_lstm=False.")
        return spec

    def bind_worker(self, worker_index: int, num_workers: int) -> None:
        """Tells the policy which rollout worker holds it (index 0: the driver's copy);
        per-worker exploration (ApeX) depends on it."""
        self.worker_index, self.num_workers = worker_index, num_workers

    def set_callbacks(self, callbacks: Any, hooks: frozenset[str]) -> None:
        """Gives the policy its worker's callbacks object and the hooks it overrides."""
        self.callbacks = callbacks
        self.calls_learn_hook = "on_learn_on_batch" in hooks
        self.learn_custom_metrics: dict[str, Any] = {}

    def run_learn_on_batch_callback(self, batch: SampleBatch) -> None:
        """Calls ``on_learn_on_batch`` (``learn_on_batch`` does, first thing, when
        :attr:`calls_learn_hook`); what it writes into its ``result`` dict is kept in
        :attr:`learn_custom_metrics` and reported as the policy's ``custom_metrics``."""
        result: dict[str, Any] = {}
        self.callbacks.on_learn_on_batch(policy=self, train_batch=batch, result=result)
        self.learn_custom_metrics = result

    def make_custom_model(self) -> Any:
        """Builds ``config["model"]["custom_model"]`` (a registered name, or the class
        itself as classic RLlib allowed), or returns None without one.

        The class is constructed as ``cls(obs_space, action_space, num_outputs,
        model_config, name, **custom_model_config)`` (without the keyword arguments if
        it accepts none, as classic RLlib retried) with ``obs_space`` from
        :func:`~rlstack.models.modelv2.model_obs_space`. A 1.x ``ModelV2`` subclass is
        returned as it is; any other object (rlstack's shortcut form, called on flat
        observations and returning ``(dist_inputs, values)``) goes through
        :meth:`adapt_shortcut_model`, so the policy always holds a ModelV2.
        """
        model_config = self.config.get("model", {})
        custom = model_config.get("custom_model")
        if not custom:
            return self._make_attention_model(model_config) if model_config.get("use_attention") else None
        model_class = custom if isinstance(custom, type) else ModelCatalog.get_custom_model(custom)
        algorithm_kwargs = self.custom_model_kwargs(model_class)
        num_outputs = algorithm_kwargs.pop("num_outputs", self.dist_spec.num_outputs)
        # use_lstm around a custom model (1.13's auto-wrapping): the model is built with
        # num_outputs=None, its outputs are the LSTM's inputs (see wrap_in_lstm).
        wrap = bool(model_config.get("use_lstm")) and isinstance(model_class, type) \
            and issubclass(model_class, ModelV2) and not hasattr(model_class, "forward_rnn")
        args = (model_obs_space(self.observation_space), self.action_space, None if wrap else num_outputs,
                model_config, "model")
        custom_kwargs = {**algorithm_kwargs, **model_config.get("custom_model_config", {})}
        try:
            model = model_class(*args, **custom_kwargs)
        except TypeError as exc:
            # Classic RLlib retried without the keyword arguments for models that read
            # custom_model_config from model_config instead.
            if not custom_kwargs or "unexpected keyword argument" not in str(exc):
                raise
            model = model_class(*args)
        except ValueError as exc:
            # A 1.x Keras model doing what Keras 2 allowed and Keras 3 (TensorFlow's Keras
            # since 2.16) refuses: TF ops (tf.sequence_mask, ...) on symbolic inputs, or a
            # shape given as a number.
            if "KerasTensor cannot be used as input to a TensorFlow function" in str(exc):
                raise ConfigError(
                    f"custom_model {model_class.__name__} calls TensorFlow ops on Keras inputs while building a "
                    "functional model, which Keras 3 refuses. Wrap those ops in a keras Layer, or build the layers in "
                    "__init__ and call them with the ops in forward().") from exc
            if re.search(r"Cannot convert '\d+' to a shape", str(exc)):
                raise ConfigError(
                    f"custom_model {model_class.__name__} gives Keras a shape as a number ({exc}); Keras 3 takes "
                    "shapes as tuples: tf.keras.layers.Input(shape=(n,)) where Keras 2 took shape=(n).") from exc
            raise
        if not isinstance(model, ModelV2):
            return self.adapt_shortcut_model(model)
        # A layer stored under the name of a method rlstack calls (a 1.x model's
        # `self.value = nn.Linear(...)`) would be called in its place, or hidden by it.
        hidden = [name for name in ("value", "q_values", "policy_and_value", "context", "last_output")
                  if name in vars(model) or name in (getattr(model, "_modules", None) or {})]
        if hidden:
            raise ConfigError(
                f"custom_model {model_class.__name__} sets self.{hidden[0]}, the name of ModelV2.{hidden[0]}(), "
                f"which rlstack calls; rename the attribute (e.g. self._{hidden[0]}_branch).")
        check_views(model.view_requirements, f"custom_model {model_class.__name__}")
        if wrap and not len(model.get_initial_state()):
            model = self.wrap_in_lstm(model, num_outputs)
        if len(model.get_initial_state()) and not self.supports_recurrent_models:
            from rlstack.trainers.common.registry import recurrent_algorithms

            raise ConfigError(
                f"custom_model {model_class.__name__} is recurrent (get_initial_state() returns "
                f"{len(model.get_initial_state())} state tensors), which {type(self).__name__} does not support "
                f"yet; recurrent models train with {', '.join(recurrent_algorithms())}. Use one of those, or a model "
                "whose get_initial_state() returns [] (e.g. stack past observations with a gymnasium wrapper).")
        return model

    def wrap_in_lstm(self, model: ModelV2, num_outputs: int) -> ModelV2:
        """``use_lstm`` around a custom model built with ``num_outputs=None`` (its
        ``num_outputs`` then the size of its outputs): an LSTM of ``lstm_cell_size`` over
        them, and the action and value heads on the LSTM's output. Each framework's policy
        base defines it."""
        raise ConfigError(f"model.use_lstm around custom_model {type(model).__name__} is not supported by "
                          f"{type(self).__name__}; make the custom model recurrent itself (a RecurrentNetwork).")

    def custom_model_kwargs(self, model_class: type) -> dict[str, Any]:
        """What the algorithm gives a custom model class beside ``custom_model_config``
        (and ``num_outputs``, if it differs from the action distribution's input size):
        1.13's DQN gave its Q-model bases the Q-head's keys. None by default."""
        return {}

    def model_metrics(self) -> dict[str, Any]:
        """The model's ``metrics()`` read out as numbers (scalars as floats, others as
        arrays), reported in the results' ``info/learner/<policy>/model`` and
        ``learner_stats["model"]``."""
        model = getattr(self, "model", None)
        if not isinstance(model, ModelV2):
            return {}
        return {key: _as_number(value) for key, value in model.metrics().items()}

    def adapt_shortcut_model(self, model: Any) -> ModelV2:
        """Wraps a shortcut custom model (flat observations in, ``(dist_inputs, values)``
        out) as a ModelV2; each framework's policy base defines it."""
        raise NotImplementedError(f"{type(self).__name__} does not support custom models.")

    @abstractmethod
    def compute_actions(self, obs_batch: np.ndarray, explore: bool | None = None,
                        state_batches: list[np.ndarray] | None = None, prev_action_batch: Any = None,
                        prev_reward_batch: Any = None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Chooses actions for a batch of preprocessed observations.

        Args:
            obs_batch: ``float32 [B, obs_size]``.
            explore: Sample from the action distribution (True) or take its mode
                (False); None uses ``config["explore"]``.
            state_batches: A recurrent model's state, one ``[B, ...]`` array per state
                tensor (None: the initial state); only recurrent policies take it.
            prev_action_batch: Each row's previous action(s) in the policy's form, for a
                model that reads them (:attr:`prev_inputs`; None: zeros, an episode's
                start); only recurrent policies take it.
            prev_reward_batch: Each row's previous reward(s), likewise.

        Returns:
            ``(actions, extras)``: actions ``[B, ...]`` and numpy columns such as
            ``action_logp``, ``action_dist_inputs`` and ``vf_preds``; a recurrent
            policy adds the new state as ``state_out_0``, ``state_out_1``, ...
        """

    def compute_single_action(
        self,
        obs: Any = None,
        state: list[Any] | None = None,
        *,
        prev_action: Any = None,
        prev_reward: Any = None,
        info: dict | None = None,
        input_dict: dict[str, Any] | None = None,
        episode: Any = None,
        explore: bool | None = None,
        timestep: int | None = None,
        **kwargs: Any,
    ) -> tuple[Any, list[Any], dict[str, Any]]:
        """Classic RLlib's single-observation form of :meth:`compute_actions`.

        As in RLlib 1.13 the observation is already preprocessed (flattened) and
        filtered, and the action is the distribution's (not yet unsquashed or
        clipped); ``Trainer.compute_single_action`` does both for raw observations.

        Args:
            obs: One preprocessed observation ``[obs_size]``.
            state: A recurrent model's state: one array per state tensor, as
                :meth:`get_initial_state` gives them (the previous call's state_out
                after that); ignored (may be None or ``[]``) for a model without state.
            prev_action: The previous action as this method returned it, for a model
                that reads it (``lstm_use_prev_action``; a custom recurrent model); with
                ``attention_use_n_prev_actions: n`` the last ``n`` actions, oldest first.
                None (or zeros) at an episode's start; unused by a model that does not
                read it.
            prev_reward: The previous reward (``lstm_use_prev_reward``), or the last
                ``attention_use_n_prev_rewards`` rewards, oldest first; as ``prev_action``.
            info: Accepted for 1.13 compatibility; unused.
            input_dict: ``{"obs": obs}``, used instead of ``obs`` when given.
            episode: Accepted for 1.13 compatibility; unused.
            explore: Sample (True) or take the mode (False); None uses ``config["explore"]``.
            timestep: Accepted for 1.13 compatibility; exploration schedules follow the
                policy's ``global_timestep`` instead.
            **kwargs: Forward-compatibility placeholder, as in 1.13.

        Returns:
            ``(action, state_outs, extra_fetches)``: ``state_outs`` is the model's
            new state (``[]`` for a model without state); ``extra_fetches`` holds this
            row of ``action_logp``, ``action_dist_inputs``, ``vf_preds`` and the like.

        Raises:
            ValueError: If neither ``obs`` nor ``input_dict["obs"]`` is given, a state of
                the wrong count or shape, or a ``prev_action`` / ``prev_reward`` of the
                wrong shape or outside the action space.
        """
        if input_dict is not None:
            obs = input_dict[SampleBatch.OBS]
            state = state if state is not None else [input_dict[key] for key in sorted(input_dict)
                                                     if key.startswith("state_in_")] or None
            prev_action = input_dict.get(SampleBatch.PREV_ACTIONS, prev_action)
            prev_reward = input_dict.get(SampleBatch.PREV_REWARDS, prev_reward)
        if obs is None:
            raise ValueError("compute_single_action() needs an observation: pass obs=... or input_dict={'obs': ...}.")
        if not self.is_recurrent:
            actions, extras = self.compute_actions(np.asarray(obs)[None], explore=explore)
            return actions[0], [], {key: value[0] for key, value in extras.items()}
        return self.single_recurrent_action(np.asarray(obs), state, prev_action, prev_reward, explore)

    def compute_log_likelihoods(self, actions: Any, obs_batch: np.ndarray, state_batches: Any = None,
                                prev_action_batch: Any = None, prev_reward_batch: Any = None,
                                actions_normalized: bool = True) -> np.ndarray:
        """The log-likelihood ``float32 [B]`` of each action in the policy's action
        distribution at its observation (1.13's name; off-policy estimators use it).

        ``actions`` are in the policy's form (as recorded in batches, before the env's
        bounds were applied); ``obs_batch`` preprocessed and filtered, as batches hold it.

        Raises:
            NotImplementedError: A recurrent policy, or one whose actions come from no
                distribution it reports (``action_dist_inputs``; DQN's Q-values).
        """
        from rlstack.models.numpy.distributions import DISTRIBUTIONS

        if self.is_recurrent:
            raise NotImplementedError(f"{type(self).__name__}: log-likelihoods of a recurrent policy need each "
                                      "row's state; estimate with a non-recurrent policy")
        _, extras = self.compute_actions(np.asarray(obs_batch, dtype=np.float32), explore=False)
        inputs = extras.get(SampleBatch.ACTION_DIST_INPUTS)
        dist_class = DISTRIBUTIONS.get(self.dist_spec.kind)
        if inputs is None or dist_class is None:
            raise NotImplementedError(
                f"{type(self).__name__} reports no action distribution ({self.dist_spec.kind}) to compute "
                "log-likelihoods from: off-policy estimation needs a stochastic policy (PG, PPO, A2C, IMPALA, "
                "BC, MARWIL, SAC)")
        return dist_class(np.asarray(inputs), self.dist_spec).logp(np.asarray(actions))

    def compute_values(self, obs_batch: np.ndarray) -> np.ndarray:
        """Returns the value estimates ``float32 [B]`` of preprocessed observations (a
        recurrent policy's also takes ``state_batches``, ``prev_action_batch`` and
        ``prev_reward_batch``, as :meth:`compute_actions`).

        Every built-in policy has one; a hand-written policy that does not learn (a fixed
        heuristic in a multi-agent run) need not, and its rows get no bootstrap values.
        """
        raise NotImplementedError(f"{type(self).__name__} has no value function (compute_values).")

    def postprocess_trajectory(self, batch: SampleBatch) -> SampleBatch:
        """Adds algorithm columns (advantages, n-step returns) to one trajectory piece."""
        return batch

    def _create_exploration(self) -> Any:
        """Classic RLlib's exploration object for a hand-written policy (1.13's examples
        keep it as ``self.exploration``): the ``exploration_config`` it was made from.
        rlstack's own policies explore inside their acting code."""
        from rlstack.utils.exploration import ExplorationConfig

        return ExplorationConfig(dict(self.config.get("exploration_config") or {}))

    @classmethod
    def with_updates(cls, **changes: Any) -> type:
        """A subclass with some parts replaced by classic RLlib's template functions:
        ``loss_fn``, ``postprocess_fn``, ``stats_fn``, ``name``, ... (see
        :mod:`rlstack.policies.policy_template`); what is not given stays this class's.
        1.13's way to change one part of a built-in policy, e.g.
        ``PGTorchPolicy.with_updates(loss_fn=my_loss)``."""
        from rlstack.policies.policy_template import build_policy_class

        name = changes.pop("name", cls.__name__)
        return build_policy_class(name, cls.framework, _base=cls, loss_fn=changes.pop("loss_fn", None), **changes)

    def learn_on_batch(self, batch: SampleBatch) -> dict[str, float]:
        """Improves the policy on a train batch and returns learner statistics.

        A policy that learns overrides this; the base, for hand-written policies that only
        act (1.13 let them define ``compute_actions`` alone), raises.

        Raises:
            NotImplementedError: Naming the class and the way out.
        """
        raise NotImplementedError(
            f"{type(self).__name__} does not learn (it defines no learn_on_batch): leave its policy id out of "
            "multiagent.policies_to_train, or define learn_on_batch(self, batch).")

    def minibatch_plan(self, n: int) -> tuple[int, int]:
        """How ``learn_on_batch`` cuts a train batch of ``n`` rows.

        Returns:
            ``(minibatch_size, num_epochs)``: ``sgd_minibatch_size`` (the whole batch when
            unset) and ``num_sgd_iter`` (1 when unset). The minibatches of an epoch are
            consecutive ``minibatch_size``-row slices of the (shuffled, see
            :attr:`shuffle_minibatches`) batch; one gradient step each. For a recurrent
            model the rows are whole sequences (:meth:`learner_batch`), and
            ``sgd_minibatch_size // max_seq_len`` of them make a minibatch.
        """
        size, epochs = self._plan_override or (int(self.config.get("sgd_minibatch_size") or 0),
                                               int(self.config.get("num_sgd_iter", 1)))
        if self.is_recurrent and size and not self.sequences_in_row_order:
            # n counts sequences here; sgd_minibatch_size counts rows, as in 1.13.
            size = max(1, size // self.max_seq_len())
        return min(size or n, n), epochs

    @contextlib.contextmanager
    def plan_override(self, sgd_minibatch_size: int, num_sgd_iter: int) -> Iterator[None]:
        """Within the block, :meth:`minibatch_plan` (and so ``learn_on_batch``) cuts batches
        by these values instead of the config's: what 1.x's ``TrainOneStep(num_sgd_iter=,
        sgd_minibatch_size=)`` asked of a policy whose ``learn_on_batch`` took one
        gradient step (0 rows: the whole batch).

        Args:
            sgd_minibatch_size: Rows per gradient step (0: the whole batch).
            num_sgd_iter: Epochs over the batch.
        """
        previous, self._plan_override = self._plan_override, (int(sgd_minibatch_size or 0), int(num_sgd_iter))
        try:
            yield
        finally:
            self._plan_override = previous

    def get_weights(self) -> dict[str, np.ndarray]:
        """Returns the model weights as numpy arrays (canonical layout for built-in models);
        none for a policy without a model (the base: a hand-written heuristic)."""
        return {}

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Loads weights from :meth:`get_weights` (of either framework, for built-in models).

        Raises:
            NotImplementedError: In the base, for weights it has nowhere to put.
        """
        if weights:
            raise NotImplementedError(
                f"{type(self).__name__} has no weights to set (it defines no set_weights) but was given "
                f"{sorted(weights)[:3]}...; define set_weights(self, weights) to load them.")

    def acting_weights(self) -> dict[str, np.ndarray]:
        """What this policy's separate acting copy needs after an update (the copy loads
        it with :meth:`set_acting_weights`): every weight by default. A learner whose copy
        acts with part of the model (SAC's actor, not its critics) returns that part."""
        return self.get_weights()

    def set_acting_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Loads the :meth:`acting_weights` of the learner this policy acts for (by
        default all of its weights: :meth:`set_weights`)."""
        self.set_weights(weights)

    def shared_weights(self) -> dict[str, np.ndarray] | None:
        """The weights as numpy arrays that share memory with the policy's own parameters,
        or None (the default) where that is not possible. An acting copy in the same
        process that holds them sees every in-place update without a copy."""
        return None

    def share_weights(self, weights: dict[str, np.ndarray]) -> bool:
        """Acts from ``weights`` (another policy's :meth:`shared_weights`) in place, without
        copying them, if this policy can; returns whether it does. No by default."""
        return False

    def on_global_var_update(self, global_timestep: int) -> None:
        """Moves schedules (learning rate, entropy coefficient) to ``global_timestep``."""
        self.global_timestep = int(global_timestep)

    def get_state(self) -> PolicyState:
        """Everything needed to resume learning, as a flat dict of numpy arrays.

        Keys: ``weights/<name>``, ``optimizer/<name>`` and ``<coefficient>`` entries.
        """
        state = {f"weights/{name}": value for name, value in self.get_weights().items()}
        state["global_timestep"] = np.asarray(self.global_timestep, dtype=np.int64)
        return state

    def set_state(self, state: PolicyState) -> None:
        """Restores a state from :meth:`get_state`."""
        prefix = "weights/"
        self.set_weights({key[len(prefix):]: value for key, value in state.items() if key.startswith(prefix)})
        if "global_timestep" in state:
            self.on_global_var_update(int(state["global_timestep"]))

    def export_model(self, export_dir: str, onnx: int | None = None) -> str:
        """Writes the model to ``export_dir`` as files that run without rlstack (classic
        RLlib's ``Policy.export_model``): ``obs [B, obs_size]`` (flat, preprocessed
        observations) in, the action distribution's inputs ``output [B, num_outputs]`` out.

        Args:
            export_dir: The directory (created if missing).
            onnx: An ONNX opset version to write ``model.onnx`` (needs the ``export``
                extra); None writes the framework's own format (TorchScript ``model.pt``,
                or a TF SavedModel).

        Returns:
            The path written.
        """
        raise NotImplementedError(f"{type(self).__name__} has no model to export (it only acts in numpy).")

    def export_checkpoint(self, export_dir: str, filename_prefix: str = "model") -> str:
        """Writes :meth:`get_state` (weights, optimizer state, counters) to
        ``<export_dir>/<filename_prefix>.npz`` and returns its path (classic RLlib's
        ``Policy.export_checkpoint``). Plain arrays, no pickle:
        ``policy.set_state(dict(np.load(path)))`` restores it.
        """
        os.makedirs(export_dir, exist_ok=True)
        path = os.path.join(export_dir, f"{filename_prefix}.npz")
        partial = f"{path}.partial.npz"
        np.savez(partial, **self.get_state())
        os.replace(partial, path)  # never a half-written file at ``path``
        return path

    def unsquash_actions(self, actions: np.ndarray, normalize: bool | None = None,
                         clip: bool | None = None) -> np.ndarray:
        """Turns policy outputs into actions the env accepts.

        For Box spaces with ``normalize_actions`` the policy acts in [-1, 1], mapped
        linearly onto the space's bounds; with ``clip_actions`` (or after the mapping)
        actions are clipped to the bounds. Other spaces pass through (Discrete ones
        shifted by the space's ``start``).

        Args:
            actions: A batch of policy outputs.
            normalize: Map onto the bounds (None: ``config["normalize_actions"]``, or
                always for a policy that :attr:`acts_in_unit_box`); the
                ``unsquash_action`` argument of ``Trainer.compute_single_action``.
            clip: Clip to the bounds when not mapping (None: ``config["clip_actions"]``).
        """
        space = self.action_space
        # Distributions index categories from 0; spaces may start elsewhere.
        if isinstance(space, gym.spaces.Discrete):
            return actions + int(space.start) if int(space.start) else actions
        if isinstance(space, gym.spaces.MultiDiscrete):
            return actions.reshape((-1, *space.shape)) + np.asarray(space.start)
        if normalize is None:
            normalize = self.acts_in_unit_box or self.config.get("normalize_actions", True)
        clip = self.config.get("clip_actions", False) if clip is None else clip
        layout = self._action_layout()
        if layout is not None:
            # A Tuple / Dict space: each env gets its nested action, Box leaves mapped.
            return layout.to_env(actions, lambda values, leaf: _unsquash_box(values, leaf, normalize, clip))
        if not isinstance(space, gym.spaces.Box):
            return actions
        return _unsquash_box(actions.reshape((-1, *space.shape)), space, normalize, clip)

    def _action_layout(self) -> Any:
        # The flat layout of a Tuple / Dict action space (None for the others).
        if not isinstance(self.action_space, (gym.spaces.Tuple, gym.spaces.Dict)):
            return None
        spec = getattr(self, "dist_spec", None)
        if spec is not None and spec.layout is not None:
            return spec.layout
        from rlstack.utils.spaces.space_utils import FlatActionLayout

        return FlatActionLayout(self.action_space)

    def squash_actions(self, actions: Any, normalize: bool | None = None) -> Any:
        """:meth:`unsquash_actions` undone: env actions (one, or a batch or window of
        them) back in the policy's form, as a previous action the model reads
        (Discrete / MultiDiscrete shifted back by the space's ``start``, normalized Box
        actions mapped from the bounds onto [-1, 1]). Anything that does not end in the
        action space's shape is returned as it is, for the caller's check to name."""
        space = self.action_space
        if normalize is None:
            normalize = self.acts_in_unit_box or self.config.get("normalize_actions", True)
        layout = self._action_layout() if actions is not None else None
        if layout is not None:
            if isinstance(actions, np.ndarray) and actions.shape[-1:] == (layout.width,):
                return actions  # flat already (the policy's own form)
            batch = _is_batch_of_structs(actions)
            flat = layout.from_env(list(actions) if batch else actions,
                                   lambda values, leaf: _squash_box(values, leaf, normalize))
            return flat if batch else flat[0]
        if actions is None or not isinstance(space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.Box)):
            return actions
        try:
            array = np.asarray(actions, dtype=np.float64)
        except (TypeError, ValueError):
            return actions
        if array.shape[array.ndim - len(space.shape):] != tuple(space.shape):
            return actions
        if isinstance(space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete)):
            return array - np.asarray(space.start) if np.any(space.start) else actions
        return _squash_box(array, space, normalize)


def _unsquash_box(actions: np.ndarray, space: gym.spaces.Box, normalize: bool, clip: bool) -> np.ndarray:
    # Policy outputs for a Box space: mapped from [-1, 1] onto bounds (normalize), or clipped.
    if normalize and np.isfinite(space.low).all() and np.isfinite(space.high).all():
        actions = space.low + (np.clip(actions, -1.0, 1.0) + 1.0) * 0.5 * (space.high - space.low)
    elif clip:
        actions = np.clip(actions, space.low, space.high)
    return actions.astype(space.dtype, copy=False)


def _squash_box(array: np.ndarray, space: gym.spaces.Box, normalize: bool) -> np.ndarray:
    # _unsquash_box undone (the clipping aside).
    if normalize and np.isfinite(space.low).all() and np.isfinite(space.high).all():
        return (array - space.low) / (space.high - space.low) * 2.0 - 1.0
    return array


def _is_batch_of_structs(actions: Any) -> bool:
    # A list of nested actions (one per row), rather than one nested action.
    return isinstance(actions, list) and bool(actions) and isinstance(actions[0], (tuple, dict))


def _as_number(value: Any) -> Any:
    # A framework tensor (or numpy value) as a float or an array: results travel to Tune's
    # driver, which must not need torch or TensorFlow to read them.
    if hasattr(value, "detach"):
        value = value.detach().cpu()
    if hasattr(value, "numpy"):
        value = value.numpy()
    array = np.asarray(value)
    return float(array) if array.ndim == 0 and array.dtype.kind in "biuf" else value
