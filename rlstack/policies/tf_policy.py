"""TFPolicy: the TensorFlow 2 base of every algorithm's TF policy, and its learner loop.

It owns the model (a ModelV2: the built-in :class:`TFModel` or a user's
:class:`TFModelV2`, whose ``custom_loss`` and ``metrics()`` the learner applies), the
action distribution (``custom_action_dist`` included), device placement, acting, weights
and state, and the one learner loop of every TF algorithm: :meth:`TFPolicy.learn_on_batch`
runs every minibatch step of every epoch in one compiled graph;
:meth:`~TFPolicy.compute_gradients` / :meth:`~TFPolicy.apply_gradients` split one step
of it for A3C. Acting, value estimation and the whole learner loop are ``tf.function``\\ s
with fixed input signatures, traced once (see :meth:`TFPolicy.graph_function`).

The optimizers (Adam, IMPALA's RMSProp) are written here on plain ``tf.Variable``\\ s with
TF's fused resource kernels, so they match torch's step for step and need no Keras;
Keras 3 variables of users' models are handed over as the ``tf.Variable`` they wrap
(:mod:`rlstack.models.tf.tf_modelv2`), so they update those in place too. A non-finite
gradient becomes :class:`NonFiniteError` before any update.

An algorithm adds ``loss()`` and, where it needs them, the loop's hooks (the torch
policy's, with TF ops where they run inside the compiled loop):

* :meth:`~TFPolicy.make_optimizers`: several optimizers, one per loss of ``loss()``;
* :meth:`~TFPolicy.optimizer_step_mask`: which optimizers step (gets a step tensor);
* :meth:`~TFPolicy.after_gradient_step`: after every step, in the graph (TF ops);
* :meth:`~rlstack.policies.policy.Policy.minibatch_plan`, ``shuffle_minibatches`` and
  ``per_row_stats``; :meth:`~TFPolicy.prepare_batch` (in the graph);
* ``after_learn`` and ``on_global_var_update``, in Python, once per batch.
"""

from __future__ import annotations

import contextlib
import logging
from abc import abstractmethod
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from rlstack.errors import ConfigError, NonFiniteError
from rlstack.models.modelv2 import ModelV2, model_obs_space
from rlstack.models.specs import initial_weights
from rlstack.models.tf.distributions import DISTRIBUTIONS, make_distribution
from rlstack.models.tf.framework import tf
from rlstack.models.tf.graph_function import GraphFunction
from rlstack.models.tf.model import TFModel
from rlstack.models.tf.tf_modelv2 import ShortcutTFModel, TFModelV2
from rlstack.policies.learner_loop import (
    as_losses, checked_optimizers, combine_microbatch_stats, grad_norm_key, load_optimizers_state, optimizers_state,
)
from rlstack.policies.policy import Policy, PolicyState, decode_json, encode_json
from rlstack.policies.recurrent import prev_inputs_of
from rlstack.policies.rnn_sequencing import SEQ_MASK, SEQ_START, is_per_sequence, state_in_key, state_out_key
from rlstack.sample_batch import SampleBatch
from rlstack.utils.schedules import make_schedule


def _grads_finite(grads: list[tf.Tensor]) -> tf.Tensor:
    # One scalar: the sum of every gradient entry is NaN or inf iff some entry is (inf - inf
    # is NaN), or the sum overflows float32, which no sane update does. One reduction
    # costs far less than an is_finite per tensor on small networks.
    return tf.math.is_finite(tf.add_n([tf.reduce_sum(g) for g in grads if g is not None]))


_NON_FINITE_MARK = "rlstack: non-finite gradients"


def lr_value(lr: tf.Variable | float) -> float:
    """An optimizer's learning rate (a variable or a float) as a float."""
    return float(lr.numpy()) if hasattr(lr, "numpy") else float(lr)


@contextlib.contextmanager
def non_finite_as_error(where: str, lr: tf.Variable | float):
    """Turns the assertion :func:`finite_guard` puts in a graph (TF raises it as an
    ``InvalidArgumentError``) into the :class:`NonFiniteError` torch policies raise, so
    callers catch one error whatever the framework. ``where`` names the step."""
    try:
        yield
    except tf.errors.InvalidArgumentError as err:
        if _NON_FINITE_MARK not in str(err):
            raise
        raise NonFiniteError.in_update("gradients (NaN or inf)", where, lr_value(lr)) from None


