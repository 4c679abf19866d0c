"""Previous actions and rewards as model inputs, framework-free: 1.13's
``lstm_use_prev_action`` / ``lstm_use_prev_reward`` (the LSTM wrapper) and
``attention_use_n_prev_actions`` / ``attention_use_n_prev_rewards`` (the attention wrapper).

Two sample-batch columns, 1.13's names, hold them for each row: what the model read when
the row acted, so that training reads the same.

* ``prev_actions``: the action(s) before the row's step, as the policy chose them
  (Discrete: the category index; MultiDiscrete: one index per component; Box: the
  distribution's sample before it was unsquashed or clipped for the env).
* ``prev_rewards``: the reward(s) before the row's step (after ``clip_rewards``).

Both are zeros at an episode's start (nothing came before its first step; a zero
Discrete action reads as category 0, as in 1.13). The LSTM reads one previous step:
``prev_actions [B, *action_shape]``, ``prev_rewards [B]``. The attention net reads the
last ``n`` actions and ``m`` rewards as windows, oldest first: ``[B, n, *action_shape]``
and ``[B, m]``.

A model encodes them (:func:`with_prev_inputs`: one-hot for Discrete, one-hot per
component for MultiDiscrete, flat floats for Box; rewards as floats) after its
encoder's features, in 1.13's order ``[features, prev actions, prev rewards]``. The
encoding is written once here over a few tensor operations (:class:`TensorOps`) that
numpy, torch and TF each supply.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

import gymnasium as gym
import numpy as np

from rlstack.errors import ConfigError
from rlstack.sample_batch import SampleBatch

PREV_ACTIONS = SampleBatch.PREV_ACTIONS
PREV_REWARDS = SampleBatch.PREV_REWARDS


class TensorOps(NamedTuple):
    """The four tensor operations the encoding needs, in one framework.

    Attributes:
        one_hot: ``one_hot(x, depth)``: float32 one-hot vectors of the integers ``x``.
        to_float: ``to_float(x)``: ``x`` as float32.
        reshape: ``reshape(x, shape)``.
        concat: ``concat(xs)``: the tensors joined along their last axis.
    """

    one_hot: Callable[[Any, int], Any]
    to_float: Callable[[Any], Any]
    reshape: Callable[[Any, tuple[int, ...]], Any]
    concat: Callable[[list[Any]], Any]


NUMPY_OPS = TensorOps(
    one_hot=lambda x, depth: np.eye(depth, dtype=np.float32)[np.asarray(x, np.int64)],
    to_float=lambda x: np.asarray(x, np.float32),
    reshape=np.reshape,
    concat=lambda xs: np.concatenate(xs, axis=-1),
)


@dataclass(frozen=True)
class PrevInputsSpec:
    """Which previous actions and rewards a model reads, and how they are laid out.

    Attributes:
        num_actions: How many previous actions each step reads (0: none).
        num_rewards: How many previous rewards each step reads (0: none).
        window: The columns carry a window axis of ``num_actions`` / ``num_rewards``
            steps (the attention net); without it, one step and no axis (the LSTM).
        nvec: Category counts of a Discrete (``(n,)``) or MultiDiscrete action; ``()``
            for Box actions.
        action_shape: One action's shape, as the policy outputs it.
    """

    num_actions: int
    num_rewards: int
    window: bool
    nvec: tuple[int, ...]
    action_shape: tuple[int, ...]

    @classmethod
    def for_action_space(cls, action_space: gym.Space, num_actions: int, num_rewards: int, window: bool,
                         what: str = "model.lstm_use_prev_action") -> PrevInputsSpec | None:
        """The spec for ``action_space``; None when nothing previous is read.

        Raises:
            ConfigError: If previous actions are asked for an action space they cannot
                be encoded for (not Discrete, MultiDiscrete or Box).
        """
        if not num_actions and not num_rewards:
            return None
        nvec: tuple[int, ...] = ()
        shape: tuple[int, ...] = ()
        if isinstance(action_space, gym.spaces.Discrete):
            nvec = (int(action_space.n),)
        elif isinstance(action_space, gym.spaces.MultiDiscrete):
            nvec = tuple(int(n) for n in np.asarray(action_space.nvec).reshape(-1))
            shape = (len(nvec),)
        elif isinstance(action_space, gym.spaces.Box):
            shape = tuple(int(d) for d in action_space.shape)
        elif num_actions:
            raise ConfigError(f"{what} feeds previous actions to the model, which encodes Discrete, MultiDiscrete "
                              f"and Box actions only; the action space is {action_space}. Turn the key off.")
        return cls(int(num_actions), int(num_rewards), bool(window), nvec, shape)

    @classmethod
    def default_view(cls, action_space: gym.Space) -> PrevInputsSpec:
        """1.13's default view for a custom recurrent model: the previous action (when
        its space can be encoded) and the previous reward, one step each."""
        encodable = isinstance(action_space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.Box))
        return cls.for_action_space(action_space, int(encodable), 1, window=False)

    @property
    def discrete(self) -> bool:
        """Whether actions are category indices (Discrete, MultiDiscrete)."""
        return bool(self.nvec)

    @property
    def action_size(self) -> int:
        """Size of one encoded action: its one-hot vectors, or its flat floats."""
        return sum(self.nvec) if self.nvec else int(np.prod(self.action_shape, dtype=np.int64))

    @property
    def size(self) -> int:
        """Size of everything previous, encoded: what it adds to the features."""
        return self.num_actions * self.action_size + self.num_rewards

    def columns(self) -> dict[str, tuple[tuple[int, ...], type]]:
        """``{column: (shape of one row, dtype)}`` of the columns the model reads."""
        out: dict[str, tuple[tuple[int, ...], type]] = {}
        if self.num_actions:
            window = (self.num_actions,) if self.window else ()
            out[PREV_ACTIONS] = ((*window, *self.action_shape), np.int64 if self.discrete else np.float32)
        if self.num_rewards:
            out[PREV_REWARDS] = ((self.num_rewards,) if self.window else (), np.float32)
        return out

    def zeros(self, n: int) -> dict[str, np.ndarray]:
        """The columns for ``n`` rows at an episode's start: zeros."""
        return {key: np.zeros((n, *shape), dtype) for key, (shape, dtype) in self.columns().items()}

    def push(self, prev: dict[str, np.ndarray], actions: np.ndarray, rewards: np.ndarray) -> None:
        """Moves ``prev`` (from :meth:`zeros`, one row per episode) one step on, in place:
        the step's ``actions`` and ``rewards`` become the newest previous ones."""
        for key, new in ((PREV_ACTIONS, actions), (PREV_REWARDS, rewards)):
            if key not in prev:
                continue
            column = prev[key]
            if self.window:
                column[:, :-1] = column[:, 1:]
                column[:, -1] = np.reshape(new, column[:, -1].shape)
            else:
                column[...] = np.reshape(new, column.shape)

    def check(self, prev: dict[str, Any], n: int, one: bool = False, trusted: bool = False) -> dict[str, np.ndarray]:
        """Previous actions / rewards from outside (``compute_actions``,
        ``compute_single_action``) as the columns for ``n`` rows: zeros where one is
        missing (None: an episode's start). ``one``: a single row may come without its
        batch dimension. ``trusted``: arrays of exactly the columns' shape and dtype
        (a rollout worker's) are taken as they are, their values unchecked.

        Raises:
            ValueError: Saying what was given, the shape and values expected, and why.
        """
        out = self.zeros(n)
        for key, given in ((PREV_ACTIONS, prev.get(PREV_ACTIONS)), (PREV_REWARDS, prev.get(PREV_REWARDS))):
            if key not in out or given is None:
                continue
            expected = out[key]
            if trusted and isinstance(given, np.ndarray) and given.shape == expected.shape \
                    and given.dtype == expected.dtype:
                out[key] = given
                continue
            name = "prev_action" if key == PREV_ACTIONS else "prev_reward"
            try:
                array = np.asarray(given, dtype=np.float64)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"{name} {given!r} is not numeric; {self._describe(key, one)}.") from exc
            if one and array.shape == expected.shape[1:]:
                array = array[None]
            if array.shape != expected.shape:
                raise ValueError(f"{name} has shape {array.shape}; {self._describe(key, one)}.")
            if not np.isfinite(array).all():
                raise ValueError(f"{name} holds a NaN or inf: {given!r}; {self._describe(key, one)}.")
            if key == PREV_ACTIONS and self.discrete:
                high = np.asarray(self.nvec).reshape((1,) * (array.ndim - len(self.action_shape)) + self.action_shape)
                if (array != np.round(array)).any() or (array < 0).any() or (array >= high).any():
                    raise ValueError(f"prev_action {given!r} is not in the action space; {self._describe(key, one)}.")
            out[key] = array.astype(expected.dtype)
        return out

    def _describe(self, key: str, one: bool) -> str:
        shape, _ = self.columns()[key]
        batch = "" if one else f", [batch, {', '.join(map(str, shape))}] for a batch" if shape else \
            ", [batch] for a batch"
        if key == PREV_REWARDS:
            what = (f"the last {self.num_rewards} rewards, oldest first (shape {shape}{batch})" if self.window
                    else f"the previous reward, one number (shape (){batch})")
        else:
            if len(self.nvec) == 1 and not self.action_shape:
                one_action = f"a category index in [0, {self.nvec[0]})"
            elif self.discrete:
                one_action = (f"an array of shape {self.action_shape} of category indices in [0, n) for n in "
                              f"{list(self.nvec)}")
            else:
                one_action = f"an array of floats of shape {self.action_shape}"
            what = (f"the last {self.num_actions} actions, oldest first, each {one_action} (shape {shape}{batch})"
                    if self.window else f"the previous action, {one_action} (shape {shape}{batch})")
        return f"the model reads {what}; None (zeros) at an episode's start"


