"""TFPolicy: the TensorFlow 2 base of every algorithm's TF policy.

It owns the model (a ModelV2: the built-in :class:`TFModel` or a user's
:class:`TFModelV2`, whose ``custom_loss`` and ``metrics()`` the learner applies), the
action distribution (``custom_action_dist`` included), device placement, acting, weights
and state. The learner loop it inherits from :class:`~rlstack.policies.tf_learner.TFLearner`
(``tf_learner.py``): the optimizers, ``learn_on_batch``, ``compute_gradients`` /
``apply_gradients`` and the hooks an algorithm overrides besides ``loss()``. Acting,
value estimation and the whole learner loop are ``tf.function``\\ s with fixed input
signatures, traced once (see :meth:`TFPolicy.graph_function`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from rlstack.errors import ConfigError
from rlstack.models.specs import initial_weights
from rlstack.models.modelv2 import ModelV2, model_obs_space
from rlstack.models.tf.distributions import DISTRIBUTIONS, make_distribution
from rlstack.models.tf.framework import tf
from rlstack.models.tf.graph_function import GraphFunction
from rlstack.models.tf.model import TFModel
from rlstack.models.tf.tf_modelv2 import ShortcutTFModel, TFModelV2
from rlstack.policies.learner_loop import load_optimizers_state, optimizers_state
from rlstack.policies.policy import PolicyState, decode_json, encode_json
from rlstack.policies.recurrent import prev_inputs_of
from rlstack.policies.rnn_sequencing import SEQ_MASK, SEQ_START, is_per_sequence, state_in_key, state_out_key
# Re-exported: the algorithm policies import these from here, as before the learner loop
# moved to tf_learner.py.
from rlstack.policies.tf_learner import Optimizer, TFLearner, nest_model_stats  # noqa: F401
# The optimizers live in tf_optimizers.py; imported here too, where algorithm policies find them
# (and the helpers the learner loop used from here before it moved).
from rlstack.policies.tf_optimizers import (Adam, RMSProp, clip_by_global_norm, finite_guard, lr_value,  # noqa: F401
                                            non_finite_as_error)
from rlstack.sample_batch import SampleBatch

logger = logging.getLogger(__name__)

_pools_sized = False


def size_thread_pools(intra: int | None, inter: int | None) -> None:
    """Sets TensorFlow's intra- and inter-op thread pools for this process, once: the
    first policy built in a process decides. None keeps TF's default (one thread per
    core), 0 lets TF pick. A pool the user sized with ``tf.config.threading`` before the
    first policy was built keeps the user's size. TF fixes its pools at its first op, so
    a process that already ran TensorFlow keeps the pools it has."""
    global _pools_sized
    if _pools_sized:
        return
    _pools_sized = True
    try:
        if intra is not None and tf.config.threading.get_intra_op_parallelism_threads() == 0:
            tf.config.threading.set_intra_op_parallelism_threads(intra)
        if inter is not None and tf.config.threading.get_inter_op_parallelism_threads() == 0:
            tf.config.threading.set_inter_op_parallelism_threads(inter)
    except RuntimeError:
        logger.debug("TensorFlow already ran in this process; its thread pools stay as they are.")


def get_model_weights(model: ModelV2) -> dict[str, np.ndarray]:
    """A custom model's variables as ``{"<index>:<name>": array}``.

    The index is the variable's position in ``model.variables()``: Keras names unnamed
    layers per process (``dense``, ``dense_1``, ...), so two copies of one model (a
    remote worker's, a DQN target network) may name the same variable differently.
    """
    return {f"{i}:{name}": var.numpy().copy() for i, (name, var) in enumerate(model.variables(as_dict=True).items())}


def set_model_weights(model: ModelV2, weights: dict[str, np.ndarray]) -> None:
    """Loads :func:`get_model_weights` output into a copy of the same model, by position.

    Raises:
        ValueError: If the number of variables or a shape differs.
    """
    by_index = {int(key.split(":", 1)[0]): value for key, value in weights.items()}
    variables = model.variables(as_dict=True)
    if sorted(by_index) != list(range(len(variables))):
        raise ValueError(f"The weights hold {len(by_index)} variables but the custom model has {len(variables)} "
                         f"({', '.join(variables)}); were they saved with another model?")
    for i, (name, var) in enumerate(variables.items()):
        value = np.asarray(by_index[i])
        if tuple(value.shape) != tuple(var.shape):
            raise ValueError(f"Weight {i} ({name}) has shape {value.shape} but the model expects "
                             f"{tuple(var.shape)}; was it saved with another model config?")
        var.assign(value)


class TFPolicy(TFLearner):
    """Base class of TensorFlow policies: subclass it and implement :meth:`~TFLearner.loss`.

    Args:
        observation_space: The env's observation space.
        action_space: The env's action space.
        config: The trainer's merged config.
        num_gpus: GPUs this copy may use.
    """

    framework = "tf"

    # The module class built from model_spec() for built-in models.
    attention_model_class = "rlstack.models.tf.attention_net:AttentionWrapper"
    model_class: type[TFModel] = TFModel

    @staticmethod
    def pin_threads(config: dict) -> None:
        """Sizes a rollout worker's TF thread pools from ``tf_session_args`` (None: one
        thread each, since workers share the machine's cores with each other and the
        learner). Called before the worker's policy is built."""
        args = config.get("tf_session_args") or {}
        intra, inter = args.get("intra_op_parallelism_threads"), args.get("inter_op_parallelism_threads")
        size_thread_pools(1 if intra is None else intra, 1 if inter is None else inter)

    def __init__(
        self, observation_space: gym.Space, action_space: gym.Space, config: dict, num_gpus: float = 0,
        sampling_seed: int | None = None,
    ) -> None:
        super().__init__(observation_space, action_space, config, num_gpus, sampling_seed)
        model_config = config.get("model", {})
        # A custom action distribution (the catalog resolved it and sized the model's
        # outputs by its required_model_output_shape).
        self.custom_dist_class = self.dist_spec.custom_class
        builtin = not (model_config.get("custom_model") or model_config.get("use_attention"))
        spec = self.model_spec() if builtin else None  # built-in models
        # The driver's (learner's) pools, unless a rollout worker's pin came first. On
        # vector observations one intra-op thread is faster: a dense layer's matmul is too
        # small to split (BENCHMARKS.md, "Learner throughput").
        args = config.get("local_tf_session_args") or {}
        intra = args.get("intra_op_parallelism_threads")
        dense = model_config.get("use_attention") or (spec is not None and not spec.encoder.images)
        if intra is None and dense:
            intra = 1
        size_thread_pools(intra, args.get("inter_op_parallelism_threads"))
        self.device = "/CPU:0"
        if num_gpus and num_gpus > 0 and not config.get("_fake_gpus"):
            if tf.config.list_physical_devices("GPU"):
                self.device = "/GPU:0"
            else:
                logger.warning("num_gpus=%s but TensorFlow sees no GPU; the policy runs on the CPU.", num_gpus)
        with tf.device(self.device):
            custom = self.make_custom_model()
            if custom is not None:
                self.model = custom
                self.builtin_model = False
                self.train_variables, self.variable_names = self._find_variables(custom)
            else:
                model_class = self.model_class
                if spec.lstm is not None:
                    from rlstack.models.tf.recurrent_net import TFLSTMModel

                    model_class = TFLSTMModel
                self.model = model_class(spec, model_obs_space(observation_space), action_space, model_config)
                self.model.set_canonical_weights(initial_weights(spec, config.get("seed")))
                self.builtin_model = True
                self.train_variables = self.model.variables_list
            self.sampling_rng = (tf.random.Generator.from_non_deterministic_state() if sampling_seed is None
                                 else tf.random.Generator.from_seed(int(sampling_seed)))
        self.dist_class = self.custom_dist_class or DISTRIBUTIONS[self.dist_spec.kind]
        self._init_learner(config)
        obs_spec = tf.TensorSpec([None, self.preprocessor.size], tf.float32)
        if self.is_recurrent:
            # One step of every row: (obs, *state, *previous actions / rewards) in, the
            # outputs and the new state out.
            n_state = self.num_state_tensors()
            prev_columns = self.prev_inputs.columns() if self.prev_inputs is not None else {}
            specs = [obs_spec, *(tf.TensorSpec([None, *value.shape], tf.float32) for value in self.get_initial_state()),
                     *(tf.TensorSpec([None, *shape], tf.as_dtype(dtype)) for shape, dtype in prev_columns.values())]

            def split(rest: tuple) -> tuple[list, dict]:
                return list(rest[:n_state]), dict(zip(prev_columns, rest[n_state:]))

            self._act_explore = self.graph_function(lambda obs, *rest: self._act(obs, True, *split(rest)), specs)
            self._act_greedy = self.graph_function(lambda obs, *rest: self._act(obs, False, *split(rest)), specs)
            self._value_fn = self.graph_function(lambda obs, *rest: self._step(obs, *split(rest))[1], specs)
        else:
            self._act_explore = self.graph_function(lambda obs: self._act(obs, True), [obs_spec])
            self._act_greedy = self.graph_function(lambda obs: self._act(obs, False), [obs_spec])
            self._value_fn = self.graph_function(self.model.value, [obs_spec])

    def adapt_shortcut_model(self, model: Any) -> ModelV2:
        """Wraps rlstack's shortcut custom model (called on flat observations, returns
        ``(dist_inputs, values)``) as a :class:`TFModelV2`."""
        return ShortcutTFModel(model, model_obs_space(self.observation_space), self.action_space,
                               self.dist_spec.num_outputs, self.config.get("model", {}))

    def first_model_call(self, model: ModelV2, obs: tf.Tensor) -> None:
        """Calls a custom model once on ``obs`` so that lazily built layers create their
        variables (Q-learning policies call it as they act)."""
        initial = model.get_initial_state()
        if initial:
            n = tf.shape(obs)[0]
            state = [tf.repeat(tf.convert_to_tensor(value, tf.float32)[None], n, axis=0) for value in initial]
            prev = prev_inputs_of(model, self.action_space)
            columns = prev.columns() if prev is not None else {}
            model.policy_and_value_rnn(obs, state, tf.ones([n], tf.int32), **{
                key: tf.zeros([n, *shape], tf.as_dtype(dtype)) for key, (shape, dtype) in columns.items()})
        else:
            model.policy_and_value(obs)

    def _find_variables(self, model: ModelV2) -> tuple[list[tf.Variable], list[str]]:
        # A custom model's trainable variables and their names, after a first call.
        if not isinstance(model, TFModelV2):
            raise ConfigError(
                f"Custom model {type(model).__name__} is a ModelV2 but not a TFModelV2, so its variables cannot "
                "be found for framework='tf'. Subclass rlstack.models.tf.tf_modelv2.TFModelV2 (or set "
                "framework='torch' for a TorchModelV2).")
        self.first_model_call(model, tf.zeros([1, self.preprocessor.size], tf.float32))
        named = model.trainable_variables(as_dict=True)
        if not named:
            raise ValueError(
                f"Custom model {self.config['model']['custom_model']!r} has no trainable variables after a first "
                "call; create its tf.Variables (or Keras layers) in __init__ or on the first call.")
        return list(named.values()), list(named)

    def action_distribution(self, dist_inputs: tf.Tensor) -> Any:
        """The action distribution of ``dist_inputs`` (the custom one when configured)."""
        return make_distribution(self.dist_class, dist_inputs, self.dist_spec, self.model)

    def graph_function(self, fn: Callable, input_signature: list | tuple | None = None) -> Callable:
        """``tf.function(fn)``; AutoGraph only for custom models.

        Our own code (losses, built-in models, the SGD loops) has no Python control flow
        on tensors, so AutoGraph's source rewriting only cost time: about half of the
        first ``train()`` with RL-Zoo's PPO settings (BENCHMARKS.md).
        A custom model may branch on tensors in Python, so its graphs keep AutoGraph.
        With an ``input_signature`` the graph is a :class:`GraphFunction`, called without
        ``tf.function``'s per-call dispatch (see its module).
        """
        if input_signature is None:
            return tf.function(fn, autograph=self.needs_autograph)
        return GraphFunction(fn, input_signature, autograph=self.needs_autograph)

    @property
    def needs_autograph(self) -> bool:
        """Whether the graphs need AutoGraph: for a custom model, unless it says it has no
        Python control flow on tensors (``autograph_free``, as rlstack's GTrXLNet)."""
        return not (self.builtin_model or getattr(self.model, "autograph_free", False))

    # ----- acting -----------------------------------------------------------------

    def _step(self, obs: tf.Tensor, state: Any, prev: dict[str, tf.Tensor],
              ) -> tuple[tf.Tensor, tf.Tensor, list[tf.Tensor]]:
        # One step of a recurrent model for a batch of rows (sequences of length 1).
        return self.model.policy_and_value_rnn(obs, list(state), tf.ones(tf.shape(obs)[:1], tf.int32), **prev)

    def _act(self, obs: tf.Tensor, explore: bool, state: Any = None, prev: Any = None) -> tuple[tf.Tensor, ...]:
        state_out: list[tf.Tensor] = []
        if state is None:
            dist_inputs, values = self.model.policy_and_value(obs)
        else:
            dist_inputs, values, state_out = self._step(obs, state, prev)
        dist = self.action_distribution(dist_inputs)
        if not explore:
            actions = dist.deterministic_sample()
        elif self.custom_dist_class is None:
            actions = dist.sample(self.sampling_rng)
        else:  # 1.13's distributions sample without a generator argument
            actions = dist.sample()
        if isinstance(actions, (tuple, list, dict)):
            # A custom distribution over a Tuple / Dict space samples its parts (1.13's
            # autoregressive one: (a1, a2)); rlstack keeps them flat.
            from rlstack.utils.spaces.space_utils import tree_leaves

            layout = self.dist_spec.layout
            dtype = tf.int64 if layout is not None and layout.discrete else tf.float32
            rows = tf.shape(dist_inputs)[0]
            actions = tf.concat([tf.reshape(tf.cast(leaf, dtype), [rows, -1]) for leaf in tree_leaves(actions)], -1)
        return (actions, dist.logp(actions), dist_inputs, values, *state_out)

    def _graph_inputs(self, obs_batch: np.ndarray, state_batches: list[np.ndarray] | None,
                      prev_action_batch: Any = None, prev_reward_batch: Any = None) -> list[tf.Tensor]:
        obs = np.asarray(obs_batch, dtype=np.float32)
        if not self.is_recurrent:
            return [tf.convert_to_tensor(obs)]
        states = self.initial_state_batch(len(obs)) if state_batches is None else state_batches
        prev = self.prev_input_batches(len(obs), prev_action_batch, prev_reward_batch, trusted=True)
        return [tf.convert_to_tensor(obs), *(tf.convert_to_tensor(np.asarray(v, np.float32)) for v in states),
                *(tf.convert_to_tensor(value) for value in prev.values())]

    def compute_actions(self, obs_batch: np.ndarray, explore: bool | None = None,
                        state_batches: list[np.ndarray] | None = None, prev_action_batch: Any = None,
                        prev_reward_batch: Any = None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        explore = self.config.get("explore", True) if explore is None else bool(explore)
        fn = self._act_explore if explore else self._act_greedy
        inputs = self._graph_inputs(obs_batch, state_batches, prev_action_batch, prev_reward_batch)
        with tf.device(self.device):
            actions, logp, dist_inputs, values, *state_out = fn(*inputs)
        extras = {
            SampleBatch.ACTION_LOGP: logp.numpy(),
            SampleBatch.ACTION_DIST_INPUTS: dist_inputs.numpy(),
            SampleBatch.VF_PREDS: values.numpy(),
        }
        extras.update({state_out_key(i): value.numpy() for i, value in enumerate(state_out)})
        return actions.numpy(), extras

    def compute_values(self, obs_batch: np.ndarray, state_batches: list[np.ndarray] | None = None,
                       prev_action_batch: Any = None, prev_reward_batch: Any = None) -> np.ndarray:
        inputs = self._graph_inputs(obs_batch, state_batches, prev_action_batch, prev_reward_batch)
        with tf.device(self.device):
            return self._value_fn(*inputs).numpy()

    # ----- what losses read -------------------------------------------------------

    def unroll(self, train_batch: dict[str, tf.Tensor], reduce: str = "mean") -> tuple[dict[str, tf.Tensor], Callable]:
        """``(rows, reduce)`` for a loss: the minibatch's columns one row per step, and the
        mean (or sum) a loss term takes over them; see :meth:`TorchPolicy.unroll
        <rlstack.policies.torch_policy.TorchPolicy.unroll>`."""
        if not self.is_recurrent:
            return train_batch, tf.reduce_sum if reduce == "sum" else tf.reduce_mean
        rows = {key: value if is_per_sequence(key) else tf.reshape(value, [-1, *value.shape[2:]])
                for key, value in train_batch.items()}
        mask = rows[SEQ_MASK]
        if reduce == "sum":
            return rows, lambda x: tf.reduce_sum(x * mask)
        count = tf.maximum(tf.reduce_sum(mask), 1.0)
        return rows, lambda x: tf.reduce_sum(x * mask) / count

    def _outputs_in_row_order(self, rows: dict[str, tf.Tensor]) -> tuple[tf.Tensor, tf.Tensor]:
        # As TorchPolicy._outputs_in_row_order: scatter the rows into padded sequences,
        # run the model from each sequence's first state_in, gather the rows back.
        obs, start = rows[SampleBatch.OBS], tf.cast(rows[SEQ_START], tf.bool)
        T = self.max_seq_len()
        n = tf.shape(obs)[0]
        seq_id = tf.cumsum(tf.cast(start, tf.int32)) - 1
        first = tf.cast(tf.where(start)[:, 0], tf.int32)
        num_seqs = tf.shape(first)[0]
        slot = seq_id * T + (tf.range(n) - tf.gather(first, seq_id))
        padded = {key: tf.scatter_nd(slot[:, None], value, tf.concat([[num_seqs * T], tf.shape(value)[1:]], axis=0))
                  for key, value in {SampleBatch.OBS: obs, **self.prev_rows(rows)}.items()}
        state = [tf.gather(rows[state_in_key(i)], first) for i in range(self.num_state_tensors())]
        seq_lens = tf.math.unsorted_segment_sum(tf.ones_like(seq_id), seq_id, num_seqs)
        dist_inputs, values, _ = self.model.policy_and_value_rnn(padded.pop(SampleBatch.OBS), state, seq_lens,
                                                                 **padded)
        return tf.gather(dist_inputs, slot), tf.gather(values, slot)

    # ----- weights and state ------------------------------------------------------

    def get_weights(self) -> dict[str, np.ndarray]:
        if self.builtin_model:
            return self.model.get_canonical_weights()
        return get_model_weights(self.model)

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        if self.builtin_model:
            self.model.set_canonical_weights(weights)
        else:
            set_model_weights(self.model, weights)

    def model_metrics(self) -> dict[str, Any]:
        """Empty: a TF model's ``metrics()`` are computed inside the train graph and come
        back with the learner stats (``learner_stats["model"]``); read eagerly here they
        could be graph tensors of the last trace."""
        return {}

    def export_model(self, export_dir: str, onnx: int | None = None) -> str:
        self.refuse_recurrent_export()
        from rlstack.models.tf.export import export_tf_model

        return export_tf_model(self.model, list(self.model.variables()), self.preprocessor.size, export_dir, onnx)

    def get_state(self) -> PolicyState:
        state = super().get_state()
        state.update(optimizers_state(self.optimizers))
        state["num_grad_steps"] = np.asarray(self.num_grad_steps.numpy(), dtype=np.int64)
        state["minibatch_rng"] = encode_json(self._rng.bit_generator.state)
        state["sampling_rng"] = self.sampling_rng.state.numpy()
        return state

    def set_state(self, state: PolicyState) -> None:
        super().set_state(state)
        load_optimizers_state(self.optimizers, state)
        if "num_grad_steps" in state:
            self.num_grad_steps.assign(int(state["num_grad_steps"]))
        if "minibatch_rng" in state:
            self._rng.bit_generator.state = decode_json(state["minibatch_rng"])
        if "sampling_rng" in state:
            self.sampling_rng.state.assign(state["sampling_rng"])
        self.on_global_var_update(self.global_timestep)
