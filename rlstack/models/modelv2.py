"""ModelV2: the model interface of classic RLlib (1.x), framework-neutral part.

Every policy's ``policy.model`` is a ModelV2: the built-in networks, users' 1.13-style
``TorchModelV2`` / ``TFModelV2`` subclasses, and rlstack's shortcut custom models (a
module called on flat observations that returns ``(dist_inputs, values)``), which the
framework policy wraps in an adapter.

Two ways in, one model:

* ``model(input_dict, state, seq_lens) -> (outputs, state_out)`` then
  ``model.value_function()``: classic RLlib's calling convention, for users' code.
  ``input_dict["obs"]`` may be the flat observation the policy sees; ``__call__``
  restores its original structure (a dict for Dict spaces, images in their shape) and
  keeps the flat one as ``input_dict["obs_flat"]``.
* ``model.policy_and_value(obs_flat) -> (dist_inputs [B, num_outputs], values [B])`` and
  ``model.value(obs_flat) -> values [B]``: what the policies call. The base class derives
  both from ``forward``/``value_function``; the built-in networks override them with
  their direct path.

Observations reach models as rlstack's preprocessor writes them (``models/preprocessors``):
one float32 row per observation, Box components flattened, Discrete / MultiDiscrete
one-hot, Dict / Tuple components concatenated in the space's order.
"""

from __future__ import annotations

import contextlib
from typing import Any

import gymnasium as gym
import numpy as np

from rlstack.errors import ConfigError
from rlstack.models.preprocessors import Preprocessor
from rlstack.models.repeated_values import RepeatedValues
from rlstack.utils.spaces.repeated import Repeated

TensorType = Any


def model_obs_space(observation_space: gym.Space) -> gym.Space:
    """The observation space a model is constructed with (classic RLlib's convention).

    A Box space is passed as it is. Any other space reaches the model flattened, as a
    ``Box(-inf, inf, (size,))`` whose ``original_space`` attribute is the env's space
    (``obs_space.original_space`` is how 1.x models find a Dict observation's keys).
    """
    if isinstance(observation_space, gym.spaces.Box):
        return observation_space
    size = Preprocessor(observation_space).size
    flat = gym.spaces.Box(-np.inf, np.inf, (size,), np.float32)
    flat.original_space = observation_space  # type: ignore[attr-defined]
    return flat


def _reshape(x: TensorType, shape: tuple[int, ...], tensorlib: str) -> TensorType:
    if tensorlib in ("tf", "tf2", "tfe"):
        from rlstack.models.tf.framework import tf

        return tf.reshape(x, shape)
    return x.reshape(shape)


def add_time_dimension(padded_inputs: Any, *, max_seq_len: int | None = None, seq_lens: Any = None,
                       framework: str = "torch", time_major: bool = False) -> Any:
    """``[B * T, ...]`` rows to ``[B, T, ...]`` (1.13's helper), with ``T`` given as
    ``max_seq_len`` or found from ``B = len(seq_lens)``; ``time_major`` gives
    ``[T, B, ...]``. Works on torch and TF tensors (in a graph too) and numpy arrays.

    Raises:
        ValueError: If neither ``max_seq_len`` nor ``seq_lens`` is given.
    """
    tail = [int(d) for d in padded_inputs.shape[1:]]
    tf_tensor = framework in ("tf", "tf2", "tfe")
    if max_seq_len is not None:
        shape = [-1, int(max_seq_len), *tail]
    elif seq_lens is None:
        raise ValueError("add_time_dimension needs max_seq_len or seq_lens to find the time dimension.")
    elif tf_tensor:
        from rlstack.models.tf.framework import tf

        shape = tf.concat([tf.shape(seq_lens)[:1], [-1], tf.constant(tail, tf.int32)], axis=0)
    else:
        shape = [int(seq_lens.shape[0]), -1, *tail]
    shaped = _reshape(padded_inputs, shape, framework)
    if not time_major:
        return shaped
    if tf_tensor:
        from rlstack.models.tf.framework import tf

        return tf.transpose(shaped, [1, 0, *range(2, 2 + len(tail))])
    return shaped.transpose(0, 1) if framework == "torch" else np.swapaxes(shaped, 0, 1)