def with_prev_inputs(spec: PrevInputsSpec | None, features: Any, input_dict: dict[str, Any], ops: TensorOps) -> Any:
    """``features [B, F]`` followed by the encoded previous actions and rewards of
    ``input_dict`` (1.13's order: ``[features, prev actions, prev rewards]``), or the
    features alone when ``spec`` is None.

    Raises:
        ValueError: If ``input_dict`` lacks a column the model reads.
    """
    if spec is None:
        return features
    parts = [features]
    for key in spec.columns():
        if input_dict.get(key) is None:
            raise ValueError(f"The model reads input_dict[{key!r}] (model.lstm_use_prev_* / "
                             f"attention_use_n_prev_*), which this call lacks; pass it to policy_and_value_rnn.")
    if spec.num_actions:
        actions = input_dict[PREV_ACTIONS]
        if spec.discrete:
            parts_per_component = [ops.one_hot(actions if len(spec.action_shape) == 0 else actions[..., j], n)
                                   for j, n in enumerate(spec.nvec)]
            actions = parts_per_component[0] if len(spec.nvec) == 1 else ops.concat(parts_per_component)
        else:
            actions = ops.to_float(actions)
        parts.append(ops.reshape(actions, (-1, spec.num_actions * spec.action_size)))
    if spec.num_rewards:
        parts.append(ops.reshape(ops.to_float(input_dict[PREV_REWARDS]), (-1, spec.num_rewards)))
    return ops.concat(parts)
