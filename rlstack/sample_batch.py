"""SampleBatch: the unit of experience that flows from rollout workers to learners.

A SampleBatch is a ``dict`` of numpy arrays ("columns") that all have the same length
along their first axis, one row per environment step. Column names are the constants
below, so that a typo is an ``AttributeError`` rather than a silent ``KeyError`` later.

Examples:
    >>> import numpy as np
    >>> b = SampleBatch({SampleBatch.OBS: np.zeros((4, 2)), SampleBatch.REWARDS: np.arange(4.0)})
    >>> len(b), b[1:3][SampleBatch.REWARDS].tolist()
    (4, [1.0, 2.0])
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import numpy as np

__all__ = ["DEFAULT_POLICY_ID", "MultiAgentBatch", "SampleBatch", "concat_samples"]

# The id of a single-agent trainer's one policy (``trainer.get_policy(DEFAULT_POLICY_ID)``,
# ``result["info"]["learner"][DEFAULT_POLICY_ID]``). Defined here, with no heavy import,
# so that ``rlstack.policies.sample_batch`` offers it as 1.x's module did.
DEFAULT_POLICY_ID = "default_policy"


class SampleBatch(dict):
    """A dict of equal-length numpy columns; rows are environment steps.

    Args:
        columns: Mapping from column name to array-like; each is converted with
            ``np.asarray``.

    Raises:
        ValueError: If the columns do not all have the same length.
    """

    OBS = "obs"
    ACTIONS = "actions"
    REWARDS = "rewards"
    TERMINATEDS = "terminateds"
    TRUNCATEDS = "truncateds"
    EPS_ID = "eps_id"
    ACTION_LOGP = "action_logp"
    ACTION_DIST_INPUTS = "action_dist_inputs"
    VF_PREDS = "vf_preds"
    # Multi-agent batches: the agent's index in its episode (in order of appearance).
    AGENT_INDEX = "agent_index"
    # V(s_last) on the last row of a trajectory piece that did not terminate (time
    # limit or fragment cut), 0.0 everywhere else. GAE bootstraps from it.
    BOOTSTRAP_VALUE = "bootstrap_value"
    ADVANTAGES = "advantages"
    VALUE_TARGETS = "value_targets"
    # Off-policy columns (DQN family). NEXT_OBS is the observation after the step (the
    # final observation at an episode end); after n-step postprocessing REWARDS holds the
    # n-step return, NEXT_OBS the observation n steps later and DISCOUNTS gamma ** k for
    # the k steps actually summed (fewer than n where the trajectory piece ends).
    NEXT_OBS = "new_obs"
    DISCOUNTS = "discounts"
    # Initial replay priorities computed on the workers (ApeX), the importance weights of
    # a prioritized sample, and the buffer slots a replayed row came from.
    PRIORITIES = "priorities"
    WEIGHTS = "weights"
    BATCH_INDEXES = "batch_indexes"
    # Recurrent models (1.13's names): the length of each sequence of a padded train
    # batch, and the state a row acted from / its step returned (``state_in_0``,
    # ``state_out_0``, ...; see rlstack.policies.rnn_sequencing).
    SEQ_LENS = "seq_lens"
    STATE_IN = "state_in"
    STATE_OUT = "state_out"
    # The action(s) and reward(s) before a row's step, zeros at an episode's start: what
    # a recurrent model reads with lstm_use_prev_action / lstm_use_prev_reward or
    # attention_use_n_prev_actions / _rewards (see rlstack.models.prev_inputs).
    PREV_ACTIONS = "prev_actions"
    PREV_REWARDS = "prev_rewards"
    # 1.13's other column names, for code written against them. DONES is read as
    # terminateds | truncateds when a batch has no column of that name (1.13 had one flag
    # for both); the others name columns rlstack's samplers do not write.
    CUR_OBS = "obs"
    DONES = "dones"
    INFOS = "infos"
    T = "t"
    ENV_ID = "env_id"
    UNROLL_ID = "unroll_id"
    ACTION_PROB = "action_prob"

    # 1.13's batch flags (see __init__).
    is_training = False
    time_major = False
    zero_padded = False
    max_seq_len: int | None = None

    def __init__(self, columns: Mapping[str, object] | None = None, **kwargs: object) -> None:
        super().__init__()
        merged = dict(columns or {}, **kwargs)
        for flag in _CLASSIC_FLAGS.intersection(merged):
            # 1.13's flags given as keywords (SampleBatch(obs=..., _is_training=False)): the
            # batch's attributes, not columns.
            setattr(self, flag[1:], merged.pop(flag))
        for key, value in merged.items():
            dict.__setitem__(self, key, _column(key, value))
        self._check_lengths()

    def _check_lengths(self) -> None:
        lengths = {key: len(value) for key, value in self.items()}
        if len(set(lengths.values())) > 1:
            raise ValueError(f"SampleBatch columns differ in length: {lengths}")

    def __setitem__(self, key: str, value: object) -> None:
        array = _column(key, value)
        # dict.__len__ counts columns (len(self) counts rows, which may be 0).
        if dict.__len__(self) and len(array) != self.count:
            raise ValueError(
                f"Column {key!r} has {len(array)} rows but the batch has {self.count}; "
                "every column must have one row per step."
            )
        dict.__setitem__(self, key, array)

    def __getitem__(self, key):  # type: ignore[override]
        if isinstance(key, slice):
            return SampleBatch({name: value[key] for name, value in self.items()})
        return dict.__getitem__(self, key)

    def __missing__(self, key: str) -> np.ndarray:
        # 1.13's "dones": the episode ended at this row, terminated or truncated.
        if key == self.DONES and self.TERMINATEDS in self:
            done = np.asarray(dict.__getitem__(self, self.TERMINATEDS), dtype=bool)
            if self.TRUNCATEDS in self:
                done = done | np.asarray(dict.__getitem__(self, self.TRUNCATEDS), dtype=bool)
            return done
        raise KeyError(key)

    def __len__(self) -> int:  # noqa: D105 - number of rows, not of columns
        return self.count

    @property
    def count(self) -> int:
        """Number of rows (steps)."""
        for value in self.values():
            return len(value)
        return 0

    @property
    def columns(self) -> list[str]:
        """The column names."""
        return list(self.keys())

    def copy(self) -> "SampleBatch":  # type: ignore[override]
        """Returns a batch with copies of every column."""
        return SampleBatch({key: value.copy() for key, value in self.items()})

    def slice(self, start: int, end: int) -> "SampleBatch":
        """Returns rows ``start:end`` (views, not copies)."""
        return SampleBatch({key: value[start:end] for key, value in self.items()})

    def take(self, indices: np.ndarray) -> "SampleBatch":
        """Returns the rows at ``indices`` (copies)."""
        return SampleBatch({key: value[indices] for key, value in self.items()})

    def shuffle(self, rng: np.random.Generator | None = None) -> "SampleBatch":
        """Returns the rows in a random order."""
        rng = rng if rng is not None else np.random.default_rng()
        return self.take(rng.permutation(self.count))

    def minibatches(
        self, size: int, shuffle: bool = True, rng: np.random.Generator | None = None
    ) -> Iterator["SampleBatch"]:
        """Yields minibatches of ``size`` rows that cover every row once.

        The last minibatch holds the remainder when ``size`` does not divide the batch
        (as in classic RLlib's minibatch SGD).

        Args:
            size: Rows per minibatch.
            shuffle: Shuffle the rows first.
            rng: Random generator for the shuffle.

        Raises:
            ValueError: If ``size`` is not positive.
        """
        if size <= 0:
            raise ValueError(f"minibatch size must be positive, got {size}")
        if shuffle:
            order = (rng if rng is not None else np.random.default_rng()).permutation(self.count)
            for start in range(0, self.count, size):
                yield self.take(order[start : start + size])
        else:
            for start in range(0, self.count, size):
                yield self.slice(start, start + size)

    def split_by_episode(self) -> list["SampleBatch"]:
        """Splits the rows into one batch per contiguous run of the same ``eps_id``.

        Raises:
            KeyError: If the batch has no ``eps_id`` column.
        """
        if self.count == 0:
            return []
        eps_id = self[self.EPS_ID]
        boundaries = np.flatnonzero(eps_id[1:] != eps_id[:-1]) + 1
        edges = [0, *boundaries.tolist(), self.count]
        return [self.slice(a, b) for a, b in zip(edges[:-1], edges[1:])]

    def size_bytes(self) -> int:
        """Memory held by the column arrays, in bytes."""
        return int(sum(value.nbytes for value in self.values()))

    @staticmethod
    def concat_samples(batches: Sequence["SampleBatch"]) -> "SampleBatch":
        """Concatenates batches with the same columns row-wise (see :func:`concat_samples`)."""
        return concat_samples(batches)

    def as_multi_agent(self) -> "MultiAgentBatch":
        """This batch as the one policy batch (``default_policy``) of a MultiAgentBatch."""
        return MultiAgentBatch({DEFAULT_POLICY_ID: self}, self.count)

    def env_steps(self) -> int:
        """Env steps in the batch: its rows (1.13's name, shared with MultiAgentBatch)."""
        return self.count

    def agent_steps(self) -> int:
        """Agent steps in the batch: its rows, one agent acting per step."""
        return self.count

    def __repr__(self) -> str:
        cols = ", ".join(f"{k}: {v.dtype}{list(v.shape)}" for k, v in self.items())
        return f"SampleBatch({self.count} rows; {cols})"


_CLASSIC_FLAGS = frozenset({"_is_training", "_time_major", "_zero_padded", "_max_seq_len"})


def _column(key: str, value: object) -> np.ndarray:
    array = np.asarray(value)
    if array.ndim == 0:
        raise ValueError(f"Column {key!r} is a scalar ({value!r}); a column needs one row per step.")
    return array


def concat_samples(batches: Sequence[SampleBatch | MultiAgentBatch]) -> SampleBatch | MultiAgentBatch:
    """Concatenates batches row-wise; empty batches are skipped. Multi-agent batches (or
    a mix) concatenate policy by policy into a :class:`MultiAgentBatch`.

    Raises:
        ValueError: If the non-empty batches do not have the same columns.
    """
    if any(isinstance(b, MultiAgentBatch) for b in batches):
        return MultiAgentBatch.concat_samples(batches)
    batches = [b for b in batches if b.count > 0]
    if not batches:
        return SampleBatch()
    keys = set(batches[0].keys())
    for batch in batches[1:]:
        if set(batch.keys()) != keys:
            raise ValueError(
                f"Cannot concatenate batches with different columns: {sorted(keys)} vs {sorted(batch.keys())}"
            )
    return SampleBatch({key: np.concatenate([b[key] for b in batches]) for key in batches[0].keys()})


class MultiAgentBatch:
    """The experience of several policies: one :class:`SampleBatch` per policy id.

    ``count`` is the number of env steps the batch covers; every agent that acted in a
    step adds a row to its policy's batch, so :meth:`agent_steps` (all rows) is at least
    :meth:`env_steps` when every step has an acting agent.

    Examples:
        >>> import numpy as np
        >>> b = MultiAgentBatch({"pol0": SampleBatch({"obs": np.zeros((4, 2))}),
        ...                      "pol1": SampleBatch({"obs": np.zeros((2, 2))})}, env_steps=3)
        >>> b.env_steps(), b.agent_steps(), sorted(b.policy_batches)
        (3, 6, ['pol0', 'pol1'])

    Args:
        policy_batches: ``{policy_id: SampleBatch}``.
        env_steps: The env steps the rows came from.
    """

    def __init__(self, policy_batches: Mapping[str, SampleBatch], env_steps: int) -> None:
        self.policy_batches: dict[str, SampleBatch] = dict(policy_batches)
        self.count = int(env_steps)

    def env_steps(self) -> int:
        """The env steps this batch covers."""
        return self.count

    def agent_steps(self) -> int:
        """All agents' steps: the rows of every policy batch together."""
        return sum(batch.count for batch in self.policy_batches.values())

    def copy(self) -> "MultiAgentBatch":
        """A batch with copies of every policy batch."""
        return MultiAgentBatch({pid: batch.copy() for pid, batch in self.policy_batches.items()}, self.count)

    def size_bytes(self) -> int:
        """Memory held by every policy batch's columns, in bytes."""
        return sum(batch.size_bytes() for batch in self.policy_batches.values())

    def as_multi_agent(self) -> "MultiAgentBatch":
        """The batch itself (as :meth:`SampleBatch.as_multi_agent` for a single-agent one)."""
        return self

    @staticmethod
    def wrap_as_needed(policy_batches: Mapping[str, SampleBatch], env_steps: int) -> SampleBatch | MultiAgentBatch:
        """A plain SampleBatch when the only policy is ``default_policy``, else a MultiAgentBatch."""
        if len(policy_batches) == 1 and DEFAULT_POLICY_ID in policy_batches:
            return policy_batches[DEFAULT_POLICY_ID]
        return MultiAgentBatch(policy_batches, env_steps)

    @staticmethod
    def concat_samples(batches: Sequence[SampleBatch | MultiAgentBatch]) -> "MultiAgentBatch":
        """Concatenates batches policy by policy; env steps add up (a SampleBatch counts
        as ``default_policy``'s).

        Raises:
            ValueError: If two batches of one policy do not have the same columns.
        """
        by_policy: dict[str, list[SampleBatch]] = {}
        env_steps = 0
        for batch in batches:
            multi = batch.as_multi_agent()
            env_steps += multi.count
            for policy_id, policy_batch in multi.policy_batches.items():
                by_policy.setdefault(policy_id, []).append(policy_batch)
        return MultiAgentBatch({pid: concat_samples(parts) for pid, parts in by_policy.items()}, env_steps)

    def __repr__(self) -> str:
        policies = ", ".join(f"{pid}: {batch.count} rows" for pid, batch in self.policy_batches.items())
        return f"MultiAgentBatch({self.count} env steps; {policies})"