def finite_guard(grads: list[tf.Tensor], check_finite: bool, name: str) -> list:
    """Control inputs for an update (inside a tf.function): an assertion that fails
    (``InvalidArgumentError``, which :func:`non_finite_as_error` turns into
    :class:`NonFiniteError`) before any variable is touched when a gradient is NaN or
    inf; none without ``check_finite``. ``name`` names the step in the message."""
    if not check_finite:
        return []
    return [tf.debugging.Assert(_grads_finite(grads), [
        f"{_NON_FINITE_MARK} (NaN or inf) in a TF {name} step; the update was not applied. Usual causes: "
        "a learning rate too high (lower lr or set grad_clip), NaN/inf or very large rewards, observations on a "
        "large scale (observation_filter='MeanStdFilter'), or a log(0) / division by zero in a custom loss."])]


class Adam:
    """Adam (Kingma & Ba 2015) with torch's update order, on plain ``tf.Variable``\\ s.

    ``m = b1 m + (1 - b1) g``; ``v = b2 v + (1 - b2) g^2``;
    ``w -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)``.

    Args:
        variables: The variables it updates (kept as :attr:`variables`).
        lr: Its learning rate: a ``tf.Variable`` to change it later without retracing
            (a policy's ``self.lr``, or one of its own), or a float.
    """

    def __init__(self, variables: list[tf.Variable], lr: tf.Variable | float, eps: float = 1e-8,
                 beta1: float = 0.9, beta2: float = 0.999) -> None:
        self.variables = list(variables)
        self.lr, self.eps, self.beta1, self.beta2 = lr, eps, beta1, beta2
        self.step = tf.Variable(0.0, trainable=False, name="adam_step")
        self.m = [tf.Variable(tf.zeros_like(v), trainable=False) for v in variables]
        self.v = [tf.Variable(tf.zeros_like(v), trainable=False) for v in variables]

    def apply(self, grads: list[tf.Tensor], variables: list[tf.Variable] | None = None,
              check_finite: bool = True) -> None:
        """Applies one update (inside a tf.function).

        Args:
            grads: One gradient (or None: left alone) per variable.
            variables: The variables, in ``grads`` order (default: :attr:`variables`).
            check_finite: Fail (``InvalidArgumentError``) before touching any variable
                if a gradient is NaN or inf; False where the caller has checked.
        """
        variables = self.variables if variables is None else variables
        with tf.control_dependencies(finite_guard(grads, check_finite, "Adam")):
            step = self.step.assign_add(1.0)
            beta1_power = tf.pow(self.beta1, step)
            beta2_power = tf.pow(self.beta2, step)
            # TF's fused kernel (one op per variable instead of ~16: most of a small
            # network's step) computes w -= lr sqrt(1 - b2^t) / (1 - b1^t) m / (sqrt(v) + e);
            # with e = eps sqrt(1 - b2^t) that is exactly the update above.
            epsilon = self.eps * tf.sqrt(1.0 - beta2_power)
            for grad, var, m, v in zip(grads, variables, self.m, self.v):
                if grad is None:  # not in the loss (value layers without a critic): left alone, as torch does
                    continue
                tf.raw_ops.ResourceApplyAdam(
                    var=var.handle, m=m.handle, v=v.handle, beta1_power=beta1_power, beta2_power=beta2_power,
                    lr=self.lr, beta1=self.beta1, beta2=self.beta2, epsilon=epsilon, grad=grad)

    def get_state(self) -> dict[str, np.ndarray]:
        """The step count and both moments per variable."""
        state = {"step": self.step.numpy()}
        for i, (m, v) in enumerate(zip(self.m, self.v)):
            state[f"{i}/exp_avg"] = m.numpy()
            state[f"{i}/exp_avg_sq"] = v.numpy()
        return state

    def set_state(self, state: dict[str, np.ndarray]) -> None:
        """Restores :meth:`get_state`."""
        self.step.assign(float(state["step"]))
        for i, (m, v) in enumerate(zip(self.m, self.v)):
            m.assign(state[f"{i}/exp_avg"])
            v.assign(state[f"{i}/exp_avg_sq"])


