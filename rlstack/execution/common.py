"""RLlib 1.13's ``ray.rllib.execution.common``: the counter names execution plans use and
the plan's shared metrics.

1.x kept an execution plan's step counts in its iterators' metrics context; rlstack keeps
them in the trainer's counters (what ``timesteps_total``, ``num_env_steps_sampled`` and
checkpoints read), and :func:`counters_view` shows those under 1.x's names too:
``counters[STEPS_SAMPLED_COUNTER]`` is the trainer's ``num_env_steps_sampled``,
``counters[STEPS_TRAINED_COUNTER]`` its ``num_env_steps_trained``.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from typing import Any

from rlstack.execution.local_iterator import LocalIterator, MetricsContext
from rlstack.sample_batch import MultiAgentBatch, SampleBatch
from rlstack.utils.metrics import (
    LAST_TARGET_UPDATE_TS,
    LEARN_ON_BATCH_TIMER,
    NUM_ENV_STEPS_SAMPLED,
    NUM_ENV_STEPS_TRAINED,
    NUM_TARGET_UPDATES,
    SAMPLE_TIMER,
    SYNCH_WORKER_WEIGHTS_TIMER,
)

__all__ = [
    "AGENT_STEPS_SAMPLED_COUNTER",
    "AGENT_STEPS_TRAINED_COUNTER",
    "APPLY_GRADS_TIMER",
    "COMPUTE_GRADS_TIMER",
    "GRAD_WAIT_TIMER",
    "LAST_TARGET_UPDATE_TS",
    "LEARN_ON_BATCH_TIMER",
    "LOAD_BATCH_TIMER",
    "NUM_TARGET_UPDATES",
    "SAMPLE_TIMER",
    "STEPS_SAMPLED_COUNTER",
    "STEPS_TRAINED_COUNTER",
    "STEPS_TRAINED_THIS_ITER_COUNTER",
    "WORKER_UPDATE_TIMER",
    "counters_view",
]

# 1.x's counter names (its values): the first two are the trainer's env-step counters.
STEPS_SAMPLED_COUNTER = "num_steps_sampled"
AGENT_STEPS_SAMPLED_COUNTER = "num_agent_steps_sampled"
STEPS_TRAINED_COUNTER = "num_steps_trained"
STEPS_TRAINED_THIS_ITER_COUNTER = "num_steps_trained_this_iter"
AGENT_STEPS_TRAINED_COUNTER = "num_agent_steps_trained"

# Timers (result["timers"][name + "_time_ms"]). Weight syncs are timed under rlstack's
# name for them (1.x: "update"); the gradient timers name what rlstack's plans never time.
WORKER_UPDATE_TIMER = SYNCH_WORKER_WEIGHTS_TIMER
APPLY_GRADS_TIMER = "apply_grad"
COMPUTE_GRADS_TIMER = "compute_grads"
GRAD_WAIT_TIMER = "grad_wait"
LOAD_BATCH_TIMER = "load"

_ALIASES = {STEPS_SAMPLED_COUNTER: NUM_ENV_STEPS_SAMPLED, STEPS_TRAINED_COUNTER: NUM_ENV_STEPS_TRAINED}


class _CountersView(MutableMapping):
    # A trainer's counters (a defaultdict(int)), read and written under 1.x's names too.
    def __init__(self, store: MutableMapping[str, int]) -> None:
        self._store = store

    def __getitem__(self, key: str) -> int:
        return self._store[_ALIASES.get(key, key)]

    def __setitem__(self, key: str, value: int) -> None:
        self._store[_ALIASES.get(key, key)] = value

    def __delitem__(self, key: str) -> None:
        del self._store[_ALIASES.get(key, key)]

    def __iter__(self) -> Iterator[str]:
        return iter(self._store)

    def __len__(self) -> int:
        return len(self._store)

    def get(self, key: str, default: Any = None) -> Any:  # a missing counter reads as 0, as in 1.x
        return self._store.get(_ALIASES.get(key, key), default)


def counters_view(store: MutableMapping[str, int]) -> MutableMapping[str, int]:
    """``store`` (a trainer's counters) as an execution plan's counters: 1.x's
    :data:`STEPS_SAMPLED_COUNTER` and :data:`STEPS_TRAINED_COUNTER` read and write the
    env-step counters, every other name is its own counter."""
    return _CountersView(store)


def _get_shared_metrics() -> MetricsContext:
    """The running plan's metrics context (1.x's name; see ``LocalIterator.get_metrics``)."""
    return LocalIterator.get_metrics()


def _get_global_vars() -> dict[str, int]:
    """``{"timestep": ...}``: the step count the workers' schedules follow (the trainer's
    global timestep)."""
    metrics = _get_shared_metrics()
    if metrics.trainer is not None:
        return {"timestep": metrics.trainer.global_timestep()}
    return {"timestep": metrics.counters[STEPS_SAMPLED_COUNTER]}


def missing_operator(module: str, name: str, instead: str) -> Exception:
    """The error for 1.13's ``name`` of ``module`` that rlstack does not offer: an
    AttributeError for Python's own dunder look-ups, else a MissingModuleError (an
    ImportError) saying what to use ``instead``."""
    if name.startswith("__"):
        return AttributeError(f"module {module!r} has no attribute {name!r}")
    from rlstack._missing_modules import MissingModuleError

    rllib = "ray.rllib" + module[len("rlstack"):]
    return MissingModuleError(f"{module} has no {name} (RLlib's {rllib}.{name}): {instead}.", name=f"{module}.{name}")


def _check_sample_batch_type(batch: Any) -> None:
    """Raises a ValueError for anything but a SampleBatch or MultiAgentBatch."""
    if not isinstance(batch, (SampleBatch, MultiAgentBatch)):
        raise ValueError(f"Expected a SampleBatch or MultiAgentBatch, got {type(batch).__name__}: {batch!r:.200}")