def _unflatten(obs: TensorType, space: gym.Space, start: int, tensorlib: str) -> tuple[Any, int]:
    if isinstance(space, gym.spaces.Box):
        shape = tuple(int(d) for d in space.shape)
        size = int(np.prod(shape)) if shape else 1
        return _reshape(obs[:, start : start + size], (-1, *(shape or (1,))), tensorlib), start + size
    if isinstance(space, gym.spaces.Discrete):
        return obs[:, start : start + int(space.n)], start + int(space.n)
    if isinstance(space, gym.spaces.MultiDiscrete):
        size = int(np.sum(space.nvec))
        return obs[:, start : start + size], start + size
    if isinstance(space, gym.spaces.MultiBinary):
        size = int(np.prod(space.shape))
        return _reshape(obs[:, start : start + size], (-1, *space.shape), tensorlib), start + size
    if isinstance(space, gym.spaces.Dict):
        out = {}
        for key, sub in space.spaces.items():
            out[key], start = _unflatten(obs, sub, start, tensorlib)
        return out, start
    if isinstance(space, gym.spaces.Tuple):
        parts = []
        for sub in space.spaces:
            part, start = _unflatten(obs, sub, start, tensorlib)
            parts.append(part)
        return tuple(parts), start
    if isinstance(space, Repeated):
        # [length, item 0, ..., item max_len-1]: the items restored as rows of their own,
        # then every leaf (and nested length) given its [B, max_len] leading dimensions.
        item_size = Preprocessor(space.child_space).size
        block = obs[:, start + 1: start + 1 + space.max_len * item_size]
        items, _ = _unflatten(_reshape(block, (-1, item_size), tensorlib), space.child_space, 0, tensorlib)
        values = _with_repeat_dim(items, space.max_len, tensorlib)
        return RepeatedValues(values, obs[:, start], space.max_len), start + 1 + space.max_len * item_size
    raise TypeError(f"Cannot restore observations of space {space}.")


def _with_repeat_dim(value: Any, max_len: int, tensorlib: str) -> Any:
    # [B * max_len, ...] leaves (and nested lengths) as [B, max_len, ...].
    if isinstance(value, dict):
        return {key: _with_repeat_dim(sub, max_len, tensorlib) for key, sub in value.items()}
    if isinstance(value, tuple):
        return tuple(_with_repeat_dim(sub, max_len, tensorlib) for sub in value)
    if isinstance(value, RepeatedValues):
        return RepeatedValues(_with_repeat_dim(value.values, max_len, tensorlib),
                              _with_repeat_dim(value.lengths, max_len, tensorlib), value.max_len)
    return _reshape(value, (-1, max_len, *tuple(value.shape[1:])), tensorlib)


def restore_original_dimensions(obs: TensorType, obs_space: gym.Space, tensorlib: Any = "torch") -> Any:
    """Turns a batch of flat observations back into the structure of the original space.

    Args:
        obs: ``[B, size]`` flat observations (a torch or TF tensor, or a numpy array).
            Anything that is not 2-D, or already has the Box's shape, is returned as is.
        obs_space: The space the model was built with (see :func:`model_obs_space`): its
            ``original_space``, when it has one, decides the structure.
        tensorlib: ``"torch"``, ``"tf"`` or ``"numpy"`` (classic RLlib passed the module
            itself; a module is accepted too).

    Returns:
        A dict of tensors for Dict spaces, a tuple for Tuple spaces, a tensor of shape
        ``[B, *space.shape]`` for a Box (Discrete components stay one-hot).
    """
    if not isinstance(tensorlib, str):
        tensorlib = "tf" if "tensorflow" in getattr(tensorlib, "__name__", "") else getattr(tensorlib, "__name__", "")
    original = getattr(obs_space, "original_space", obs_space)
    if isinstance(obs, (dict, tuple, list)) or len(getattr(obs, "shape", ())) != 2:
        return obs
    if isinstance(original, gym.spaces.Box) and tuple(obs.shape[1:]) == tuple(original.shape):
        return obs
    return _unflatten(obs, original, 0, tensorlib)[0]