class RMSProp:
    """RMSProp in the IMPALA paper's (TF1) momentum form, the twin of
    torch_policy.RMSProp: ``ms = decay ms + (1 - decay) g^2``; ``mom = momentum mom +
    lr g / sqrt(ms + eps)``; ``w -= mom``; ``ms`` starts at 1."""

    def __init__(self, variables: list[tf.Variable], lr: tf.Variable | float, decay: float = 0.99,
                 momentum: float = 0.0, eps: float = 0.1) -> None:
        self.variables = list(variables)
        self.lr, self.decay, self.momentum, self.eps = lr, float(decay), float(momentum), float(eps)
        self.mean_squares = [tf.Variable(tf.ones_like(v), trainable=False) for v in variables]
        self.moments = [tf.Variable(tf.zeros_like(v), trainable=False) for v in variables]

    def apply(self, grads: list[tf.Tensor], variables: list[tf.Variable] | None = None,
              check_finite: bool = True) -> None:
        """Applies one update (inside a tf.function); arguments as in :meth:`Adam.apply`."""
        variables = self.variables if variables is None else variables
        with tf.control_dependencies(finite_guard(grads, check_finite, "RMSProp")):
            for grad, var, ms, mom in zip(grads, variables, self.mean_squares, self.moments):
                if grad is None:
                    continue
                # TF's fused kernel computes exactly these three lines, in one op.
                tf.raw_ops.ResourceApplyRMSProp(
                    var=var.handle, ms=ms.handle, mom=mom.handle, lr=self.lr, rho=self.decay,
                    momentum=self.momentum, epsilon=self.eps, grad=grad)

    def get_state(self) -> dict[str, np.ndarray]:
        """Mean squares and momentum buffers per variable."""
        state = {}
        for i, (ms, mom) in enumerate(zip(self.mean_squares, self.moments)):
            state[f"{i}/mean_square"] = ms.numpy()
            state[f"{i}/momentum"] = mom.numpy()
        return state

    def set_state(self, state: dict[str, np.ndarray]) -> None:
        """Restores :meth:`get_state`."""
        for i, (ms, mom) in enumerate(zip(self.mean_squares, self.moments)):
            ms.assign(state[f"{i}/mean_square"])
            mom.assign(state[f"{i}/momentum"])


def clip_by_global_norm(grads: list[tf.Tensor], max_norm: float) -> tuple[list[tf.Tensor], tf.Tensor]:
    """Scales gradients so their global norm is at most ``max_norm`` (torch's formula)."""
    norm = tf.linalg.global_norm(grads)  # None (a variable outside the loss) counts as zero
    coef = tf.minimum(1.0, max_norm / (norm + 1e-6))
    return [None if g is None else g * coef for g in grads], norm

Optimizer = Adam | RMSProp


def _scalar(value: tf.Tensor) -> tf.Tensor:
    # A statistic as one float32 in the stats row (its mean, if it is not a scalar and
    # not one of the per-row statistics).
    value = tf.cast(value, tf.float32)
    return value if value.shape.rank == 0 else tf.reduce_mean(value)


def nest_model_stats(stats: dict[str, Any]) -> dict[str, Any]:
    """Moves the ``"model/<name>"`` entries of learner stats to ``stats["model"][name]``,
    where classic RLlib reported a model's ``metrics()``."""
    model = {key[len("model/"):]: stats.pop(key) for key in [k for k in stats if k.startswith("model/")]}
    if model:
        stats["model"] = model
    return stats

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


