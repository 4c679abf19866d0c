"""What a policy knows about recurrent state, framework-free: its model's initial state
and the previous actions / rewards it reads, checking them when given from outside, and
the train batch as sequences.

:class:`RecurrentPolicyMixin` is part of every :class:`~rlstack.policies.policy.Policy`;
a policy is recurrent when its model's ``get_initial_state()`` is not empty (``use_lstm``,
a custom ``RecurrentNetwork``). See ``rnn_sequencing.py`` for the sequences and the
framework bases' ``unroll`` / ``model_outputs`` for how losses read them, and
``models/prev_inputs.py`` for the ``prev_actions`` / ``prev_rewards`` columns.
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np

from rlstack.errors import ConfigError
from rlstack.models.modelv2 import model_obs_space
from rlstack.models.prev_inputs import PREV_ACTIONS, PREV_REWARDS, PrevInputsSpec
from rlstack.policies.rnn_sequencing import SEQ_START, state_in_key, state_out_key
from rlstack.sample_batch import SampleBatch


def _as_array(value: Any) -> np.ndarray:
    # A framework tensor or array as a float32 numpy array.
    if hasattr(value, "detach"):
        value = value.detach().cpu()
    if hasattr(value, "numpy"):
        value = value.numpy()
    return np.array(value, dtype=np.float32)


def prev_inputs_of(model: Any, action_space: Any) -> PrevInputsSpec | None:
    """What a recurrent ``model`` reads of the past: its ``prev_inputs`` (the built-in
    models say), else 1.13's default view of one previous action and reward."""
    if hasattr(model, "prev_inputs"):
        return model.prev_inputs
    return PrevInputsSpec.default_view(action_space)