class ModelV2:
    """Base of every model a policy holds (classic RLlib's ``ModelV2``).

    Subclass the framework's class (``TorchModelV2`` with ``torch.nn.Module``, or
    ``TFModelV2``), not this one.

    Args:
        obs_space: The observation space (see :func:`model_obs_space`).
        action_space: The action space.
        num_outputs: Size of the output the action distribution reads.
        model_config: The ``model`` sub-dict of the trainer's config.
        name: The model's name.
        framework: ``"torch"`` or ``"tf"``.
    """

    def __init__(self, obs_space: gym.Space, action_space: gym.Space, num_outputs: int, model_config: dict,
                 name: str, framework: str) -> None:
        self.obs_space = obs_space
        self.action_space = action_space
        self.num_outputs = num_outputs
        self.model_config = model_config
        self.name = name or "default_model"
        self.framework = framework
        self.time_major = bool(model_config.get("_time_major", False)) if model_config else False
        # Classic RLlib's data-view declarations: only the observation is read.
        self.view_requirements: dict[str, Any] = {}
        self._last_output: TensorType = None

    # ----- what a user's model defines ----------------------------------------------------

    def get_initial_state(self) -> list[TensorType]:
        """The initial recurrent state (an empty list: not recurrent)."""
        return []

    def forward(self, input_dict: dict[str, TensorType], state: list[TensorType],
                seq_lens: TensorType) -> tuple[TensorType, list[TensorType]]:
        """Returns ``(outputs [B, num_outputs], state_out)``; subclasses define it."""
        raise NotImplementedError(f"{type(self).__name__} must define forward(input_dict, state, seq_lens).")

    def value_function(self) -> TensorType:
        """The value estimates ``[B]`` of the last ``forward`` call; subclasses define it."""
        raise NotImplementedError(f"{type(self).__name__} must define value_function().")

    def custom_loss(self, policy_loss: Any, loss_inputs: dict[str, TensorType]) -> Any:
        """Lets the model change the policy's loss (returns it unchanged by default)."""
        return policy_loss

    def metrics(self) -> dict[str, Any]:
        """Model statistics reported with the learner stats (none by default)."""
        return {}

    # ----- calling --------------------------------------------------------------------------

    def __call__(self, input_dict: dict[str, TensorType], state: list[TensorType] | None = None,
                 seq_lens: TensorType = None) -> tuple[TensorType, list[TensorType]]:
        """Runs ``forward`` on ``input_dict`` (whose ``"obs"`` may be flat) and returns
        ``(outputs, state_out)``."""
        if not hasattr(input_dict, "keys") or "obs" not in input_dict:
            raise TypeError(
                f"{type(self).__name__} is called as model(input_dict, state, seq_lens) with input_dict holding "
                f"\"obs\" (classic RLlib's ModelV2 call); got {type(input_dict).__name__}. For a batch of flat "
                "observations call model.policy_and_value(obs) (or model.q_values(obs) for Q-networks).")
        restored = dict(input_dict)
        if self.framework == "torch" and isinstance(input_dict.get("obs"), np.ndarray):
            # 1.13's SampleBatch kept the torch tensors a script put in; rlstack's holds
            # numpy arrays, which a torch model's forward cannot take.
            import torch

            restored = {key: torch.as_tensor(value) if isinstance(value, np.ndarray) else value
                        for key, value in restored.items()}
        obs = restored["obs"]
        restored.setdefault("obs_flat", obs)
        # Classic RLlib's flag: True while the policy learns (a torch module's train mode),
        # or as the batch says (1.13's SampleBatch(..., _is_training=...)).
        flag = getattr(input_dict, "__dict__", {}).get("is_training")
        restored.setdefault("is_training", bool(getattr(self, "training", False) if flag is None else flag))
        restored["obs"] = restore_original_dimensions(obs, self.obs_space, self.framework)
        if state is None:
            # 1.13's model(train_batch): the state and sequence lengths from the batch.
            state = [input_dict[f"state_in_{i}"] for i in range(len(self.get_initial_state()))
                     if f"state_in_{i}" in input_dict]
            seq_lens = input_dict.get("seq_lens") if seq_lens is None else seq_lens
        try:
            with self.context():
                outputs, state_out = self.forward(restored, list(state), seq_lens)
        except TypeError as exc:
            if "multiple values for argument 'training'" not in str(exc):
                raise
            # Keras 2's Model.__call__(inputs, training, mask) took 1.13's
            # base_model(obs, state, seq_lens); Keras 3's passes `training` itself.
            raise ConfigError(
                f"{type(self).__name__}.forward calls a Keras model with more than its inputs (1.13's "
                f"`self.base_model(input_dict['obs'], state, seq_lens)`), which Keras 3 refuses: {exc}. Call it with "
                "the inputs only, `self.base_model(input_dict['obs'])`, and return `state` yourself.") from exc
        except AttributeError as exc:
            if "with Keras 3" not in str(exc):
                raise
            # TF 1's graph-mode layers (tf1.layers.dense, ...), which 1.13's static-graph TF
            # policies ran: Keras 3 has none of them.
            raise ConfigError(
                f"{type(self).__name__}.forward calls TF 1's graph-mode layer API ({exc}); rlstack's TF policies run "
                "TF 2 (eager, with tf.function), where Keras 3 removed it. Build the layers once in __init__ with "
                "tf.keras.layers and call them in forward, as a TFModelV2 for tf2 did in 1.13.") from exc
        if not isinstance(state_out, (list, tuple)):
            raise ValueError(
                f"{type(self).__name__}.forward must return (outputs, state_out) with state_out a list "
                f"(the input state for non-recurrent models); got state_out of type {type(state_out).__name__}.")
        self._last_output = outputs
        return outputs, list(state_out)

    def policy_and_value(self, obs_flat: TensorType) -> tuple[TensorType, TensorType]:
        """``(dist_inputs [B, num_outputs], values [B])`` for flat observations: what the
        policies call. Built-in models override this with their direct path."""
        outputs, _ = self({"obs": obs_flat, "obs_flat": obs_flat}, self.get_initial_state(), None)
        return outputs, _flat_values(self.value_function(), self.framework)

    def policy_and_value_rnn(self, obs_flat: TensorType, state: list[TensorType], seq_lens: TensorType,
                             prev_actions: TensorType = None, prev_rewards: TensorType = None,
                             ) -> tuple[TensorType, TensorType, list[TensorType]]:
        """``(dist_inputs [B * T, num_outputs], values [B * T], state_out)`` for a
        recurrent model: flat observations ``[B * T, obs_size]`` of ``B`` sequences padded
        to ``T`` steps (``T`` = 1 when acting), ``state`` as ``[B, ...]`` tensors at
        each sequence's start, ``seq_lens [B]``, and each row's previous actions and
        rewards (``[B * T, ...]``, see ``models/prev_inputs.py``) for a model that reads
        them. What the policies call; it runs ``forward(input_dict, state, seq_lens)``
        (1.13's call, the previous ones as ``input_dict["prev_actions"]`` /
        ``["prev_rewards"]``) and ``value_function()``."""
        input_dict = {"obs": obs_flat, "obs_flat": obs_flat}
        for key, value in (("prev_actions", prev_actions), ("prev_rewards", prev_rewards)):
            if value is not None:
                input_dict[key] = value
        outputs, state_out = self(input_dict, state, seq_lens)
        return outputs, _flat_values(self.value_function(), self.framework), state_out

    def value(self, obs_flat: TensorType) -> TensorType:
        """``values [B]`` for flat observations."""
        return self.policy_and_value(obs_flat)[1]

    def q_values(self, obs_flat: TensorType) -> TensorType:
        """``Q(s, .)`` as ``[B, num_actions]`` for flat observations: what Q-learning
        policies call. A custom model's outputs are its Q-values; the built-in Q-networks
        override this with their direct path. No ``value_function()`` is needed (1.13's
        Q-model examples define only ``forward``)."""
        return self({"obs": obs_flat, "obs_flat": obs_flat}, self.get_initial_state(), None)[0]

    # ----- classic helpers ----------------------------------------------------------------------

    def context(self) -> contextlib.AbstractContextManager:
        """A context ``forward`` runs in (none)."""
        return contextlib.nullcontext()

    def last_output(self) -> TensorType:
        """The outputs of the last call."""
        return self._last_output

    def is_time_major(self) -> bool:
        """Whether sequences are time-major (``model_config["_time_major"]``)."""
        return self.time_major


def _flat_values(values: TensorType, framework: str) -> TensorType:
    # value_function() may return [B] or [B, 1].
    if len(getattr(values, "shape", ())) == 2 and values.shape[1] == 1:
        return _reshape(values, (-1,), framework)
    return values