class TFPolicy(Policy):
    """Base class of TensorFlow policies: subclass it and implement :meth:`~TFPolicy.loss`.

    Args:
        observation_space: The env's observation space.
        action_space: The env's action space.
        config: The trainer's merged config.
        num_gpus: GPUs this copy may use.
    """

    framework = "tf"

    # Actor-critic losses: an ``entropy_coeff`` (tf.Variable) that follows ``entropy_coeff_schedule``.
    schedules_entropy_coeff: bool = False

    # Batch columns the loss reads.
    loss_columns: tuple[str, ...] = ()

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

    # ----- learning ------------------------------------------------------------------

    def _init_learner(self, config: dict) -> None:
        # The learner's state, once __init__ has built the model.
        with tf.device(self.device):
            self.lr_schedule = make_schedule(config["lr"], config.get("lr_schedule"), "lr_schedule")
            self.lr = tf.Variable(self.lr_schedule.value(0), trainable=False, dtype=tf.float32, name="lr")
            if self.schedules_entropy_coeff:
                self.entropy_coeff_schedule = make_schedule(
                    config["entropy_coeff"], config.get("entropy_coeff_schedule"), "entropy_coeff_schedule")
                self.entropy_coeff = tf.Variable(self.entropy_coeff_schedule.value(0), trainable=False, dtype=tf.float32)
            # Gradient steps taken over the policy's life (saved with its state); the
            # step mask reads it inside the compiled loop.
            self.num_grad_steps = tf.Variable(0, trainable=False, dtype=tf.int64, name="num_grad_steps")
        self._rng = np.random.default_rng(config.get("seed"))
        # Built on first use (see the optimizers property).
        self._optimizers: list[Optimizer] | None = None
        # The compiled graphs of learn_on_batch, compute_gradients and apply_gradients,
        # traced on first use; the names of the train graph's statistics rows.
        self._train_fn = None
        self._grad_fn = None
        self._apply_fns: dict[tuple[bool, ...], Callable] = {}
        self._stat_keys: list[str] = []

    # ----- optimizers -------------------------------------------------------------

    def make_optimizer(self, variables: list[tf.Variable], lr: tf.Variable | float) -> Optimizer:
        """Adam with ``adam_epsilon`` (algorithms with ``opt_type`` override this)."""
        return Adam(variables, lr, eps=self.config.get("adam_epsilon", 1e-8))

    def make_optimizers(self) -> list[Optimizer]:
        """The policy's optimizers, one per loss that :meth:`loss` returns, in that order.

        The default is one :meth:`make_optimizer` over :attr:`train_variables` with the
        policy's ``self.lr`` variable. A policy with several losses returns one
        optimizer per variable list, e.g. ``[self.make_optimizer(actor_vars, self.lr),
        self.make_optimizer(critic_vars, self.critic_lr)]``. Each optimizer takes its
        learning rate as a constructor argument: a ``tf.Variable`` (to change it later
        without retracing) or a float. ``lr`` / ``lr_schedule`` move ``self.lr`` only
        (optimizer 0's in the default). A variable belongs to at most one optimizer.
        Called once, on first use of :attr:`optimizers` (outside any ``tf.function``,
        under the policy's device), so a subclass's ``__init__`` may first create the
        variables its optimizers take.
        """
        return [self.make_optimizer(self.train_variables, self.lr)]

    @property
    def optimizers(self) -> list[Optimizer]:
        """The optimizers from :meth:`make_optimizers`, built on first use.

        Raises:
            TypeError: If ``make_optimizers`` returns none, or a variable twice.
        """
        if self._optimizers is None:
            with tf.device(self.device):
                optimizers = list(self.make_optimizers())
            self._optimizers = checked_optimizers(self, optimizers, "variables", lambda var: f"variable {var.name}")
        return self._optimizers

    @property
    def optimizer(self) -> Optimizer:
        """The first optimizer (the only one of most policies)."""
        return self.optimizers[0]

    # ----- the loop and its hooks ---------------------------------------------------

    @abstractmethod
    def loss(self, train_batch: dict[str, tf.Tensor]) -> tuple[Any, dict[str, tf.Tensor]]:
        """Returns ``(loss, stats)`` on a minibatch of tensors keyed by column name.

        ``loss`` is one scalar tensor, or with several :attr:`optimizers` a tuple (or
        list) of scalar tensors, one per optimizer in their order: optimizer ``i`` steps
        on d ``loss[i]`` / d (its own variables) only. ``stats`` are scalar tensors,
        averaged over the last epoch's minibatches, except :attr:`per_row_stats` (one
        value per row).
        """

    def after_learn(self, stats: dict[str, Any]) -> dict[str, Any]:
        """Called once per ``learn_on_batch`` with the mean stats; returns extra stats."""
        return {}

    def optimizer_step_mask(self, step: tf.Tensor) -> tuple[Any, ...]:
        """Which optimizers apply their update at gradient step ``step``.

        Runs inside the compiled loop: ``step`` is an int64 scalar tensor (the step's
        number over the policy's life, :attr:`num_grad_steps` before the step: 0 for
        the first, saved with the policy's state), and each flag a Python bool or a bool
        tensor computed from it with TF ops, e.g. ``(True, tf.equal(step % 2, 0))`` for
        TD3's ``policy_delay`` 2. All True by default.
        """
        return (True,) * len(self.optimizers)

    def after_gradient_step(self) -> None:
        """Called after each gradient step, inside the compiled loop (so TF ops only, e.g.
        ``var.assign(...)``), once the optimizers the mask chose have stepped: soft
        target-network updates with ``tau``. Not called for a step that was not applied
        (NaN/inf). No-op by default."""

    def prepare_batch(self, tensors: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """Called once per batch inside the compiled loop, before the first gradient
        step, on the whole batch's tensors (``compute_gradients``: on each microbatch);
        returns them, with per-row columns added that every step's :meth:`loss` would
        otherwise compute again. Only what no gradient step changes may be computed
        here (DQN's targets from its fixed target network). The default returns them."""
        return tensors

    def loss_with_model(self, train_batch: dict[str, tf.Tensor]) -> tuple[Any, dict[str, tf.Tensor]]:
        """:meth:`loss`, changed by the model's ``custom_loss`` when it has one (called
        with the loss, or with the list of losses when there are several, and returning
        the same), with the model's ``metrics()`` added to the stats as
        ``"model/<name>"`` (see :func:`nest_model_stats`). The model sees
        ``input_dict["is_training"]`` True here (a constant of the traced train graph;
        acting graphs see False)."""
        self.model.training = True
        try:
            loss, stats = self.loss(train_batch)
        finally:
            self.model.training = False
        if type(self.model).custom_loss is not ModelV2.custom_loss:
            several = isinstance(loss, (list, tuple))
            changed = self.model.custom_loss(list(loss) if several else loss, train_batch)
            if several and len(as_losses(changed, len(loss), type(self.model).__name__ + ".custom_loss")) != len(loss):
                raise TypeError(f"{type(self.model).__name__}.custom_loss must return one loss per optimizer.")
            loss = changed
        for name, value in self.model.metrics().items():
            stats[f"model/{name}"] = tf.reduce_mean(tf.cast(value, tf.float32))
        return loss, stats

    def _losses_and_grads(self, minibatch: dict[str, tf.Tensor]) -> tuple[list, dict, list[list]]:
        """``(losses, stats, grads)`` on a minibatch, inside the train graph:
        :meth:`loss_with_model` through a GradientTape (persistent with several losses),
        one loss and one gradient list per optimizer (d loss_i / d optimizer i's variables)."""
        optimizers = self.optimizers
        with tf.GradientTape(persistent=len(optimizers) > 1) as tape:
            loss, stats = self.loss_with_model(minibatch)
        losses = as_losses(loss, len(optimizers), type(self).__name__)
        grads = [tape.gradient(loss_i, optimizer.variables) for loss_i, optimizer in zip(losses, optimizers)]
        del tape  # a persistent tape holds its graph until dropped
        return losses, stats, grads

    def _step_mask(self) -> list[Any]:
        if type(self).optimizer_step_mask is TFPolicy.optimizer_step_mask:
            return [True] * len(self.optimizers)  # the default: no read of the step count in the graph
        mask = list(self.optimizer_step_mask(self.num_grad_steps.read_value()))
        if len(mask) != len(self.optimizers):
            raise TypeError(f"{type(self).__name__}.optimizer_step_mask() returned {len(mask)} flags for "
                            f"{len(self.optimizers)} optimizers; return one per optimizer.")
        return mask

    def _apply_step(self, grads: list[list], mask: list[Any]) -> tf.Tensor:
        # Every optimizer the mask chooses steps (after all gradients were taken, so that
        # each loss saw the same weights), then the step count and after_gradient_step.
        for optimizer, grads_i, on in zip(self.optimizers, grads, mask):
            if on is True:
                optimizer.apply(grads_i, check_finite=False)
            elif on is not False:
                def apply_i(optimizer=optimizer, grads_i=grads_i) -> tf.Tensor:
                    optimizer.apply(grads_i, check_finite=False)
                    return tf.constant(True)

                tf.cond(tf.convert_to_tensor(on), apply_i, lambda: tf.constant(False))
        self.num_grad_steps.assign_add(1)
        self.after_gradient_step()
        return tf.constant(True)

    def _train_step(self, minibatch: dict[str, tf.Tensor],
                    enabled: tf.Tensor) -> tuple[dict[str, tf.Tensor], dict[str, tf.Tensor], tf.Tensor]:
        mask = self._step_mask()
        losses, stats, grads = self._losses_and_grads(minibatch)
        per_row = {key: stats.pop(key) for key in self.per_row_stats if key in stats}
        grad_clip = self.config.get("grad_clip")
        # A NaN or inf loss (or gradient norm) skips the update; learn_on_batch then raises.
        # The loss and the norm are one scalar each: far cheaper than a pass over every
        # gradient, which the optimizer does for callers that bring no loss.
        finite = tf.reduce_all(tf.math.is_finite(losses[0]))
        for loss in losses[1:]:
            finite = tf.logical_and(finite, tf.reduce_all(tf.math.is_finite(loss)))
        if grad_clip is not None:
            for i, on in enumerate(mask):
                # Each optimizer's gradients clipped on their own (1.13's multi-optimizer
                # policies); a skipped optimizer's norm is NaN here, left out of the mean.
                grads[i], norm = clip_by_global_norm(grads[i], float(grad_clip))
                if on is True:
                    stats[grad_norm_key(i)] = norm
                    finite = tf.logical_and(finite, tf.math.is_finite(norm))
                else:
                    stats[grad_norm_key(i)] = tf.where(tf.convert_to_tensor(on), norm, float("nan"))
                    finite = tf.logical_and(finite, tf.logical_or(tf.logical_not(on), tf.math.is_finite(norm)))
        else:
            # Unclipped gradients are checked too (their norm only, for the check): a
            # finite loss can still have a NaN gradient (sqrt or log at 0 in a custom loss).
            for i, on in enumerate(mask):
                norm = tf.linalg.global_norm([g for g in grads[i] if g is not None])
                ok = tf.math.is_finite(norm)
                finite = tf.logical_and(finite, ok if on is True else tf.logical_or(tf.logical_not(on), ok))
        tf.cond(tf.logical_and(finite, enabled), lambda: self._apply_step(grads, mask), lambda: tf.constant(False))
        return stats, per_row, finite

    def _train_loop(self, tensors: dict[str, tf.Tensor], order: tf.Tensor, starts: tf.Tensor,
                    ends: tf.Tensor) -> tuple[tf.Tensor, dict[str, tf.Tensor], tf.Tensor]:
        # Every minibatch step of every epoch in one graph: a Python-driven loop would pay
        # one tf.function call per minibatch, which costs more than a small network's step.
        # Returns the stats rows, the per-row statistics of every step in order, and the
        # first step whose loss or gradients were not finite (-1: none); no update is
        # applied from that step on.
        tensors = self.prepare_batch(tensors)
        num_minibatches = tf.shape(starts)[0]

        def step(i, rows, per_row, first_bad):
            if self.shuffle_minibatches:
                index = order[starts[i] : ends[i]]
                minibatch = {key: tf.gather(value, index) for key, value in tensors.items()}
            else:  # starts / ends are rows: slices, no gather
                minibatch = {key: value[starts[i] : ends[i]] for key, value in tensors.items()}
            stats, step_per_row, finite = self._train_step(minibatch, first_bad < 0)
            # The statistics' names are known once the step is traced (the trace runs
            # this Python once); learn_on_batch reads them to label the rows.
            self._stat_keys = sorted(stats)
            rows = rows.write(i, tf.stack([_scalar(stats[key]) for key in self._stat_keys]))
            per_row = {key: per_row[key].write(i, tf.reshape(tf.cast(step_per_row[key], tf.float32), [-1]))
                       for key in per_row}
            first_bad = tf.where(tf.logical_and(first_bad < 0, tf.logical_not(finite)), i, first_bad)
            return i + 1, rows, per_row, first_bad

        per_row = {key: tf.TensorArray(tf.float32, size=num_minibatches, infer_shape=False)
                   for key in self.per_row_stats}
        start = (tf.constant(0), tf.TensorArray(tf.float32, size=num_minibatches), per_row, tf.constant(-1, tf.int32))
        _, rows, per_row, first_bad = tf.while_loop(lambda i, *_: i < num_minibatches, step, start)
        return rows.stack(), {key: value.concat() for key, value in per_row.items()}, first_bad

    def _compiled_train_loop(self, tensors: dict[str, tf.Tensor]):
        if self._train_fn is None:
            index_spec = tf.TensorSpec([None], tf.int64)
            signature = (
                {key: tf.TensorSpec([None, *value.shape[1:]], value.dtype) for key, value in tensors.items()},
                index_spec, index_spec, index_spec,
            )
            self._train_fn = self.graph_function(self._train_loop, signature)
        return self._train_fn

    def learn_on_batch(self, batch: SampleBatch) -> dict[str, Any]:
        """The learner loop: ``num_epochs`` passes over ``batch`` in minibatches (see
        :meth:`minibatch_plan`), one gradient step each, all in one compiled graph.

        A step differentiates each optimizer's loss w.r.t. that optimizer's variables,
        clips each optimizer's gradients to ``grad_clip`` on their own, checks every loss
        and norm for NaN/inf, applies the optimizers :meth:`optimizer_step_mask`
        chooses, then runs :meth:`after_gradient_step`.

        Returns:
            The statistics averaged over the last epoch's minibatches (``grad_gnorm``,
            ``grad_gnorm_<i>`` over the steps their optimizer took), each of
            :attr:`per_row_stats` as one numpy array over the batch in row order,
            ``cur_lr`` (optimizer 0's), ``entropy_coeff`` where scheduled, and whatever
            :meth:`after_learn` adds.

        Raises:
            NonFiniteError: Naming the loss terms, if a loss or gradient norm is NaN or
                inf; no update is applied from that step on.
        """
        if self.calls_learn_hook:
            self.run_learn_on_batch_callback(batch)
        batch = self.learner_batch(batch)  # recurrent models: one row per padded sequence
        columns = self.learner_columns(batch)
        n = batch.count
        minibatch_size, num_epochs = self.minibatch_plan(n)
        minibatch_size = max(1, min(int(minibatch_size), n))
        epoch_starts = np.arange(0, n, minibatch_size, dtype=np.int64)
        per_epoch = len(epoch_starts)
        if self.shuffle_minibatches:
            # The same minibatch order as the torch policy draws from the same generator;
            # starts / ends index the concatenated epochs' order.
            order = np.concatenate([self._rng.permutation(n) for _ in range(num_epochs)]).astype(np.int64)
            starts = (np.arange(num_epochs, dtype=np.int64)[:, None] * n + epoch_starts[None, :]).reshape(-1)
            ends = np.minimum(starts + minibatch_size,
                              np.repeat(np.arange(1, num_epochs + 1, dtype=np.int64) * n, per_epoch))
        else:
            order = np.zeros(0, np.int64)  # unused: starts / ends are rows
            starts = np.tile(epoch_starts, num_epochs)
            ends = np.minimum(starts + minibatch_size, n)
        optimizers = self.optimizers  # built (their variables made) before the trace
        with tf.device(self.device):
            tensors = {key: tf.convert_to_tensor(batch[key]) for key in columns}
            rows, per_row, first_bad = self._compiled_train_loop(tensors)(
                tensors, tf.constant(order), tf.constant(starts), tf.constant(ends))
            rows, first_bad = rows.numpy(), int(first_bad.numpy())
        if first_bad >= 0:
            # A skipped optimizer's norm is NaN by design: not a culprit to name.
            terms = [key for key, value in zip(self._stat_keys, rows[first_bad])
                     if not np.isfinite(value) and not key.startswith("grad_gnorm")]
            what = f"loss terms {', '.join(terms)}" if terms else "gradients (the loss terms are finite)"
            raise NonFiniteError.in_update(
                what, f"{type(self).__name__}.learn_on_batch (epoch {first_bad // per_epoch}, minibatch "
                      f"{first_bad % per_epoch})", lr_value(optimizers[0].lr))
        mean_stats: dict[str, Any] = {}
        for key, column in zip(self._stat_keys, rows[-per_epoch:].T):
            if key.startswith("grad_gnorm"):
                column = column[~np.isnan(column)]  # the steps that optimizer took
                if not column.size:
                    continue
            mean_stats[key] = float(column.mean())
        for key, values in per_row.items():
            mean_stats[key] = values.numpy()[-n:]  # the last epoch's, in row order
        mean_stats.update(self._learner_info())
        mean_stats.update(self.after_learn(mean_stats))
        return nest_model_stats(mean_stats)

    def _learner_info(self) -> dict[str, float]:
        info = {"cur_lr": lr_value(self.optimizer.lr)}
        if self.schedules_entropy_coeff:
            info["entropy_coeff"] = float(self.entropy_coeff.numpy())
        return info

    def _gradients(self, tensors: dict[str, tf.Tensor]) -> tuple[list, dict[str, tf.Tensor]]:
        # compute_gradients' graph: every optimizer's gradients on one microbatch.
        _, stats, grads = self._losses_and_grads(self.prepare_batch(tensors))
        return [grad for grads_i in grads for grad in grads_i], stats

    def compute_gradients(self, batch: SampleBatch) -> tuple[list[np.ndarray | None], dict[str, Any]]:
        """The gradients of one step on the whole ``batch``, for :meth:`apply_gradients`
        on another copy of the policy (A3C: workers compute, the driver applies).

        Each optimizer's loss is differentiated w.r.t. its own variables, summed over
        ``microbatch_size`` rows at a time when the config sets it (bounded memory; equal
        to the full-batch gradient for a loss that sums over rows, as A3C's), and clipped
        to ``grad_clip`` per optimizer.

        Returns:
            ``(grads, stats)``: numpy arrays in optimizer, then variable order (None for
            a variable outside the loss), and the statistics (added up over microbatches
            like the loss, except ``row_mean_stats`` and model metrics, weighted by rows,
            and ``per_row_stats``, concatenated) with the gradient norms and ``cur_lr``.
        """
        batch = self.learner_batch(batch)  # recurrent models: one row per padded sequence
        n = batch.count
        size = self.microbatch_rows(n)
        optimizers = self.optimizers
        with tf.device(self.device):
            tensors = {key: tf.convert_to_tensor(batch[key]) for key in self.learner_columns(batch)}
            if self._grad_fn is None:
                signature = ({key: tf.TensorSpec([None, *value.shape[1:]], value.dtype)
                              for key, value in tensors.items()},)
                self._grad_fn = self.graph_function(self._gradients, signature)
            total: list | None = None
            parts: list[tuple[int, dict[str, Any]]] = []
            for start in range(0, n, size):
                grads, stats = self._grad_fn({key: value[start : start + size] for key, value in tensors.items()})
                total = grads if total is None else [a if b is None else (b if a is None else a + b)
                                                     for a, b in zip(total, grads)]
                parts.append((min(size, n - start), {key: value.numpy() for key, value in stats.items()}))
            stats = combine_microbatch_stats(parts, self.row_mean_stats, self.per_row_stats)
            grad_clip = self.config.get("grad_clip")
            offset = 0
            for i, optimizer in enumerate(optimizers):
                count = len(optimizer.variables)
                if grad_clip is not None:
                    total[offset : offset + count], norm = clip_by_global_norm(total[offset : offset + count],
                                                                               float(grad_clip))
                    stats[grad_norm_key(i)] = float(norm)
                offset += count
        stats.update(self._learner_info())
        return [None if grad is None else grad.numpy() for grad in total], nest_model_stats(stats)

    def _apply(self, grads: list) -> None:
        # apply_gradients' graph: every chosen optimizer's gradients are checked before
        # any variable changes.
        optimizers, mask = self.optimizers, self._step_mask()
        per_optimizer, offset = [], 0
        for optimizer in optimizers:
            per_optimizer.append(grads[offset : offset + len(optimizer.variables)])
            offset += len(optimizer.variables)
        checked = [grad for grads_i, on in zip(per_optimizer, mask) if on is not False for grad in grads_i]
        with tf.control_dependencies(finite_guard(checked, bool(checked) and any(g is not None for g in checked),
                                                  "apply_gradients")):
            self._apply_step(per_optimizer, mask)

    def apply_gradients(self, grads: list[np.ndarray | None]) -> None:
        """One gradient step with gradients from :meth:`compute_gradients` (of this
        policy or a copy of it): the optimizers :meth:`optimizer_step_mask` chooses step,
        then :meth:`after_gradient_step` runs, as in :meth:`learn_on_batch`.

        Raises:
            ValueError: If ``grads`` does not hold one entry per variable.
            NonFiniteError: If a gradient is NaN or inf; nothing is updated.
        """
        optimizers = self.optimizers
        variables = [var for optimizer in optimizers for var in optimizer.variables]
        if len(grads) != len(variables):
            raise ValueError(f"apply_gradients got {len(grads)} gradients for {type(self).__name__}'s "
                             f"{len(variables)} variables; pass what compute_gradients of the same policy class and "
                             "config returned.")
        # One graph per pattern of missing gradients (in practice one per policy): the
        # present ones are its fixed-signature inputs.
        present = tuple(grad is not None for grad in grads)
        apply_fn = self._apply_fns.get(present)
        if apply_fn is None:
            def apply_present(given: list[tf.Tensor]) -> None:
                given = iter(given)
                self._apply([next(given) if is_present else None for is_present in present])

            signature = [[tf.TensorSpec(var.shape, var.dtype) for var, is_present in zip(variables, present)
                          if is_present]]
            apply_fn = self._apply_fns[present] = self.graph_function(apply_present, signature)
        with tf.device(self.device), non_finite_as_error(f"{type(self).__name__}.apply_gradients",
                                                         optimizers[0].lr):
            apply_fn([tf.convert_to_tensor(grad, dtype=var.dtype) for grad, var in zip(grads, variables)
                      if grad is not None])

    def on_global_var_update(self, global_timestep: int) -> None:
        super().on_global_var_update(global_timestep)
        self.lr.assign(self.lr_schedule.value(global_timestep))
        if self.schedules_entropy_coeff:
            self.entropy_coeff.assign(self.entropy_coeff_schedule.value(global_timestep))