class RecurrentPolicyMixin:
    """Recurrent state and sequences for :class:`~rlstack.policies.policy.Policy`."""

    config: dict
    observation_space: Any
    action_space: Any
    dist_spec: Any
    # The loss reads padded sequences (learner_batch, the framework bases' unroll):
    # recurrent models (use_lstm, a custom RecurrentNetwork) may train with this policy.
    supports_recurrent_models: bool = False
    # use_attention's model in this policy's framework, "module:Class" (imported on use).
    attention_model_class: str = ""
    # A recurrent model's train batch keeps its rows in order, whole rollout fragments,
    # with seq_start marks (IMPALA's time-major loss), instead of padded sequences.
    sequences_in_row_order: bool = False

    def get_initial_state(self) -> list[np.ndarray]:
        """The model's state at an episode's start, one numpy array per state tensor
        (without a batch dimension; ``[h, c]`` for ``use_lstm``), or ``[]`` for a model
        without state (1.13's ``Policy.get_initial_state``). Read from the model once."""
        initial = self.__dict__.get("_initial_state")
        if initial is None:
            model = getattr(self, "model", None)
            if model is None or not hasattr(model, "get_initial_state"):
                return []
            initial = self.__dict__["_initial_state"] = [_as_array(value)
                                                         for value in model.get_initial_state()]
        return [value.copy() for value in initial]

    @property
    def is_recurrent(self) -> bool:
        """Whether the model carries state from step to step (1.13's ``is_recurrent()``)."""
        return self.num_state_tensors() > 0

    def num_state_tensors(self) -> int:
        """How many state tensors the model carries (0: none)."""
        initial = self.__dict__.get("_initial_state")
        return len(initial) if initial is not None else len(self.get_initial_state())

    def initial_state_batch(self, n: int) -> list[np.ndarray]:
        """The initial state for ``n`` rows: one ``[n, ...]`` array per state tensor."""
        # np.asarray: a hand-written 1.13 policy's state may be plain Python numbers.
        return [np.repeat(np.asarray(value)[None], n, axis=0) for value in self.get_initial_state()]

    @property
    def prev_inputs(self) -> PrevInputsSpec | None:
        """The previous actions and rewards the model reads (``lstm_use_prev_*``,
        ``attention_use_n_prev_*``), or None. A custom recurrent model that does not say
        (no ``prev_inputs`` attribute) gets 1.13's default view: the previous action
        and reward, one step each, as ``input_dict["prev_actions"]`` / ``["prev_rewards"]``."""
        if "_prev_inputs" not in self.__dict__:
            model = getattr(self, "model", None)
            if model is None:
                return None
            self.__dict__["_prev_inputs"] = prev_inputs_of(model, self.action_space) if self.is_recurrent else None
        return self.__dict__["_prev_inputs"]

    def prev_input_batches(self, n: int, prev_action_batch: Any = None, prev_reward_batch: Any = None,
                           one: bool = False, trusted: bool = False) -> dict[str, np.ndarray]:
        """The ``prev_actions`` / ``prev_rewards`` columns the model reads for ``n`` rows
        (``{}`` for a model that reads none): the given batches, checked, or zeros (an
        episode's start) for one not given. ``one``: a single row may come without its
        batch dimension; ``trusted``: arrays of the columns' exact shape and dtype (a
        rollout worker's, or checked before) are not checked again.

        Raises:
            ValueError: For a batch of the wrong shape or an action outside the action
                space, saying what the model reads.
        """
        spec = self.prev_inputs
        if spec is None:
            return {}
        return spec.check({PREV_ACTIONS: prev_action_batch, PREV_REWARDS: prev_reward_batch}, n, one, trusted)

    def single_recurrent_action(self, obs: np.ndarray, state: Any, prev_action: Any, prev_reward: Any,
                                explore: bool | None) -> tuple[Any, list[np.ndarray], dict[str, Any]]:
        """``compute_single_action`` of a recurrent policy: one preprocessed ``obs`` from
        ``state`` (None or ``[]``: the initial state) and, for a model that reads them,
        ``prev_action`` / ``prev_reward`` (None: zeros); ``(action, state_out, extras)``.

        Raises:
            ValueError: For a state, ``prev_action`` or ``prev_reward`` that does not fit.
        """
        initial = self.get_initial_state()
        states = initial if state is None or len(state) == 0 else self.check_state(state)
        # One row: [1, ...] per state tensor (a state given with its batch dimension of 1 too).
        batches = [value.reshape(1, *init.shape) if value.size == init.size else None
                   for value, init in zip(states, initial)]
        if any(value is None for value in batches):
            raise ValueError("compute_single_action() acts on one observation; its state must be one row "
                             f"(shapes {[init.shape for init in initial]}), got shapes "
                             f"{[value.shape for value in states]}. Use compute_actions() for a batch.")
        prev = self.prev_input_batches(1, prev_action, prev_reward, one=True)
        actions, extras = self.compute_actions(obs[None], explore=explore, state_batches=batches,
                                               prev_action_batch=prev.get(PREV_ACTIONS),
                                               prev_reward_batch=prev.get(PREV_REWARDS))
        state_out = [extras.pop(state_out_key(i))[0] for i in range(len(initial))]
        return actions[0], state_out, {key: value[0] for key, value in extras.items()}

    def _make_attention_model(self, model_config: dict) -> Any:
        # use_attention: the framework's AttentionWrapper (a 1.13 RecurrentNetwork, acting
        # in the framework on workers too), on the initial weights of the config's seed:
        # the same in torch and TF.
        if not self.supports_recurrent_models:
            from rlstack.trainers.common.registry import recurrent_algorithms

            raise ConfigError(
                f"model.use_attention=True, but {type(self).__name__} does not train recurrent models yet; use "
                f"{', '.join(recurrent_algorithms())}, or set use_attention=False.")
        module, _, name = self.attention_model_class.partition(":")
        model_class = getattr(importlib.import_module(module), name)
        model = model_class(model_obs_space(self.observation_space), self.action_space, self.dist_spec.num_outputs,
                            model_config, "model")
        model.load_canonical_weights(model.gtrxl_spec.initial_weights(self.config.get("seed")))
        return model

    def check_state(self, state: Any, what: str = "state") -> list[np.ndarray]:
        """``state`` as float32 arrays, checked against :meth:`get_initial_state` (count
        and shapes; a leading batch dimension is allowed if it is the same on all).

        Raises:
            ValueError: Saying what was given, what the model expects and the fix.
        """
        expected = self.get_initial_state()
        shapes = [tuple(value.shape) for value in expected]
        fix = ("Pass policy.get_initial_state() at an episode's start (trainer.get_policy().get_initial_state()), "
               "then the state_out that the previous call returned.")
        if not isinstance(state, (list, tuple)):
            raise ValueError(f"The {what} must be a list of {len(expected)} arrays of shapes {shapes}; got a "
                             f"{type(state).__name__}. {fix}")
        if len(state) != len(expected):
            raise ValueError(f"The {what} has {len(state)} tensors but this policy's model has {len(expected)} "
                             f"(shapes {shapes}). {fix}")
        arrays = [np.asarray(value, dtype=np.float32) for value in state]
        for i, (array, shape) in enumerate(zip(arrays, shapes)):
            if array.shape != shape and array.shape[1:] != shape:
                raise ValueError(f"The {what}'s tensor {i} has shape {array.shape}; the model expects {shape} (or "
                                 f"[batch, {', '.join(map(str, shape))}]). {fix}")
        return arrays

    def max_seq_len(self) -> int:
        """``model.max_seq_len``: the longest sequence a train batch is chopped into."""
        return int(self.config.get("model", {}).get("max_seq_len", 20))

    def learner_batch(self, batch: SampleBatch) -> SampleBatch:
        """The batch the learner loop cuts into minibatches: ``batch`` itself, or for a
        recurrent model its padded sequences (``rnn_sequencing.pad_batch_to_sequences``),
        one row per sequence."""
        if not self.is_recurrent:
            return batch
        from rlstack.policies.rnn_sequencing import mark_sequence_starts, pad_batch_to_sequences

        if self.sequences_in_row_order:
            return mark_sequence_starts(batch, self.max_seq_len(), int(self.config["rollout_fragment_length"]))
        return pad_batch_to_sequences(batch, self.max_seq_len())

    def learner_columns(self, batch: SampleBatch) -> tuple[str, ...]:
        """The columns of a :meth:`learner_batch` the loss reads: ``loss_columns`` (all
        when empty), with a recurrent model's ``seq_lens``, ``seq_mask``, states and the
        ``prev_actions`` / ``prev_rewards`` it reads."""
        columns = tuple(getattr(self, "loss_columns", ()) or batch.keys())
        if self.is_recurrent:
            read = self.prev_inputs.columns() if self.prev_inputs is not None else {}
            extra = [key for key in batch if key in ("seq_lens", "seq_mask", "seq_start", *read)
                     or key.startswith("state_in_")]
            columns = (*columns, *(key for key in extra if key not in columns))
        return columns

    def model_outputs(self, rows: dict[str, Any]) -> tuple[Any, Any]:
        """``(dist_inputs, values)`` of :meth:`unroll`'s rows: the model on ``obs``, a
        recurrent one over the sequences from their ``state_in_<i>`` and ``seq_lens``,
        reading the rows' ``prev_actions`` / ``prev_rewards`` if it reads them."""
        if not self.is_recurrent:
            return self.model.policy_and_value(rows[SampleBatch.OBS])
        if SEQ_START in rows:
            return self._outputs_in_row_order(rows)
        state = [rows[state_in_key(i)] for i in range(self.num_state_tensors())]
        dist_inputs, values, _ = self.model.policy_and_value_rnn(rows[SampleBatch.OBS], state,
                                                                 rows[SampleBatch.SEQ_LENS], **self.prev_rows(rows))
        return dist_inputs, values

    def prev_rows(self, rows: dict[str, Any]) -> dict[str, Any]:
        """The ``prev_actions`` / ``prev_rewards`` of ``rows`` the model reads, as
        keyword arguments of ``policy_and_value_rnn`` (a custom model on 1.13's default
        view gets those the batch has).

        Raises:
            KeyError: If the batch lacks one a built-in model reads (it was sampled
                without them).
        """
        spec = self.prev_inputs
        if spec is None:
            return {}
        if not hasattr(self.model, "prev_inputs"):
            return {key: rows[key] for key in spec.columns() if key in rows}
        missing = [key for key in spec.columns() if key not in rows]
        if missing:
            raise KeyError(f"The train batch has no {' / '.join(missing)} column, which the model reads "
                           "(lstm_use_prev_* / attention_use_n_prev_*, or a custom recurrent model); rollout "
                           "workers record them for a policy built with the same model config.")
        return {key: rows[key] for key in spec.columns()}

    def _outputs_in_row_order(self, rows: dict[str, Any]) -> tuple[Any, Any]:
        # IMPALA's rows in their own order (seq_start marks): each framework base runs
        # the model over their sequences.
        raise NotImplementedError

    def microbatch_rows(self, n: int) -> int:
        """Rows of a :meth:`learner_batch` of ``n`` rows per microbatch of
        ``compute_gradients``: ``microbatch_size`` (the whole batch when unset); for a
        recurrent model whole sequences, ``microbatch_size // max_seq_len`` of them."""
        size = int(self.config.get("microbatch_size") or 0)
        if self.is_recurrent and size and not self.sequences_in_row_order:
            size = max(1, size // self.max_seq_len())
        return size or n or 1

    def refuse_recurrent_export(self) -> None:
        """Raises for a recurrent model: the exported graph maps ``obs`` alone to the
        outputs and would drop the state.

        Raises:
            NotImplementedError: Naming what to use instead.
        """
        if self.is_recurrent:
            raise NotImplementedError(
                "export_model does not export recurrent models yet (its graph maps obs alone to the outputs); "
                "save the weights with export_checkpoint() or trainer.save() and act with "
                "compute_single_action(obs, state).")
